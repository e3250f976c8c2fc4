"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH (the stage and its steps: :mod:`.stage`)."""

from curate.stages.dedup.fuzzy.stage import (  # noqa: F401  (the names tests and jobs import from here)
    MAX_REFINE_ROUNDS, MEMBER_COLUMNS, REASON, SETS, FuzzyDedupSettings, FuzzyDedupStage, Joint, _attach_text_task,
    attach_text, decide, decide_pairs, pick_representatives, signature_table, split_pairs, star_edges,
)

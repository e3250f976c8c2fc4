"""The settings of ``fuzzy_dedup`` (one dataclass: job YAML and CLI flags) and its drop reason."""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.stages.dedup import keep as keeping
from curate.stages.errors import SettingsError
from curate.stages.stage import check_choice, check_range

REASON = "fuzzy_duplicate"
#: --keep's default: what fuzzy dedup did under the name smallest-id until smallest-id meant the smallest id
KEEP = "hub"


@dataclass(frozen=True)
class FuzzyDedupSettings:
    threshold: float = field(default=0.8, metadata={
        "help": "Jaccard similarity of near duplicates; chooses bands x rows unless both are given "
                "(the most rows per band that make a pair at the threshold a candidate with p >= 0.99)",
        "metavar": "T"})
    num_perm: int = field(default=128, metadata={"help": "MinHash permutations (signature length)",
                                                    "metavar": "N"})
    bands: int | None = field(default=None, metadata={"help": "LSH bands (with --rows)", "metavar": "B"})
    rows: int | None = field(default=None, metadata={"help": "LSH rows per band (with --bands)", "metavar": "R"})
    ngram: int = field(default=5, metadata={"help": "shingle size in words (or characters)", "metavar": "N"})
    shingle: str = field(default="word", metadata={"help": "shingles of words or of characters",
                                                   "choices": ("word", "char")})
    seed: int = field(default=42, metadata={"help": "seed of the MinHash permutations", "metavar": "S"})
    false_positive_check: bool = field(default=True, metadata={
        "help": "compute the true Jaccard of candidate pairs and drop those below the threshold; remove a "
                "document only for one it is itself similar to (--no-false-positive-check: trust the bands)"})
    in_memory_edges: int = field(default=1_000_000, metadata={
        "help": "connected components in one task when there are at most this many edges (0: always distributed)",
        "metavar": "N"})
    keep: str = field(default=KEEP, metadata={
        "help": "the survivor of each group: hub (the document similar to the most others, then the smallest id), "
                "smallest-id (the smallest id, however many others it is similar to), newest[:COLUMN] / "
                "oldest[:COLUMN] (a date column, default warc_date), longest (text), priority:COLUMN (largest "
                "value); their ties as hub",
        "metavar": "POLICY"})
    save_index: str | None = field(default=None, metadata={
        "help": "also write the dedup index (LSH bucket keys, ids, signatures, shingle sets, components) to this "
                "directory, a curate output of its own (manifest, checksums, _SUCCESS, curate verify); with "
                "--against: the index of the union", "metavar": "IDX"})
    against: tuple[str, ...] = field(default=(), metadata={
        "help": "saved indexes (--save-index) to deduplicate against, as if their documents came first in this "
                "run and were preferred; they are not read whole and the data they came from not at all",
        "metavar": "IDX", "nargs": "+", "input_file": True})

    audit_sample: int = field(default=2000, metadata={
        "help": "documents compared all against all with their true Jaccard to estimate this run's recall and "
                "precision (manifest dedup.audit, the report); 0: no audit", "metavar": "N"})

    def __post_init__(self):
        keeping.parse(self.keep)
        if not 0.0 < self.threshold < 1.0:
            raise SettingsError(f"threshold must be between 0 and 1 (exclusive); got {self.threshold!r}")
        check_range(self, "num_perm", 1, 8192)
        check_range(self, "ngram", 1, 1000)
        check_range(self, "seed", 0, 2**32 - 1)
        check_range(self, "in_memory_edges", 0)
        check_range(self, "audit_sample", 0, 100_000)
        check_choice(self, "shingle")
        if (self.bands is None) != (self.rows is None):
            raise SettingsError(f"bands and rows go together; got bands={self.bands!r} rows={self.rows!r}")
        if self.bands is not None:
            check_range(self, "bands", 1)
            check_range(self, "rows", 1)
            if self.bands * self.rows > self.num_perm:
                raise SettingsError(
                    f"bands x rows must be at most num_perm ({self.num_perm}); got {self.bands} x {self.rows}")

    def lsh_params(self) -> tuple[int, int]:
        """(bands, rows): given, or derived from the threshold (call once, on the client)."""
        if self.bands is not None:
            return self.bands, self.rows
        from curate.stages.dedup.lsh import recall_params

        return recall_params(self.threshold, self.num_perm)

"""The settings of ``semantic_dedup`` (one dataclass: job YAML, CLI flags, Python) and its drop reason."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field

from curate.stages.errors import SettingsError
from curate.stages.stage import check_choice, check_range

REASON = "semantic_duplicate"
#: --keep: which member of a cluster goes first (and so is kept)
KEEPS = ("hard", "easy", "random", "smallest-id")
#: --rule: NeMo Curator's (compared with every earlier member) or the greedy one (with earlier kept members)
RULES = ("nemo", "greedy")
INSTALL = "pip install 'curate-llm[semantic]'"


@dataclass(frozen=True)
class SemanticDedupSettings:
    model: str | None = field(default=None, metadata={
        "help": "a local encoder folder: a static model in model2vec's format (model.safetensors with an "
                "embeddings matrix, tokenizer.json, config.json: the mean of its token vectors) or a Hugging "
                "Face encoder (config.json, *.safetensors, tokenizer: mean pooling over the attention mask); "
                "required unless --embeddings", "metavar": "PATH"})
    embeddings: str | None = field(default=None, metadata={
        "help": "the embeddings folder of an earlier run on the same input (OUT.side/_work/embeddings): no "
                "embedding, no model needed", "metavar": "DIR"})
    clusters: int = field(default=1000, metadata={
        "help": "k-means clusters (a job of fewer than clusters x 10 documents uses documents // 10)",
        "metavar": "K"})
    eps: float = field(default=0.01, metadata={
        "help": "a document is a duplicate when its cosine to an earlier member of its cluster is >= 1 - eps",
        "metavar": "EPS"})
    fit_sample: int = field(default=100_000, metadata={
        "help": "documents k-means is fitted on (chosen by a seeded hash of the id: the same for any "
                "partitioning); all when the job has fewer", "metavar": "N"})
    keep: str = field(default="hard", metadata={
        "help": "the order within a cluster, first kept: hard (farthest from the centroid first, NeMo's "
                "default), easy (nearest first), random (seeded), smallest-id; ties: the smallest id",
        "choices": KEEPS})
    rule: str = field(default="nemo", metadata={
        "help": "nemo: removed when close to any earlier member, kept or not (NeMo Curator's); greedy: "
                "removed only when close to an earlier kept member (keeps no two close, removes no more)",
        "choices": RULES})
    probes: int | None = field(default=None, metadata={
        "help": "clusters a document is compared in: its nearest (where it is decided) and the next nearest "
                "ones, where it is an earlier witness for their members, so a pair split by a cluster boundary "
                "is still found; 1 is NeMo Curator's within-cluster comparison (default: 2 with --rule nemo, "
                "1 with greedy, which compares only within the cluster)", "metavar": "P"})
    seed: int = field(default=42, metadata={"help": "seed of the fit sample, k-means and --keep random",
                                            "metavar": "S"})
    max_tokens: int = field(default=512, metadata={
        "help": "tokens per document the encoder reads (longer documents are truncated)", "metavar": "N"})
    batch_size: int = field(default=64, metadata={
        "help": "documents per encoder call (a transformer's forward pass)", "metavar": "N"})
    dtype: str = field(default="float32", metadata={
        "help": "the stored embeddings' type (float16 halves their disk)", "choices": ("float32", "float16")})
    block_size: int = field(default=1024, metadata={
        "help": "rows of one comparison block: memory is block_size^2 floats, never a cluster^2 matrix",
        "metavar": "N"})
    #: the model's (or --embeddings folder's) files, sizes and times: a changed model changes the fingerprint
    model_stamp: str = field(default="", init=False)

    def __post_init__(self):
        check_choice(self, "keep")
        check_choice(self, "rule")
        check_choice(self, "dtype")
        check_range(self, "clusters", 1, 1_000_000)
        check_range(self, "fit_sample", 1)
        check_range(self, "seed", 0, 2**32 - 1)
        check_range(self, "max_tokens", 1)
        check_range(self, "batch_size", 1)
        check_range(self, "block_size", 16, 1 << 16)
        if self.probes is None:
            object.__setattr__(self, "probes", 2 if self.rule == "nemo" else 1)
        check_range(self, "probes", 1, 8)
        if self.rule == "greedy" and self.probes > 1:
            raise SettingsError("probes: --rule greedy decides within one cluster only; use --probes 1")
        if not 0.0 <= self.eps < 1.0:
            raise SettingsError(f"eps must be in [0, 1); got {self.eps!r}")
        if self.embeddings:
            if not os.path.isdir(self.embeddings):
                raise SettingsError(f"embeddings: no such directory {self.embeddings!r} (an earlier run's "
                                    "OUT.side/_work/embeddings)")
            from curate.stages.dedup.semantic.encoders import stamp

            object.__setattr__(self, "model_stamp", stamp(self.embeddings))
            return
        if not self.model:
            raise SettingsError("semantic_dedup needs --model PATH (a local encoder folder) or --embeddings DIR")
        from curate.stages.dedup.semantic.encoders import model_kind, stamp

        kind = model_kind(self.model)
        needs = ["safetensors"] + (["torch", "transformers"] if kind == "transformer" else [])
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        if missing:
            extra = "semantic,hf" if "torch" in missing else "semantic"
            raise SettingsError(f"semantic_dedup needs {', '.join(missing)}: pip install 'curate-llm[{extra}]'")
        object.__setattr__(self, "model_stamp", stamp(self.model))

    @property
    def threshold(self):
        """The cosine at or above which a pair is a duplicate, as the float32 every comparison uses."""
        import numpy as np

        return np.float32(1.0 - self.eps)

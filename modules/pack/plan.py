"""Pack's settings and its plan (sequence length, ids of bos, pad and eod, the long-document policy), resolved once against the token set."""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.stages.errors import SettingsError
from curate.stages.stage import check_choice, check_range

LONG_DOCS = ("split", "window", "drop")


#: tokens per Parquet row group (and per assembly batch): bounds the memory of one task
ROW_GROUP_TOKENS = 1 << 20


UINT16_MAX_VOCAB = 65535  # the contract: uint16 only for vocabularies of at most 65,535 ids


COLUMNS = ("input_ids", "loss_mask", "doc_starts", "doc_index", "doc_offset", "valid_token_count", "pack_id")


TOO_LONG = "too_long"


@dataclass(frozen=True)
class PackSettings:
    seq_length: int = field(default=8192, metadata={"help": "tokens per row", "metavar": "N"})
    long_docs: str = field(default="split", metadata={
        "help": "documents longer than a row: split into chunks, overlapping windows, or drop",
        "choices": LONG_DOCS})
    stride: int | None = field(default=None, metadata={
        "help": "--long-docs window: tokens between window starts (default: seq_length // 2)", "metavar": "S"})
    dtype: str = field(default="uint32", metadata={"help": "input_ids element type", "choices": ("uint32", "uint16")})
    seed: int = field(default=0, metadata={"help": "seed of the tie-breaks and of the row order"})
    bos_id: int | None = field(default=None, metadata={
        "help": "BOS id (default: the tokenizer's, else its end-of-document id)", "metavar": "ID"})
    pad_id: int | None = field(default=None, metadata={
        "help": "padding id (default: the end-of-document id, or 0 when that is the BOS)", "metavar": "ID"})
    input_prefix: str | None = field(default=None, metadata={
        "help": "the token set (tokenize --prefix) when the input directory holds several", "metavar": "NAME"})

    def __post_init__(self):
        check_range(self, "seq_length", lo=2)
        check_choice(self, "long_docs")
        check_choice(self, "dtype")
        if self.stride is not None:
            if self.long_docs != "window":
                raise SettingsError(f"stride applies to --long-docs window only; got long_docs={self.long_docs!r}")
            check_range(self, "stride", lo=1, hi=self.seq_length - 1)
        for name in ("bos_id", "pad_id", "seed"):
            check_range(self, name, lo=0)
        if self.bos_id is not None and self.bos_id == self.pad_id:
            raise SettingsError(f"pad_id must differ from bos_id (both {self.bos_id}): BOS ids count documents")

    @property
    def window_stride(self) -> int:
        return self.stride if self.stride is not None else self.seq_length // 2


@dataclass(frozen=True)
class PackPlan:
    """Everything a pair task needs, resolved once on the client from the settings and the token set."""

    seq_length: int
    long_docs: str
    stride: int
    seed: int
    bos_id: int
    pad_id: int
    dtype: str
    vocab_size: int
    has_bos: bool  # the input documents start with bos_id already
    strip_eod: bool  # drop each document's trailing EOD (it is the BOS: GPT-2 style separator)


def resolve_plan(settings: PackSettings, ts) -> PackPlan:
    """Ids and dtype from the settings and the token set's manifest; SettingsError naming the problem."""
    vocab = ts.vocab_size
    if settings.dtype == "uint16" and vocab > UINT16_MAX_VOCAB:
        raise SettingsError(f"dtype uint16 cannot hold the ids of a {vocab:,}-id vocabulary (more than 65,535); "
                            "use --dtype uint32")
    bos = settings.bos_id
    if bos is None:
        bos = ts.bos_id if ts.bos_id is not None else ts.eod_id
    if bos is None:
        raise SettingsError("the tokenizer has neither a BOS nor an end-of-document token: pass --bos-id")
    pad = settings.pad_id
    if pad is None:
        pad = ts.eod_id if ts.eod_id is not None and ts.eod_id != bos else (0 if bos != 0 else 1)
    for what, v in (("bos_id", bos), ("pad_id", pad)):
        if not 0 <= v < vocab:
            raise SettingsError(f"{what} {v} is outside the vocabulary (size {vocab:,})")
    if pad == bos:
        raise SettingsError(f"pad_id must differ from bos_id (both {bos}): BOS ids count documents")
    has_bos = bool(ts.add_bos and ts.bos_id == bos)
    strip_eod = bool(ts.append_eod and ts.eod_id == bos)
    return PackPlan(settings.seq_length, settings.long_docs, settings.window_stride, settings.seed, int(bos),
                    int(pad), settings.dtype, vocab, has_bos, strip_eod)

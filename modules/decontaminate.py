"""``decontaminate``: cut benchmark test-set text out of the training data (NeMo Curator's
``TaskDecontamination``, after GPT-3's).

    curate decontaminate --input IN --output OUT --tasks squad=squad_test.jsonl,lambada.parquet \\
                         [--task-fields question,answers] [--max-ngram-size 13] [--max-matches 10] \\
                         [--min-document-length 200] [--remove-char-each-side 200] [--max-splits 10]

Tasks are files the user gives (JSONL or Parquet; nothing is downloaded), named ``NAME=PATH`` or by
the file's base name. Every string (or list of strings) in ``task_fields`` of every record is one
task text. Words are whitespace-separated, lower-cased, with ASCII punctuation deleted (``"don't"`` ->
``dont``); words that are only punctuation vanish. A task text of ``max_ngram_size`` (13) words or
more gives all its 13-word n-grams; a shorter one of at least ``min_ngram_size`` (8) words is one
n-gram as it is; shorter texts give nothing.

1. Count (distributed): each partition counts the non-overlapping, leftmost occurrences of task
   n-grams in its documents (a longer n-gram wins at the same start) and returns only the counts;
   the counts are summed by a tree reduction (Dask's groupby-sum over the per-partition tables), never
   in one task over the corpus. The task n-gram set is small and goes to every worker once (one
   graph key all tasks share).
2. An n-gram seen more than ``max_matches`` times in the corpus is too common to be contamination
   (boilerplate, a famous quotation) and is left alone.
3. Remove (per partition): at each remaining match the document is cut: the part before keeps up to
   the last ``. ! ?`` at or before ``remove_char_each_side`` characters ahead of the match, the part
   after resumes after the first ``. ! ?`` at or after ``remove_char_each_side`` characters past it
   and is searched again. Fragments of ``min_document_length`` characters or less are dropped. A
   document left with no fragment is rejected as ``decontaminated_empty``; one cut into more than
   ``max_splits`` fragments is rejected whole as ``decontaminated_too_many_splits``. A document with no
   match is kept unchanged, whatever its length; fragments of a cut document are new rows with ids
   ``ID#0``, ``ID#1``, ... and the other columns copied.

Differences from NeMo 0.9, all on purpose: NeMo computes word positions after deleting punctuation
and then cuts the original text at those positions, so its cuts drift left by the number of
punctuation marks before the match; here positions are those of the original text. NeMo splits
words on spaces only (a newline does not separate words there) and never finds a match in a
document of 13 words or fewer; here any whitespace separates words and short documents are searched
too. With text without punctuation before a match and single spaces, both cut the same fragments.

The manifest has, per task: its n-grams, the distinct n-grams found, their occurrences, how many were
too common, and the documents cut for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import string
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.stage import REASON, Stage, check_range

WORD = re.compile(r"\S+")
PUNCT = str.maketrans("", "", string.punctuation)
#: the same deletion as a regex: 2-3x faster than str.translate on whole documents with non-ASCII text
PUNCT_RUNS = re.compile("[" + re.escape(string.punctuation) + "]+")
ENDS = ".!?"
TASKS_COLUMN, FRAGMENT_COLUMN = "_dc_tasks", "_dc_fragment"  # internal: for the manifest, then dropped
EMPTY, TOO_MANY = "decontaminated_empty", "decontaminated_too_many_splits"


def parse_tasks(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    return tuple(value)


@dataclass(frozen=True)
class DecontaminateSettings:
    tasks: tuple[str, ...] = field(default=(), metadata={
        "help": "task test sets: NAME=PATH or PATH (JSONL or Parquet), comma-separated", "metavar": "NAME=PATH,..."})
    task_fields: tuple[str, ...] = field(default=("text",), metadata={
        "help": "fields of a task record holding its texts (strings or lists of strings)", "metavar": "FIELD,..."})
    max_ngram_size: int = field(default=13, metadata={"help": "n-gram size in words", "metavar": "N"})
    min_ngram_size: int = field(default=8, metadata={
        "help": "a task text with fewer words is ignored; one shorter than max-ngram-size is one n-gram",
        "metavar": "N"})
    max_matches: int = field(default=10, metadata={
        "help": "an n-gram seen more often than this in the corpus is too common to remove", "metavar": "N"})
    min_document_length: int = field(default=200, metadata={
        "help": "fragments of this many characters or fewer are dropped", "metavar": "CHARS"})
    remove_char_each_side: int = field(default=200, metadata={
        "help": "characters removed on each side of a match (then up to a sentence end)", "metavar": "CHARS"})
    max_splits: int = field(default=10, metadata={
        "help": "a document cut into more fragments than this is dropped whole", "metavar": "N"})
    #: sha256 of the task files' bytes: editing one reruns the stage (not a flag)
    tasks_sha256: str = field(default="", init=False)

    def __post_init__(self):
        if not self.tasks:
            raise SettingsError("tasks: give at least one task file (NAME=PATH or PATH, JSONL or Parquet)")
        if not self.task_fields:
            raise SettingsError("task_fields must name at least one field")
        check_range(self, "max_ngram_size", 1, 1000)
        check_range(self, "min_ngram_size", 1, self.max_ngram_size)
        for name in ("max_matches", "min_document_length", "remove_char_each_side"):
            check_range(self, name, 0)
        check_range(self, "max_splits", 1)
        h = hashlib.sha256()
        names = set()
        for name, path in task_files(self.tasks):
            if name in names:
                raise SettingsError(f"tasks: two tasks are named {name!r}; name them NAME=PATH")
            names.add(name)
            if not os.path.isfile(path):
                raise SettingsError(f"tasks: no such file {path!r}")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        object.__setattr__(self, "tasks_sha256", h.hexdigest())


def task_files(tasks) -> list[tuple[str, str]]:
    out = []
    for spec in tasks:
        name, sep, path = spec.partition("=")
        if not sep:
            path = spec
            base = os.path.basename(spec)
            name = base.split(".")[0] or base
        out.append((name.strip(), path.strip()))
    return out


# --------------------------------------------------------------------------- words and n-grams


def words(text: str) -> tuple[list[str], list[int], list[int]]:
    """(normalised words, start offsets, end offsets in ``text``): lower case, ASCII punctuation deleted.

    A word's span leaves out punctuation at its edges, so the full stop after a matched word is where
    the text after the match can start (as in NeMo, whose positions are those of the text without
    punctuation)."""
    out, starts, ends = [], [], []
    for m in WORD.finditer(text):
        raw = m.group()
        w = raw.lower().translate(PUNCT)
        if w:
            out.append(w)
            starts.append(m.start() + len(raw) - len(raw.lstrip(string.punctuation)))
            ends.append(m.start() + len(raw.rstrip(string.punctuation)))
    return out, starts, ends


#: a whitespace-separated token with something other than ASCII punctuation: exactly the tokens that
#: give a word (a token of punctuation alone vanishes)
TOKEN = re.compile(r"[^\s]*[^\s" + re.escape(string.punctuation) + r"][^\s]*")


def span(text: str, first: int, last: int) -> tuple[int, int]:
    """Character offsets of words ``first`` to ``last`` (as :func:`plain_words` numbers them), without
    the punctuation at their outer edges; only the two tokens are looked at in Python."""
    tokens = TOKEN.finditer(text)
    a = b = None
    for k, m in enumerate(tokens):
        if k == first:
            a = m
        if k == last:
            b = m
            break
    raw_a, raw_b = a.group(), b.group()
    return (a.start() + len(raw_a) - len(raw_a.lstrip(string.punctuation)),
            b.start() + len(raw_b.rstrip(string.punctuation)))


def plain_words(text: str) -> list[str]:
    """The words of :func:`words` without their offsets: three C calls over the whole text. Deleting
    punctuation never removes whitespace, so the word boundaries are the same."""
    return PUNCT_RUNS.sub("", text.lower()).split()


def task_ngrams(texts, max_n: int, min_n: int) -> set[tuple[str, ...]]:
    grams: set[tuple[str, ...]] = set()
    for text in texts:
        w = plain_words(text)
        if len(w) < min_n:
            continue
        if len(w) < max_n:
            grams.add(tuple(w))
        for i in range(len(w) - max_n + 1):
            grams.add(tuple(w[i:i + max_n]))
    return grams


def read_task_texts(path: str, fields) -> list[str]:
    """Every string (or string in a list) under ``fields`` in a JSONL or Parquet task file."""
    import json

    if path.endswith(".parquet"):
        df = pd.read_parquet(path)
        records = df.to_dict("records")
    else:
        import gzip

        opener = gzip.open if path.endswith(".gz") else open
        records = []
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except ValueError as e:
                        raise SettingsError(f"task file {path} line {n}: not valid JSON ({e})") from None
    texts = []
    for rec in records:
        if not isinstance(rec, dict):
            continue
        for f in fields:
            v = rec.get(f)
            if isinstance(v, str):
                texts.append(v)
            elif isinstance(v, (list, tuple, np.ndarray)):
                texts.extend(x for x in v if isinstance(x, str))
    if not texts:
        raise SettingsError(f"task file {path}: no text under {', '.join(fields)} (set --task-fields)")
    return texts


@dataclass(frozen=True)
class Index:
    """Task n-grams by their first two words (one dict lookup per corpus word), longest first."""

    grams: dict  # n-gram tuple -> task indices (a tuple)
    anchors: dict  # (w0, w1) -> n-gram lengths to try, longest first; (w0,) for 1-word n-grams
    singles: bool = False  # some n-grams are one word long

    @classmethod
    def build(cls, per_task: list[set]) -> Index:
        grams: dict = {}
        for t, gs in enumerate(per_task):
            for g in gs:
                grams[g] = grams.get(g, ()) + (t,)
        return cls.build_from(grams)

    @classmethod
    def build_from(cls, grams: dict) -> Index:
        anchors: dict = {}
        for g in grams:
            anchors.setdefault(g[:2], set()).add(len(g))
        return cls(grams, {k: tuple(sorted(v, reverse=True)) for k, v in anchors.items()},
                   any(len(k) == 1 for k in anchors))

    def find(self, w: list[str], start: int = 0):
        """The leftmost match at or after word ``start``: (position, length) or None."""
        anchors, grams = self.anchors, self.grams
        n = len(w)
        if self.singles:  # 1-word n-grams (min_ngram_size 1): check both keys
            for i in range(start, n):
                lengths = anchors.get(tuple(w[i:i + 2]), ()) + anchors.get((w[i],), ())
                for L in lengths:
                    if i + L <= n and tuple(w[i:i + L]) in grams:
                        return i, L
            return None
        # word pairs made by zip (C speed): one dict lookup per word
        for i, pair in enumerate(zip(w[start:], w[start + 1:]), start):
            lengths = anchors.get(pair)
            if lengths is not None:
                for L in lengths:
                    if i + L <= n and tuple(w[i:i + L]) in grams:
                        return i, L
        return None


def count_matches(texts, index: Index) -> Counter:
    """Occurrences of each task n-gram in ``texts`` (non-overlapping, leftmost first)."""
    counts: Counter = Counter()
    for text in texts:
        w = plain_words(text)
        i = 0
        while (hit := index.find(w, i)) is not None:
            pos, length = hit
            counts[tuple(w[pos:pos + length])] += 1
            i = pos + length
    return counts


def cut(text: str, start: int, end: int, settings: DecontaminateSettings) -> tuple[str, str]:
    """(text before, text after) a match at characters [start, end), NeMo's ``_split_text`` rule."""
    pos = start - settings.remove_char_each_side
    first = ""
    while pos > 0 and text[pos] not in ENDS:
        pos -= 1
    if pos > 0:
        first = text[:pos + 1]
    pos = end + settings.remove_char_each_side
    second = ""
    while pos < len(text) and text[pos] not in ENDS:
        pos += 1
    if pos + 1 < len(text):
        second = text[pos + 1:]
    return first, second


def decontaminate_text(text: str, index: Index, settings: DecontaminateSettings) -> tuple[list[str], set]:
    """(fragments, task indices cut out); a text without a match is ``[text]`` and an empty set."""
    fragments: list[str] = []
    tasks: set = set()
    todo = text
    while True:
        w = plain_words(todo)
        hit = index.find(w)
        if hit is None:
            fragments.append(todo)
            return fragments, tasks
        pos, length = hit
        tasks.update(index.grams[tuple(w[pos:pos + length])])
        first, second = cut(todo, *span(todo, pos, pos + length - 1), settings)
        if len(first) > settings.min_document_length:
            fragments.append(first)
        if len(second) <= settings.min_document_length:
            return fragments, tasks
        todo = second


# --------------------------------------------------------------------------- partitions


def count_partition(df: pd.DataFrame, index: Index) -> pd.DataFrame:
    """(ngram, count) of one partition's kept documents; n-grams as space-joined strings."""
    texts = df["text"][df[REASON].isna()] if REASON in df.columns else df["text"]
    counts = count_matches(texts.dropna().tolist(), index)
    return pd.DataFrame({"ngram": pd.Series([" ".join(g) for g in counts], dtype=object),
                         "count": pd.Series(list(counts.values()), dtype="int64")})


def remove_partition(df: pd.DataFrame, index: Index, settings: DecontaminateSettings) -> pd.DataFrame:
    """The pure removal step: cut documents become fragment rows, rejected ones get a reason.

    Two internal columns feed the manifest (the stage drops them): ``_dc_tasks``, the task indices
    cut out, on the first row of each cut document only, and ``_dc_fragment``, the fragment number
    (-1 for a document left as it was)."""
    from curate.stages.dataset import STRING, mark_dropped

    kept = df[REASON].isna().to_numpy() if REASON in df.columns else np.ones(len(df), dtype=bool)
    texts, ids = df["text"].tolist(), df["id"].tolist()
    rows, new_text, new_id, tags, frag_no, reasons = [], [], [], [], [], []

    def emit(r, text, id_, tag, k, reason):
        rows.append(r), new_text.append(text), new_id.append(id_), tags.append(tag), frag_no.append(k)
        reasons.append(reason)

    for r in range(len(df)):
        text = texts[r]
        if not kept[r] or not isinstance(text, str):
            emit(r, text, ids[r], "", -1, None)
            continue
        frags, tasks = decontaminate_text(text, index, settings)
        tag = ",".join(map(str, sorted(tasks)))
        if not tasks:
            emit(r, text, ids[r], "", -1, None)
        elif not frags or len(frags) > settings.max_splits:
            emit(r, text, ids[r], tag, -1, EMPTY if not frags else TOO_MANY)
        else:
            for k, frag in enumerate(frags):
                emit(r, frag, f"{ids[r]}#{k}", tag if k == 0 else "", k, None)
    out = df.iloc[rows].reset_index(drop=True)
    out = out.assign(id=pd.Series(new_id, dtype=STRING), text=pd.Series(new_text, dtype=STRING),
                     **{TASKS_COLUMN: pd.Series(tags, dtype=STRING),
                        FRAGMENT_COLUMN: pd.Series(frag_no, dtype="int64")})
    for reason in (EMPTY, TOO_MANY):
        out = mark_dropped(out, np.array([x == reason for x in reasons], dtype=bool), reason)
    return out


def partition_stats(df: pd.DataFrame, n_tasks: int) -> dict:
    """Documents cut per task, documents cut overall, fragments written."""
    per_task = np.zeros(n_tasks, dtype=np.int64)
    tags = df[TASKS_COLUMN].fillna("")
    for tag in tags[tags != ""].tolist():
        for t in tag.split(","):
            per_task[int(t)] += 1
    ok = df[REASON].isna() if REASON in df.columns else pd.Series(True, index=df.index)
    return {"documents": per_task.tolist(), "cut": int((tags != "").sum()),
            "fragments": int(((df[FRAGMENT_COLUMN] >= 0) & ok).sum()), "in": int((df[FRAGMENT_COLUMN] <= 0).sum())}


def merge_stats(parts: list[dict], n_tasks: int) -> dict:
    out = {"documents": [0] * n_tasks, "cut": 0, "fragments": 0, "in": 0}
    for p in parts:
        out["documents"] = [a + b for a, b in zip(out["documents"], p["documents"])]
        for k in ("cut", "fragments", "in"):
            out[k] += p[k]
    return out


class DecontaminateStage(Stage):
    name = "decontaminate"
    Settings = DecontaminateSettings
    help = "cut benchmark (task) n-grams out of documents, as NeMo Curator's TaskDecontamination"

    def run(self, settings: DecontaminateSettings, ctx) -> dict:
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset

        names, per_task = [], []
        for name, path in task_files(settings.tasks):
            names.append(name)
            per_task.append(task_ngrams(read_task_texts(path, settings.task_fields),
                                        settings.max_ngram_size, settings.min_ngram_size))
        index = Index.build(per_task)
        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)

        # 1. count: per-partition tables, summed by Dask's tree reduction; the index is one shared key
        shared = dask.delayed(index, pure=True)
        meta = pd.DataFrame({"ngram": pd.Series([], dtype=object), "count": pd.Series([], dtype="int64")})
        tables = ddf.map_partitions(count_partition, shared, meta=meta)
        totals = tables.groupby("ngram")["count"].sum(split_every=8)
        (counts,) = ctx.run_compute(totals)
        counts = {tuple(k.split(" ")): int(v) for k, v in counts.items()}

        # 2. too common n-grams stay
        remove_index = Index.build_from({g: t for g, t in index.grams.items()
                                         if g in counts and counts[g] <= settings.max_matches})

        # 3. remove, then write; the statistics come from the same partitions, in the same compute
        shared = dask.delayed(remove_index, pure=True)
        out_meta = remove_partition(ddf._meta, remove_index, settings)
        out = ddf.map_partitions(remove_partition, shared, settings, meta=out_meta)
        parts = out.to_delayed()
        total = dask.delayed(merge_stats)([dask.delayed(partition_stats)(p, len(names)) for p in parts], len(names))
        internal = [TASKS_COLUMN, FRAGMENT_COLUMN]
        body = dd.from_delayed([dask.delayed(pd.DataFrame.drop)(p, columns=internal) for p in parts],
                               meta=out_meta.drop(columns=internal), verify_meta=False)
        tasks = {}
        for t, name in enumerate(names):
            found = {g: c for g, c in counts.items() if t in index.grams[g]}
            tasks[name] = {
                "ngrams": len(per_task[t]),
                "matched_ngrams": len(found),
                "occurrences": int(sum(found.values())),
                "too_common": sum(1 for c in found.values() if c > settings.max_matches),
            }
        info = {"tasks": tasks}

        def compute(*collections):
            *results, s = ctx.run_compute(*collections, total)
            for t, name in enumerate(names):
                tasks[name]["documents_cut"] = s["documents"][t]
            # counts.in of the manifest counts rows written (fragments), this the documents read
            info.update(documents_in=s["in"], documents_cut=s["cut"], fragments_written=s["fragments"])
            return tuple(results)

        return dataset.write_dataset(body, dataclasses.replace(ctx, compute=compute), stage=self.name,
                                     settings=settings, extra={"decontaminate": info})

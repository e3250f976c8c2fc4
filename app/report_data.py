"""What the HTML page of a run shows, read from what the run left on disk, as plain data (:func:`collect`).

Each stage's ``_manifest.json``, ``_rejects/``, ``_duplicates/`` and the tokenizer's ``.idx`` files, plus
``_reports/run.json`` (cluster, workers and the performance report, written by ``curate run``).
Everything read is bounded: text is streamed column by column in batches, example rows stop at a few
per reason, histograms are fixed-bin. The page itself is drawn by ``report_html`` (layout) and
``report_charts`` (figures), so tests check these figures without a browser.
"""

from __future__ import annotations

import glob
import json
import os

from curate.app.report_diff import word_diff
from curate.app.report_format import _bytes
from curate.app.run_folders import load_manifest, stage_dirs
from curate.stages.output import side_glob

#: rejected documents shown per reason, and their first characters
EXAMPLES_PER_REASON = 3
EXAMPLE_CHARS = 300
#: near-duplicate pairs shown per dedup stage
EXAMPLE_PAIRS = 5
#: rows per batch when streaming a column
BATCH_ROWS = 65536
#: compressed bytes of one stage's output read to count text bytes exactly; beyond that the rest is
#: estimated from the rows (Parquet metadata) at the bytes per row measured so far
BYTES_BUDGET = 256 << 20
RUN_INFO = "run.json"
#: the page at the end of ``curate run`` runs ``verify`` (which reads every token) up to this many
#: bytes of ``.bin`` files; beyond, it says how to run it
AUTO_VERIFY_BYTES = 4 << 30


# --------------------------------------------------------------------------- reading what a run left


def read_run_info(out: str) -> dict:
    try:
        with open(os.path.join(out, "_reports", RUN_INFO), encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def data_files(folder: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(folder, "part-*")) if p.endswith((".parquet", ".jsonl")))


def text_bytes(folder: str, budget: int = BYTES_BUDGET) -> tuple[int | None, bool]:
    """(UTF-8 bytes of the ``text`` column of the kept documents, estimated?), streamed; None if no text."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = data_files(folder)
    total = rows = read = 0
    left_rows = 0
    estimated = False
    for path in files:
        if path.endswith(".jsonl"):
            # JSONL: the file size (text plus a little JSON) is the honest cheap figure
            total += os.path.getsize(path)
            estimated = True
            continue
        pf = pq.ParquetFile(path)
        if "text" not in pf.schema_arrow.names:
            return None, False
        if read > budget:
            left_rows += pf.metadata.num_rows
            continue
        for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=["text"]):
            n = pc.sum(pc.binary_length(pc.cast(b.column(0), "large_binary"))).as_py()
            total += int(n or 0)
            rows += b.num_rows
        read += os.path.getsize(path)
    if left_rows:
        total += int(left_rows * (total / rows if rows else 0))
        estimated = True
    return total, estimated


def example_rejects(folder: str, per_reason: int = EXAMPLES_PER_REASON, chars: int = EXAMPLE_CHARS,
                    dropped: dict | None = None) -> dict:
    """reason -> up to ``per_reason`` (id, first ``chars`` of the text or '', detail) from ``_rejects/``;
    reading stops once every reason of ``dropped`` (the manifest's counts) has its examples."""
    import pyarrow.parquet as pq

    out: dict[str, list] = {}
    wanted = {k: min(per_reason, v) for k, v in (dropped or {}).items()}

    def enough() -> bool:
        return bool(wanted) and all(len(out.get(k, ())) >= n for k, n in wanted.items())
    for path in sorted(side_glob(folder, "_rejects")):
        if path.endswith(".parquet"):
            pf = pq.ParquetFile(path)
            cols = [c for c in ("id", "text", "_reason", "_detail") if c in pf.schema_arrow.names]
            batches = (b.to_pylist() for b in pf.iter_batches(batch_size=1024, columns=cols))
        elif path.endswith(".jsonl"):
            def _lines(path=path):
                with open(path, encoding="utf-8") as f:
                    chunk = []
                    for line in f:
                        if line.strip():
                            chunk.append(json.loads(line))
                        if len(chunk) == 1024:
                            yield chunk
                            chunk = []
                    if chunk:
                        yield chunk
            batches = _lines()
        else:
            continue
        for batch in batches:
            for r in batch:
                reason = r.get("_reason") or "?"
                got = out.setdefault(reason, [])
                if len(got) < per_reason:
                    got.append((str(r.get("id", "")), (r.get("text") or "")[:chars], r.get("_detail") or ""))
            if enough():
                return out
    return out


def dedup_groups(folder: str, key: str) -> dict:
    """Sizes of the duplicate groups (``key``: ``hash`` or ``component``) in ``_duplicates/``: size ->
    number of groups. Each group lies in one part (the stage shuffles on it), so parts are read one by one."""
    import pyarrow.parquet as pq

    sizes: dict[int, int] = {}
    for path in sorted(side_glob(folder, "_duplicates", "part-*.parquet")):
        col = pq.read_table(path, columns=[key]).column(0).to_pandas()
        for size, n in col.value_counts().value_counts().items():
            sizes[int(size)] = sizes.get(int(size), 0) + int(n)
    return dict(sorted(sizes.items()))


def dedup_pairs(folder: str, manifest: dict, limit: int = EXAMPLE_PAIRS) -> list[dict]:
    """A few (removed id, kept id, Jaccard, both texts' starts, and what differs between the two texts)
    from ``_duplicates/`` and the stage's input."""
    import pyarrow.parquet as pq

    pairs = []
    for path in sorted(side_glob(folder, "_duplicates", "part-*.parquet")):
        t = pq.read_table(path, columns=["id", "kept_id", "removed"]).to_pandas()
        t = t[t["removed"].astype(bool) & t["kept_id"].notna()]  # no kept id: it was erased (curate erase)
        pairs.extend(zip(t["id"].astype(str), t["kept_id"].astype(str)))
        if len(pairs) >= limit:
            break
    pairs = pairs[:limit]
    if not pairs:
        return []
    texts = lookup_texts(manifest.get("input") or [], {i for p in pairs for i in p})
    settings = manifest.get("settings") or {}
    out = []
    for a, b in pairs:
        ta, tb = texts.get(a), texts.get(b)
        jac = None
        if ta is not None and tb is not None:
            if manifest.get("stage") == "exact_dedup":
                jac = 1.0 if ta == tb else None
            else:
                from curate.stages.dedup import minhash

                jac = float(minhash.jaccard([ta], [tb], settings.get("ngram", 5), settings.get("shingle", "word"))[0])
        pair = {"removed": a, "kept": b, "jaccard": jac, "removed_text": (ta or "")[:EXAMPLE_CHARS],
                "kept_text": (tb or "")[:EXAMPLE_CHARS]}
        if ta is not None and tb is not None:  # what differs, word by word, around the first difference
            pair["removed_diff"], pair["kept_diff"] = word_diff(ta, tb)
        out.append(pair)
    return out


def lookup_texts(inputs: list[str], ids: set[str]) -> dict[str, str]:
    """id -> text for ``ids`` in a dataset folder's Parquet parts (reads the id column, then the hits)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found: dict[str, str] = {}
    wanted = pa.array(sorted(ids))
    for spec in inputs:
        files = data_files(spec) if os.path.isdir(spec) else []
        for path in files:
            if not path.endswith(".parquet"):
                continue
            pf = pq.ParquetFile(path)
            # the id column of each row group first; the text only of row groups that hold a wanted id
            for rg in range(pf.metadata.num_row_groups):
                hit = pc.is_in(pc.cast(pf.read_row_group(rg, columns=["id"]).column(0), pa.string()),
                               value_set=wanted)
                if not pc.any(hit).as_py():
                    continue
                rows = pf.read_row_group(rg, columns=["id", "text"]).filter(hit)
                for r in rows.to_pylist():
                    found[str(r["id"])] = r["text"]
            if len(found) == len(ids):
                return found
    return found


def token_lengths(folder: str, bins: int = 30) -> dict | None:
    """Histogram of document lengths in tokens over every ``.idx`` (log-spaced bins), streamed per file."""
    import numpy as np

    from curate.stages.tokenize import megatron

    idx = sorted(glob.glob(os.path.join(folder, "*.idx")))
    if not idx:
        return None
    lengths_min, lengths_max = None, 1
    indices = []
    for path in idx:
        index = megatron.read_index(path)
        docs = _doc_lengths(index)
        if len(docs):
            lengths_max = max(lengths_max, int(docs.max()))
            lengths_min = int(docs.min()) if lengths_min is None else min(lengths_min, int(docs.min()))
        indices.append(path)
    # from the shortest document, not from 1 token: pages of a few hundred tokens filled the last few
    # of 30 bins
    lo = max(1, lengths_min or 1)
    edges = np.unique(np.round(np.logspace(np.log10(lo), np.log10(lengths_max + 1), bins + 1)))
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    for path in indices:
        counts += np.histogram(_doc_lengths(megatron.read_index(path)), bins=edges)[0]
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def _doc_lengths(index):
    import numpy as np

    cum = np.concatenate([[0], np.cumsum(index.sequence_lengths, dtype=np.int64)])
    return np.diff(cum[index.document_indices])


def verify_result(folder: str) -> dict:
    from curate.stages.tokenize.verify import verify

    try:
        r = verify(folder)
    except Exception as e:  # the report shows the failure; `curate verify` gives the details
        return {"ok": False, "problems": [f"{type(e).__name__}: {e}"]}
    return {"ok": r.ok, "problems": r.problems[:20], "vocab_size": r.vocab_size, "vocab_source": r.vocab_source,
            "sets": r.sets}


def collect(out: str, verify: bool | str = True) -> dict:
    """Everything the page shows, as plain data (tests check it without a browser). ``verify``: True,
    False, or "auto" (only up to :data:`AUTO_VERIFY_BYTES` of tokens)."""
    folders = stage_dirs(out)
    stages = []
    for folder in folders:
        m = load_manifest(folder)
        name = os.path.basename(os.path.normpath(folder))
        counts = m.get("counts") or {}
        seconds = (m.get("timings") or {}).get("seconds") or 0.0
        st = {"folder": name, "stage": m.get("stage", "?"), "in": counts.get("in"), "out": counts.get("out"),
              "dropped": counts.get("dropped") or {}, "seconds": seconds,
              "docs_per_s": (counts.get("in") or 0) / seconds if seconds else None,
              "partitions": m.get("partitions"), "manifest": m, "path": folder}
        if m.get("stage") == "tokenize":
            st["tokens"] = (m.get("totals") or {}).get("tokens")
            st["bytes"], st["bytes_estimated"] = (m.get("totals") or {}).get("bytes"), False
            st["token_lengths"] = token_lengths(folder)
            bins = sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "*.bin")))
            run_verify = verify is True or (verify == "auto" and bins <= AUTO_VERIFY_BYTES)
            st["verify"] = verify_result(folder) if run_verify else None
            st["verify_skipped"] = None if run_verify else (
                f"not run for this page ({_bytes(bins)} of tokens): curate verify {folder}")
        else:
            st["bytes"], st["bytes_estimated"] = text_bytes(folder)
        st["examples"] = example_rejects(folder, dropped=st["dropped"]) if st["dropped"] else {}
        if m.get("stage") in ("exact_dedup", "fuzzy_dedup"):
            st["groups"] = dedup_groups(folder, "hash" if m["stage"] == "exact_dedup" else "component")
            st["pairs"] = dedup_pairs(folder, m)
            # a fuzzy run's audit and component sizes (issue 33, point 3); absent in other manifests
            st["audit"] = (m.get("dedup") or {}).get("audit")
            st["component_sizes"] = (m.get("dedup") or {}).get("component_sizes")
        if m.get("stage") == "semantic_dedup":
            st["semantic"] = m.get("dedup") or {}
        stages.append(st)
    run = read_run_info(out) if len(folders) > 1 or folders[0] != out else {}
    reports_dir = os.path.join(out, "_reports")
    perf = run.get("performance_report")
    if not perf:
        found = sorted(glob.glob(os.path.join(reports_dir, "*-run.html")))
        perf = found[-1] if found else None
    return {"output": os.path.abspath(out), "stages": stages, "run": run, "performance_report": perf}

"""One self-contained HTML page that tells the story of a run (``curate report OUT --html PATH``).

The page reads only what the run left on disk: each stage's ``_manifest.json``, ``_rejects/``,
``_duplicates/`` and the tokenizer's ``.idx`` files, plus ``_reports/run.json`` (cluster, workers and
the performance report, written by ``curate run``). Sections:

- funnel: documents and bytes after each stage (tokens at the end), drop reasons stacked per stage;
- filters: per filter, the histogram of a bounded score sample kept during the run (the manifest's
  ``score_sample``) with the thresholds drawn, and a few rejected documents per reason;
- dedup: exact group sizes, fuzzy component sizes, example near-duplicate pairs with their Jaccard;
  span and substring dedup's bytes removed per document (histogram, the largest);
- tokens: per split/prefix, the document-length histogram in tokens, dtype, and ``verify``'s result;
- time: seconds and docs/s per stage, workers, and a link to Dask's performance report of the run.

Charts are Bokeh (the Dask dashboard's own plotting library) with its JavaScript inlined
(``bokeh.resources.INLINE``), so the file opens without network. Everything read is bounded: text is
streamed column by column in batches, example rows stop at a few per reason, histograms are
fixed-bin.
"""

from __future__ import annotations

import glob
import html
import json
import logging
import os
import time

from curate.app.run_folders import load_manifest, stage_dirs

log = logging.getLogger("curate.report")

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
PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
           "#ccb974", "#64b5cd"]


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
    for path in sorted(glob.glob(os.path.join(folder, "_rejects", "part-*"))):
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
    for path in sorted(glob.glob(os.path.join(folder, "_duplicates", "part-*.parquet"))):
        col = pq.read_table(path, columns=[key]).column(0).to_pandas()
        for size, n in col.value_counts().value_counts().items():
            sizes[int(size)] = sizes.get(int(size), 0) + int(n)
    return dict(sorted(sizes.items()))


def dedup_pairs(folder: str, manifest: dict, limit: int = EXAMPLE_PAIRS) -> list[dict]:
    """A few (removed id, kept id, Jaccard, both texts' starts) from ``_duplicates/`` and the stage's input."""
    import pyarrow.parquet as pq

    pairs = []
    for path in sorted(glob.glob(os.path.join(folder, "_duplicates", "part-*.parquet"))):
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
        out.append({"removed": a, "kept": b, "jaccard": jac, "removed_text": (ta or "")[:EXAMPLE_CHARS],
                    "kept_text": (tb or "")[:EXAMPLE_CHARS]})
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
    lengths_max = 1
    indices = []
    for path in idx:
        index = megatron.read_index(path)
        docs = _doc_lengths(index)
        if len(docs):
            lengths_max = max(lengths_max, int(docs.max()))
        indices.append(path)
    edges = np.unique(np.round(np.logspace(0, np.log10(lengths_max + 1), bins + 1)))
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
        stages.append(st)
    run = read_run_info(out) if len(folders) > 1 or folders[0] != out else {}
    reports_dir = os.path.join(out, "_reports")
    perf = run.get("performance_report")
    if not perf:
        found = sorted(glob.glob(os.path.join(reports_dir, "*-run.html")))
        perf = found[-1] if found else None
    return {"output": os.path.abspath(out), "stages": stages, "run": run, "performance_report": perf}


# --------------------------------------------------------------------------- charts


def _fmt(n) -> str:
    if n is None:
        return "-"
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def funnel_chart(stages: list[dict]):
    """Stacked bars per stage: documents kept, and dropped per reason; hover shows counts and shares."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    names = [s["folder"] for s in stages]
    reasons = sorted({r for s in stages for r in s["dropped"]})
    keys = ["kept", *reasons]
    data = {"stage": names, "kept": [s["out"] or 0 for s in stages]}
    for r in reasons:
        data[r] = [s["dropped"].get(r, 0) for s in stages]
    data["in"] = [s["in"] or 0 for s in stages]
    data["dropped_total"] = [sum(s["dropped"].values()) for s in stages]
    data["dropped_share"] = [f"{d / i:.1%}" if i else "-" for d, i in zip(data["dropped_total"], data["in"])]
    data["bytes"] = [_bytes(s["bytes"]) for s in stages]
    data["reasons"] = [", ".join(f"{k}={v:,} ({v / s['in']:.1%})" for k, v in s["dropped"].items()) if s["in"]
                       else "" for s in stages]
    src = ColumnDataSource(data)
    p = figure(y_range=list(reversed(names)), height=60 + 34 * len(names), width=900, title="Documents per stage",
               toolbar_location=None, x_axis_label="documents (kept + dropped per reason)")
    colors = (PALETTE * (len(keys) // len(PALETTE) + 1))[:len(keys)]
    p.hbar_stack(keys, y="stage", height=0.7, color=colors, source=src, legend_label=keys)
    p.add_tools(HoverTool(tooltips=[("stage", "@stage"), ("in", "@in{0,0}"), ("kept", "@kept{0,0}"),
                                    ("dropped", "@dropped_total{0,0} (@dropped_share)"),
                                    ("reasons", "@reasons"), ("text bytes out", "@bytes")]))
    p.legend.location = "bottom_right"
    p.legend.label_text_font_size = "8pt"
    p.x_range.start = 0
    return p


def score_chart(name: str, f: dict, entry: dict):
    from bokeh.models import ColumnDataSource, HoverTool, Span
    from bokeh.plotting import figure

    h = entry["histogram"]
    edges = h["edges"]
    src = ColumnDataSource({"left": edges[:-1], "right": edges[1:], "kept": h["kept"], "rejected": h["rejected"],
                            "top": [a + b for a, b in zip(h["kept"], h["rejected"])]})
    title = f"{f.get('reason')} ({threshold_text(f)}): {entry['rejected']:,} of {entry['scored']:,} rejected"
    p = figure(width=420, height=230, title=title, toolbar_location=None,
               x_axis_type="log" if h.get("log") and edges[0] > 0 else "linear")
    p.quad(left="left", right="right", bottom=0, top="kept", color=PALETTE[0], source=src, legend_label="kept")
    p.quad(left="left", right="right", bottom="kept", top="top", color=PALETTE[1], source=src,
           legend_label="rejected")
    for x in (f.get("min"), f.get("max")):
        if x is not None:
            p.add_layout(Span(location=x, dimension="height", line_color="#c44e52", line_dash="dashed", line_width=2))
    p.add_tools(HoverTool(tooltips=[("score", "@left{0.[000]} .. @right{0.[000]}"), ("kept", "@kept"),
                                    ("rejected", "@rejected")]))
    p.legend.label_text_font_size = "7pt"
    p.title.text_font_size = "9pt"
    p.y_range.start = 0
    return p


def threshold_text(f: dict) -> str:
    from curate.app.run_folders import threshold_text as t

    return t(f)


def bars_chart(title: str, labels: list[str], values: list[int], x_label: str, width=420):
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    src = ColumnDataSource({"x": labels, "n": values})
    p = figure(x_range=labels, width=width, height=230, title=title, toolbar_location=None, x_axis_label=x_label)
    p.vbar(x="x", top="n", width=0.8, source=src, color=PALETTE[0])
    p.add_tools(HoverTool(tooltips=[(x_label, "@x"), ("count", "@n{0,0}")]))
    p.y_range.start = 0
    p.xaxis.major_label_orientation = 0.8
    p.title.text_font_size = "9pt"
    return p


def time_chart(stages: list[dict]):
    names = [s["folder"] for s in stages]
    return bars_chart("Seconds per stage", names, [round(s["seconds"] or 0, 2) for s in stages], "stage",
                      width=900)


# --------------------------------------------------------------------------- the page


def _e(x) -> str:
    return html.escape(str(x))


def _slot(key: str) -> str:
    """Where a chart goes in the body: an HTML comment, which no escaped content can contain (its
    ``<`` is ``&lt;``), so a document text or a folder name holding ``{{funnel}}`` stays text."""
    return f"<!--curate-chart:{_e(key)}-->"


def _table(header: list[str], rows: list[list], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:right;vertical-align:top}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.ex td{text-align:left}.ex td.text{font-family:monospace;font-size:0.85em;white-space:pre-wrap;max-width:620px}
.grid{display:flex;flex-wrap:wrap;gap:8px}.ok{color:#2a7d2a;font-weight:bold}.bad{color:#b22;font-weight:bold}
.muted{color:#777;font-size:0.9em}
"""


def render(data: dict) -> str:
    """The page as one HTML string: Bokeh's JavaScript inlined, no network needed."""
    from bokeh.embed import json_item
    from bokeh.resources import Resources

    stages = data["stages"]
    charts: dict[str, object] = {"funnel": funnel_chart(stages), "time": time_chart(stages)}
    sections = []

    # funnel ------------------------------------------------------------------------------------
    rows = []
    first_in = stages[0]["in"] or 0
    for s in stages:
        dropped = sum(s["dropped"].values())
        share = f"{s['out'] / first_in:.1%}" if first_in and s["out"] is not None else "-"
        rows.append([_e(s["folder"]), _e(s["stage"]), _fmt(s["in"]), _fmt(s["out"]), _fmt(dropped),
                     _e(", ".join(f"{k} {v:,}" for k, v in s["dropped"].items()) or "-"),
                     ("≈ " if s.get("bytes_estimated") else "") + _bytes(s["bytes"]), _fmt(s.get("tokens")), share])
    sections.append("<h2 id='funnel'>Funnel</h2>" + _table(
        ["folder", "stage", "docs in", "docs out", "dropped", "by reason", "text bytes out", "tokens",
         "of first input"], rows, "funnel") + _slot("funnel"))

    # filters -----------------------------------------------------------------------------------
    filt = []
    for s in stages:
        m = s["manifest"]
        sample = m.get("score_sample")
        if not m.get("filters"):
            continue
        filt.append(f"<h3>{_e(s['folder'])}</h3>")
        if not sample:
            filt.append("<p class='muted'>no score sample in this manifest (written by an older curate)</p>")
            continue
        part = sample.get("partitions", 0), sample.get("of_partitions", 0)
        resumed = (f" (from the {part[0]} of {part[1]} partitions this run wrote; an interrupted run wrote "
                   "the others)") if part[0] < part[1] else ""
        filt.append(f"<p class='muted'>histograms of a uniform sample of {sample['sampled']:,} of "
                    f"{sample['documents']:,} scored documents{resumed}; dashed lines: thresholds. Counts are of "
                    "every scored document: would reject, whatever the other filters say; dropped first, in "
                    "chain order; only it rejects, no other filter of the chain does (a filter that repeats "
                    "part of another's rule has few)</p>")
        keys = []
        for f in m["filters"]:
            entry = sample["filters"].get(f["reason"]) or {}
            if "histogram" not in entry:
                continue
            key = f"score_{s['folder']}_{f['reason']}"
            charts[key] = score_chart(s["folder"], f, entry)
            keys.append(key)
        filt.append("<div class='grid'>" + "".join(_slot(k) for k in keys) + "</div>")
        rows = [[_e(f["reason"]), _e(threshold_text(f)), _fmt(sample["filters"].get(f["reason"], {}).get("scored")),
                 _fmt(sample["filters"].get(f["reason"], {}).get("rejected")),
                 _fmt(s["dropped"].get(f["reason"], 0)) if s["stage"] != "tag" else "- (tag drops none)",
                 _fmt(sample["filters"].get(f["reason"], {}).get("only"))]  # None (older manifest): "-"
                for f in m["filters"]]
        filt.append(_table(["filter", "keeps", "scored", "would reject", "dropped first", "only it rejects"], rows))
    if filt:
        sections.append("<h2 id='filters'>Filters</h2>" + "".join(filt))

    # rejects -----------------------------------------------------------------------------------
    ex = []
    for s in stages:
        if not s["examples"]:
            continue
        rows = []
        for reason, items in s["examples"].items():
            for id_, text, detail in items:
                rows.append([_e(reason), _e(id_), f"<span class='text'>{_e(text) or _e(detail)}</span>"])
        ex.append(f"<h3>{_e(s['folder'])}</h3>" + _table(["reason", "id", "text (first 300 characters) or detail"],
                                                          [[r[0], r[1], r[2]] for r in rows], "ex"))
    if ex:
        sections.append("<h2 id='rejects'>Example rejected documents</h2>" + "".join(ex))

    # dedup -------------------------------------------------------------------------------------
    dd = []
    for s in stages:
        if "groups" not in s:
            continue
        kind = "exact groups" if s["stage"] == "exact_dedup" else "fuzzy components"
        dd.append(f"<h3>{_e(s['folder'])}: {kind}</h3>")
        groups = s["groups"]
        if groups:
            key = f"groups_{s['folder']}"
            charts[key] = bars_chart(f"{s['folder']}: {kind} by size", [str(k) for k in groups],
                                     list(groups.values()), "documents in the group")
            dd.append(_slot(key))
            dd.append(_table(["group size", "groups"], [[_fmt(k), _fmt(v)] for k, v in groups.items()]))
        else:
            dd.append("<p class='muted'>no duplicates</p>")
        info = s["manifest"].get("dedup") or {}
        if info:
            dd.append(_table(["what", "value"], [[_e(k), _e(v)] for k, v in info.items()
                                                 if not isinstance(v, (dict, list))]))
        if s.get("pairs"):
            rows = [[_e(p["removed"]), _e(p["kept"]), "-" if p["jaccard"] is None else f"{p['jaccard']:.3f}",
                     f"<span class='text'>{_e(p['removed_text'])}</span>",
                     f"<span class='text'>{_e(p['kept_text'])}</span>"] for p in s["pairs"]]
            dd.append(_table(["removed", "kept", "Jaccard", "removed text", "kept text"], rows, "ex"))
    for s in stages:  # span and substring dedup: bytes removed inside documents, per document
        info = s["manifest"].get("dedup") or {}
        if "removed_bytes_per_document" not in info:
            continue
        dd.append(f"<h3>{_e(s['folder'])}: removed inside documents</h3>")
        dd.append(_table(["what", "value"], [[_e(k), _e(v)] for k, v in info.items()
                                             if not isinstance(v, (dict, list))]))
        hist = info["removed_bytes_per_document"]
        if hist:
            key = f"spans_{s['folder']}"
            charts[key] = bars_chart(f"{s['folder']}: documents by bytes removed", list(hist),
                                     list(hist.values()), "documents")
            dd.append(_slot(key))
            dd.append(_table(["document", "bytes removed"], [[_e(i), _fmt(b)] for i, b in info.get("largest", [])]))
        else:
            dd.append("<p class='muted'>nothing removed</p>")
    if dd:
        sections.append("<h2 id='dedup'>Deduplication</h2>" + "".join(dd))

    # tokens ------------------------------------------------------------------------------------
    tk = []
    for s in stages:
        if s["stage"] != "tokenize":
            continue
        m = s["manifest"]
        rows = [[_e(name), _fmt(v.get("files")), _fmt(v.get("documents")), _fmt(v.get("tokens")),
                 _bytes(v.get("bytes"))] for name, v in (m.get("sets") or {}).items()]
        tot = m.get("totals") or {}
        rows.append(["<b>total</b>", "", _fmt(tot.get("documents")), _fmt(tot.get("tokens")), _bytes(tot.get("bytes"))])
        tok = m.get("tokenizer") or {}
        tk.append(f"<p>tokenizer <b>{_e(tok.get('name', '?'))}</b>, vocabulary {_fmt(m.get('vocab_size'))}, "
                  f"dtype <b>{_e(m.get('dtype'))}</b>, eod {_e(m.get('eod_id'))}, bos {_e(m.get('bos_id'))}</p>")
        tk.append(_table(["split / prefix", "files", "documents", "tokens", "bytes"], rows))
        v = s.get("verify")
        if s.get("verify_skipped"):
            tk.append(f"<p>verify: {_e(s['verify_skipped'])}</p>")
        if v is not None:
            if v["ok"]:
                tk.append(f"<p>verify: <span class='ok'>OK</span> (vocabulary size {_e(v.get('vocab_size'))} "
                          f"from {_e(v.get('vocab_source'))})</p>")
            else:
                tk.append("<p>verify: <span class='bad'>FAILED</span></p><ul>" +
                          "".join(f"<li>{_e(p)}</li>" for p in v["problems"]) + "</ul>")
        lengths = s.get("token_lengths")
        if lengths:
            e = lengths["edges"]
            labels = [f"{int(a)}-{int(b) - 1}" if b - a > 1 else f"{int(a)}" for a, b in zip(e[:-1], e[1:])]
            key = f"lengths_{s['folder']}"
            charts[key] = bars_chart("Document length in tokens", labels, lengths["counts"], "tokens", width=900)
            tk.append(_slot(key))
    if tk:
        sections.append("<h2 id='tokens'>Tokens</h2>" + "".join(tk))

    # time --------------------------------------------------------------------------------------
    run = data.get("run") or {}
    rows = [[_e(s["folder"]), _fmt(s["partitions"]), f"{s['seconds']:.2f}" if s["seconds"] else "-",
             _fmt(round(s["docs_per_s"])) if s["docs_per_s"] else "-",
             _e("skipped (up to date)" if s["folder"] in (run.get("skipped") or []) else "ran")] for s in stages]
    info = []
    if run:
        info.append(f"<p>cluster <b>{_e(run.get('cluster', '?'))}</b>, {_e(run.get('workers', '?'))} workers "
                    f"({_e(run.get('threads', '?'))} threads), started {_e(run.get('started', '?'))}, "
                    f"{_e(run.get('seconds', '?'))} s in all</p>")
    perf = data.get("performance_report")
    if perf:
        rel = os.path.relpath(perf, os.path.join(data["output"], "_reports"))
        info.append(f"<p>Dask performance report of this run: <a href='{_e(rel)}'>{_e(os.path.basename(perf))}</a></p>")
    sections.append("<h2 id='time'>Time</h2>" + "".join(info) + _table(
        ["folder", "partitions", "seconds", "docs/s", "status"], rows) + _slot("time"))

    # one small document per chart (json_item): Bokeh's components() over dozens of roots is
    # quadratic (15 s for the sample job), this is linear
    body = "".join(sections)
    items = {}
    for n, (k, fig) in enumerate(charts.items()):
        items[f"chart-{n}"] = json_item(fig)
        body = body.replace(_slot(k), f"<div id='chart-{n}' class='chart'></div>", 1)
    payload = json.dumps(items, separators=(",", ":")).replace("</", "<\\/")
    script = ("<script type='application/json' id='curate-charts'>" + payload + "</script><script>"
              "document.addEventListener('DOMContentLoaded',function(){"
              "const items=JSON.parse(document.getElementById('curate-charts').textContent);"
              "for(const id in items){Bokeh.embed.embed_item(items[id],id);}});</script>")
    title = f"curate report: {os.path.basename(data['output'])}"
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    nav = " · ".join(f"<a href='#{a}'>{a}</a>" for a in ("funnel", "filters", "rejects", "dedup", "tokens", "time")
                     if f"id='{a}'" in body)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style>{Resources(mode='inline', components=['bokeh']).render()}</head><body>"
            f"<h1>{_e(title)}</h1><p class='muted'>{_e(data['output'])} · generated {generated} · {nav}</p>"
            f"{body}{script}</body></html>")


def write_report(out: str, path: str | None = None, verify: bool | str = True) -> str:
    """Write the page (atomically) to ``path`` (default ``OUT/_reports/report.html``); return its path."""
    from curate.stages.dataset import atomic_write
    from curate.stages.output import refuse_link

    path = os.path.abspath(path or os.path.join(out, "_reports", "report.html"))
    refuse_link(out, path)
    page = render(collect(out, verify=verify))
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def _w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)

    atomic_write(path, _w)
    return path


def cluster_info(client) -> dict:
    """Workers and threads of the client's cluster, as the run saw them at its end."""
    if client is None:  # --cluster threads
        import dask

        return {"cluster": "threads in this process (no cluster)", "workers": 0,
                "threads": int(dask.config.get("num_workers", None) or os.cpu_count() or 1)}
    try:
        info = client.scheduler_info()
    except Exception as e:  # the page says what it could not learn
        return {"cluster": f"unknown ({type(e).__name__})"}
    workers = info.get("workers") or {}
    cluster = type(client.cluster).__name__ if getattr(client, "cluster", None) is not None else info.get("address")
    return {"cluster": cluster, "workers": len(workers),
            "threads": sum(int(w.get("nthreads", 0)) for w in workers.values())}


def write_run_report(output: str, client, performance_report: str | None, started: float,
                     at_start: dict | None = None) -> str | None:
    """End of ``curate run``: ``_reports/run.json`` (cluster, timing, the performance report) and
    ``_reports/report.html``. A failure here is logged with its reason; the run's data is unaffected.
    ``at_start``: :func:`cluster_info` as the run began (workers may be leaving by now)."""
    from curate.stages.dataset import write_json
    from curate.stages.output import refuse_link

    reports = os.path.join(output, "_reports")
    cluster = cluster_info(client)
    if at_start and at_start.get("workers", 0) > cluster.get("workers", 0):
        cluster = at_start
    run = {**cluster, "performance_report": performance_report,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
           "seconds": round(time.time() - started, 1), "skipped": skipped_stages(output, started)}
    try:
        refuse_link(output, os.path.join(reports, RUN_INFO))
        os.makedirs(reports, exist_ok=True)
        write_json(os.path.join(reports, RUN_INFO), run)
        path = write_report(output, verify="auto")
    except Exception as e:
        log.error("report: not written: %s: %s (curate report %s --html PATH retries)", type(e).__name__, e, output)
        log.debug("report failure", exc_info=True)
        return None
    log.info("report: %s", path)
    return path


def skipped_stages(output: str, started: float) -> list[str]:
    """Stage folders whose manifest was finished before this run started (up to date, so skipped)."""
    import calendar

    skipped = []
    try:
        folders = stage_dirs(output)
    except Exception:
        return []
    for folder in folders:
        finished = (load_manifest(folder).get("timings") or {}).get("finished")
        if finished:
            t = calendar.timegm(time.strptime(finished, "%Y-%m-%dT%H:%M:%SZ"))
            if t < int(started):
                skipped.append(os.path.basename(os.path.normpath(folder)))
    return skipped

"""One self-contained HTML page that tells the story of a run (``curate report OUT --html PATH``).

The page reads only what the run left on disk: each stage's ``_manifest.json``, ``_rejects/``,
``_duplicates/`` and the tokenizer's ``.idx`` files, plus ``_reports/run.json`` (cluster, workers and
the performance report, written by ``curate run``). Sections:

- funnel: documents and bytes after each stage (tokens at the end), drop reasons stacked per stage;
- filters: per filter, the histogram of a bounded score sample kept during the run (the manifest's
  ``score_sample``) with the thresholds drawn, and a few rejected documents per reason;
- dedup: exact group sizes, fuzzy component sizes, example near-duplicate pairs with their Jaccard, a
  fuzzy run's estimated recall and precision (its audit: sample, intervals) and component sizes;
  span and substring dedup's bytes removed per document (histogram, the largest);
- tokens: per split/prefix, the document-length histogram in tokens, dtype, and ``verify``'s result;
- time: seconds and docs/s per stage, workers, and a link to Dask's performance report of the run.

Charts are inline SVG drawn by ``report_charts`` (hover text in SVG ``<title>`` elements), so the file
opens without network and runs no script. What the page shows is read by ``report_data`` (bounded:
text streamed in batches, a few examples per reason, fixed-bin histograms); this module lays out the
page and writes it.
"""

from __future__ import annotations

import html
import logging
import os
import re
import time

# the page's parts, importable from here as before the split
from curate.app.report_charts import (  # noqa: F401
    PALETTE,
    bars_chart,
    funnel_chart,
    score_chart,
    threshold_text,
    time_chart,
)
from curate.app.report_data import (  # noqa: F401
    AUTO_VERIFY_BYTES,
    BATCH_ROWS,
    BYTES_BUDGET,
    EXAMPLE_CHARS,
    EXAMPLE_PAIRS,
    EXAMPLES_PER_REASON,
    RUN_INFO,
    collect,
    data_files,
    dedup_groups,
    dedup_pairs,
    example_rejects,
    lookup_texts,
    read_run_info,
    text_bytes,
    token_lengths,
    verify_result,
)
from curate.app.report_diff import to_html
from curate.app.report_format import _bytes, _fmt, _interval, _rate, _share
from curate.app.run_folders import load_manifest, stage_dirs

log = logging.getLogger("curate.report")


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


def _pair_texts(p: dict) -> list[str]:
    """The two cells of a duplicate pair's texts: what differs marked when both texts were found and
    differ; identical texts (exact duplicates) show their first characters, as before."""
    if any(d for k in ("removed_diff", "kept_diff") for _, d in p.get(k, {}).get("runs", ())):
        return [f"<span class='text'>{to_html(p['removed_diff'], 'del')}</span>",
                f"<span class='text'>{to_html(p['kept_diff'], 'ins')}</span>"]
    return [f"<span class='text'>{_e(p['removed_text'])}</span>", f"<span class='text'>{_e(p['kept_text'])}</span>"]


def _audit(s: dict) -> list[str]:
    """A fuzzy run's accuracy audit (the manifest's ``dedup.audit``) and its component sizes
    (``dedup.component_sizes``); nothing for a manifest without them (exact dedup, an older curate,
    ``--audit-sample 0``, ``--no-false-positive-check``)."""
    parts = []
    a = s.get("audit")
    if a:
        threshold = (s["manifest"].get("dedup") or {}).get("threshold")
        at = f" ({_e(threshold)})" if threshold is not None else ""
        parts.append(f"<p class='muted'>how well this run's LSH and similarity check did, estimated on a uniform "
                     f"sample of {_fmt(a.get('sample'))} documents compared all against all by their true Jaccard "
                     f"({_fmt(a.get('pairs'))} pairs); 95% Wilson intervals: few pairs in the sample, a wide "
                     "interval</p>")
        rows = [["recall", _share(a.get("recall")), _interval(a.get("recall_ci")),
                 f"{_fmt(a.get('true_pairs'))} sampled pairs at or above the threshold{at}: the share the run "
                 "put in one component"],
                ["precision", _share(a.get("precision")), _interval(a.get("precision_ci")),
                 f"{_fmt(a.get('removed_in_sample'))} sampled documents removed: the share at or above the "
                 "threshold with the document kept for them"]]
        parts.append(_table(["estimate", "value", "95% interval", "from"], rows, "audit"))
    sizes = s.get("component_sizes")
    if sizes:
        parts.append("<p class='muted'>components by size over the whole run, in the bins the manifest "
                     "counts them in</p>")
        parts.append(_table(["component size", *sizes], [["components", *(_fmt(v) for v in sizes.values())]],
                            "sizes"))
    return parts


def _semantic(s: dict) -> list[str]:
    """A semantic dedup run's numbers: clusters used, removals, cluster sizes and the removed
    documents' cosines (the manifest's ``dedup``)."""
    info = s["semantic"]
    parts = [f"<h3>{_e(s['folder'])}: semantic clusters</h3>",
             _table(["what", "value"], [[_e(k), _e(v)] for k, v in info.items() if not isinstance(v, (dict, list))])]
    sizes = info.get("cluster_sizes") or {}
    if sizes.get("counts"):
        edges = sizes["edges"]
        heads = [str(a) if b - a == 1 else f"{a}-{b - 1}" for a, b in zip(edges, edges[1:])]
        parts.append(_table(["cluster size", *heads], [["clusters", *(_fmt(v) for v in sizes["counts"])]], "sizes"))
    cos = info.get("removed_cosines") or {}
    if any(cos.get("counts") or ()):
        edges = cos["edges"]
        heads = [f"{a:.3f}-{b:.3f}" for a, b in zip(edges, edges[1:])]
        parts.append("<p class='muted'>removed documents by their cosine to the earlier member they were "
                     "removed for</p>")
        parts.append(_table(["cosine", *heads], [["removed", *(_fmt(v) for v in cos["counts"])]], "sizes"))
    return parts


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:right;vertical-align:top}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.ex td{text-align:left}.ex td.text{font-family:monospace;font-size:0.85em;white-space:pre-wrap;max-width:620px}
.grid{display:flex;flex-wrap:wrap;gap:8px}.ok{color:#2a7d2a;font-weight:bold}.bad{color:#b22;font-weight:bold}
.muted{color:#777;font-size:0.9em}mark.del{background:#f8c4c4}mark.ins{background:#c4ecc4}
.chart svg{max-width:100%;height:auto;display:block}
.audit td{white-space:nowrap}.audit td:last-child,.audit th:last-child{text-align:left;white-space:normal}
"""


def render(data: dict) -> str:
    """The page as one HTML string: the charts inline SVG, no script, no network needed."""
    stages = data["stages"]
    charts: dict[str, str] = {"funnel": funnel_chart(stages), "time": time_chart(stages)}
    sections = []

    # funnel ------------------------------------------------------------------------------------
    rows = []
    first_in = stages[0]["in"] or 0
    for s in stages:
        dropped = sum(s["dropped"].values())
        share = f"{s['out'] / first_in:.1%}" if first_in and s["out"] is not None else "-"
        rows.append([_e(s["folder"]), _e(s["stage"]), _fmt(s["in"]), _fmt(s["out"]), _fmt(dropped),
                     _e(", ".join(f"{k} {v:,}" for k, v in s["dropped"].items()) or "-"),
                     ("≈ " if s.get("bytes_estimated") else "") + _bytes(s["bytes"]) if s.get("stage") != "tokenize"
                     else "- (tokens)", _fmt(s.get("tokens")), share])
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
        if "semantic" in s:
            dd.extend(_semantic(s))
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
        dd.extend(_audit(s))
        if s.get("pairs"):
            rows = [[_e(p["removed"]), _e(p["kept"]), "-" if p["jaccard"] is None else f"{p['jaccard']:.3f}",
                     *_pair_texts(p)] for p in s["pairs"]]
            marked = any(d for p in s["pairs"] for k in ("removed_diff", "kept_diff") for _, d in p.get(k, {}).get("runs", ()))
            if marked:
                dd.append("<p class='muted'>marked: <mark class='del'>words only the removed text has</mark>, "
                          "<mark class='ins'>words only the kept text has</mark> (from a little before "
                          "the first difference)</p>")
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
             _rate(s["docs_per_s"]) if s["docs_per_s"] else "-",
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

    # each chart's SVG in place of its slot, in one pass over the body
    ids = {k: n for n, k in enumerate(charts)}
    body = re.sub(r"<!--curate-chart:(.*?)-->", lambda m: f"<div id='chart-{ids[html.unescape(m.group(1))]}' "
                  f"class='chart'>{charts[html.unescape(m.group(1))]}</div>", "".join(sections))
    title = f"curate report: {os.path.basename(data['output'])}"
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    nav = " · ".join(f"<a href='#{a}'>{a}</a>" for a in ("funnel", "filters", "rejects", "dedup", "tokens", "time")
                     if f"id='{a}'" in body)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body>"
            f"<h1>{_e(title)}</h1><p class='muted'>{_e(data['output'])} · generated {generated} · {nav}</p>"
            f"{body}</body></html>")


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
        # the page reads the outputs (text bytes, examples, the token files' check) and draws its charts:
        # in a task on a cluster, so that the head only coordinates; here without one
        path = (client.submit(write_report, os.path.abspath(output), verify="auto", pure=False).result()
                if client is not None else write_report(output, verify="auto"))
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

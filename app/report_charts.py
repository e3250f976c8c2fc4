"""The Bokeh figures of the HTML page of a run: the funnel, score histograms, bar charts, time.

Each function takes the plain data of ``report_data.collect`` and returns one figure; the page
(``report_html``) embeds them. Bokeh is the Dask dashboard's own plotting library.
"""

from __future__ import annotations

from curate.app.report_format import _bytes

PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
           "#ccb974", "#64b5cd"]


def funnel_chart(stages: list[dict]):
    """Stacked bars per stage: documents kept, and dropped per reason; hover shows counts and shares."""
    from bokeh.models import ColumnDataSource, HoverTool, Legend
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
    # a token set's .bin size is not text: tokenizing loses no text
    data["bytes"] = ["- (tokens)" if s.get("stage") == "tokenize" else _bytes(s["bytes"]) for s in stages]
    data["reasons"] = [", ".join(f"{k}={v:,} ({v / s['in']:.1%})" for k, v in s["dropped"].items()) if s["in"]
                       else "" for s in stages]
    src = ColumnDataSource(data)
    p = figure(y_range=list(reversed(names)), height=60 + 34 * len(names), width=900, title="Documents per stage",
               toolbar_location=None, x_axis_label="documents (kept + dropped per reason)")
    colors = (PALETTE * (len(keys) // len(PALETTE) + 1))[:len(keys)]
    bars = p.hbar_stack(keys, y="stage", height=0.7, color=colors, source=src)
    p.add_tools(HoverTool(tooltips=[("stage", "@stage"), ("in", "@in{0,0}"), ("kept", "@kept{0,0}"),
                                    ("dropped", "@dropped_total{0,0} (@dropped_share)"),
                                    ("reasons", "@reasons"), ("text bytes out", "@bytes")]))
    # beside the plot, never over it (inside, it hid the longest bars); columns as the reasons need
    rows = max(1, (p.height - 50) // 18)
    p.add_layout(Legend(items=[(k, [r]) for k, r in zip(keys, bars)], label_text_font_size="8pt",
                        ncols=-(-len(keys) // rows), location="top_left"), "right")
    p.x_range.start = 0
    p.xaxis.ticker.min_interval = 1  # documents: no tick at 2.5
    return p


#: a threshold beyond the data by at most this share of the data's span (in decades on a log axis) widens
#: the axis to it; one farther is named at the edge instead, so the data is not squeezed into a sliver
NEAR = 0.25


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def score_view(f: dict, h: dict) -> dict:
    """What a score histogram shows, as plain data: the bins from the first to the last that hold a
    document (the manifest's bins may reach out to a threshold, and did span it in older manifests),
    their true left edges (``from``; ``left`` is where they are drawn), the x range (``lo``, ``hi``),
    a log axis or not, the thresholds drawn on the axis (``lines``) and those beyond the data named at
    an edge (``beyond``: (side, text))."""
    import math

    edges, kept, rejected = h["edges"], h["kept"], h["rejected"]
    filled = [i for i, (a, b) in enumerate(zip(kept, rejected)) if a + b]
    first, last = (filled[0], filled[-1]) if filled else (0, len(kept) - 1)
    left, right = list(edges[first:last + 1]), list(edges[first + 1:last + 2])
    log = bool(h.get("log")) and right[-1] > 0
    if log and left[0] <= 0:  # a log axis has no 0: the first bin is drawn from half its right edge
        left[0] = right[0] / 2
    lo, hi = left[0], right[-1]
    if len(filled) == 1:  # every score in one bin (all 0, say): drawn as a bar, not as the whole plot
        if log:
            lo, hi = lo / (hi / lo) ** 2, hi * (hi / lo) ** 2
        else:
            lo, hi = lo - 2 * (hi - lo), hi + 2 * (hi - lo)

    def pos(x):
        return math.log10(x) if log else x

    span = (pos(hi) - pos(lo)) or 1.0
    lines, beyond = [], []
    for name, x in (("min", f.get("min")), ("max", f.get("max"))):
        if x is None:
            continue
        if lo <= x <= hi:
            lines.append(x)
        elif x < lo and (not log or x > 0) and pos(lo) - pos(x) <= NEAR * span:
            lo = x
            lines.append(x)
        elif x > hi and pos(x) - pos(hi) <= NEAR * span:
            hi = x
            lines.append(x)
        elif x < lo:
            beyond.append(("left", f"\u2190 {name} {_number(x)} (beyond)"))
        else:
            beyond.append(("right", f"{name} {_number(x)} (beyond) \u2192"))
    return {"left": left, "right": right, "from": edges[first:last + 1], "kept": kept[first:last + 1],
            "rejected": rejected[first:last + 1], "lo": lo, "hi": hi, "log": log, "lines": lines, "beyond": beyond}


def score_chart(name: str, f: dict, entry: dict):
    """One filter's score histogram over the data's range, kept and rejected stacked; thresholds dashed
    on the axis, or named at the edge when far beyond the data."""
    from bokeh.models import BasicTickFormatter, ColumnDataSource, HoverTool, Label, Legend, Range1d, Span
    from bokeh.plotting import figure

    v = score_view(f, entry["histogram"])
    tops = [a + b for a, b in zip(v["kept"], v["rejected"])]
    src = ColumnDataSource({"left": v["left"], "right": v["right"], "from": v["from"], "kept": v["kept"],
                            "rejected": v["rejected"], "top": tops})
    title = f"{f.get('reason')} ({threshold_text(f)}): {entry['rejected']:,} of {entry['scored']:,} rejected"
    # a little room either side, so a threshold at the data's edge stays visible
    if v["log"]:
        pad = (v["hi"] / v["lo"]) ** 0.02
        x_range = Range1d(v["lo"] / pad, v["hi"] * pad)
    else:
        pad = (v["hi"] - v["lo"]) * 0.02 or 0.5
        x_range = Range1d(v["lo"] - pad, v["hi"] + pad)
    top = max(tops, default=0) or 1
    # headroom above the tallest bar for the labels of thresholds beyond the data
    p = figure(width=420, height=230, title=title, toolbar_location=None, x_range=x_range,
               y_range=Range1d(0, top * (1.25 if v["beyond"] else 1.05)),
               x_axis_type="log" if v["log"] else "linear")
    # no outlines: a bin without rejects is a zero-height quad whose outline drew an orange rule
    kept = p.quad(left="left", right="right", bottom=0, top="kept", color=PALETTE[0], line_color=None, source=src)
    rejected = p.quad(left="left", right="right", bottom="kept", top="top", color=PALETTE[1], line_color=None,
                      source=src)
    # above the plot, in one row: inside, it covered the tallest bars wherever it went
    p.add_layout(Legend(items=[("kept", [kept]), ("rejected", [rejected])], orientation="horizontal",
                        label_text_font_size="7pt", glyph_height=10, glyph_width=10, padding=2, margin=0,
                        border_line_color=None, location="top_right"), "above")
    p.yaxis.ticker.min_interval = 1  # documents
    if not v["log"]:  # scores of 0.0002 read as such, not 2.000e-4
        p.xaxis.formatter = BasicTickFormatter(use_scientific=False)
    for x in v["lines"]:
        p.add_layout(Span(location=x, dimension="height", line_color="#c44e52", line_dash="dashed", line_width=2))
    for side, text in v["beyond"]:
        p.add_layout(Label(x=x_range.start if side == "left" else x_range.end, y=p.y_range.end, text=text,
                           text_align=side, text_baseline="top", text_color="#c44e52", text_font_size="8pt",
                           x_offset=3 if side == "left" else -3, y_offset=-2))
    p.add_tools(HoverTool(tooltips=[("score", "@from{0.[000]} .. @right{0.[000]}"), ("kept", "@kept"),
                                    ("rejected", "@rejected")]))
    p.title.text_font_size = "9pt"
    return p


def threshold_text(f: dict) -> str:
    from curate.app.run_folders import threshold_text as t

    return t(f)


def bars_chart(title: str, labels: list[str], values: list[int], x_label: str, width=420, counts=True):
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    src = ColumnDataSource({"x": labels, "n": values})
    p = figure(x_range=labels, width=width, height=230, title=title, toolbar_location=None, x_axis_label=x_label)
    p.vbar(x="x", top="n", width=0.8, source=src, color=PALETTE[0])
    p.add_tools(HoverTool(tooltips=[(x_label, "@x"), ("count", "@n{0,0}")]))
    p.y_range.start = 0
    if counts:  # a count has no tick at 2.5
        p.yaxis.ticker.min_interval = 1
    p.xaxis.major_label_orientation = 0.8
    p.title.text_font_size = "9pt"
    return p


def time_chart(stages: list[dict]):
    names = [s["folder"] for s in stages]
    return bars_chart("Seconds per stage", names, [round(s["seconds"] or 0, 2) for s in stages], "stage",
                      width=900, counts=False)

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

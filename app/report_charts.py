"""The charts of the HTML page of a run, as inline SVG: the funnel, score histograms, bar charts, time.

Each chart function takes the plain data of ``report_data.collect`` and returns one ``<svg>`` element
as a string, which the page (``report_html``) puts in its body as it is. Plain string formatting, no
plotting library: building about 40 Bokeh figures and their JSON was 39% of what a worker cost over an
empty partition (issue 50, point 4), and the page needed 1.5 MB of inlined JavaScript to draw them.
Hover text is SVG's own ``<title>`` (the browser's tooltip), so the page runs no script at all. Every
text that comes from the data (folder names, reasons, labels) is escaped here, once, by :func:`_esc`.
"""

from __future__ import annotations

import html
import math

from curate.app.report_format import _bytes

PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
           "#ccb974", "#64b5cd"]
#: thresholds, and texts naming those beyond the data
RED = "#c44e52"
FONT = "system-ui,-apple-system,Segoe UI,Roboto,sans-serif"
#: the longest category label drawn in full (the whole label stays in the bar's hover text)
LABEL_CHARS = 24


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _width(text: str, size: float) -> float:
    """About how wide ``text`` is at font ``size`` px: Python has no font metrics, and layout only
    needs to leave room, so an average glyph width of 0.6 em (digits and most letters are narrower)."""
    return len(text) * size * 0.6


def _short(text: str, chars: int = LABEL_CHARS) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "\u2026"


def _f(x: float) -> str:
    """A pixel coordinate: two decimals are finer than any screen, and keep the page small."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


# --------------------------------------------------------------------------- axes


def linear_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round values between ``lo`` and ``hi``, about ``count`` of them, 1, 2, 2.5 or 5 times a power of
    ten apart; ``integer``: no tick between two integers (documents: no tick at 2.5)."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * 0.999)
    if integer:
        step = max(1, math.ceil(step))
    first = math.ceil(lo / step - 1e-9)
    return [round((first + k) * step, 12) for k in range(int((hi - lo) / step + 1e-9) + 2)
            if (first + k) * step <= hi + step * 1e-9]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten between ``lo`` and ``hi`` (> 0); 2 and 5 times them too when that gives few."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    every = max(1, -(-(b - a) // 8))  # at most about 8 labels
    ticks = [10.0 ** k for k in range(a, b + 1, every) if lo <= 10.0 ** k <= hi * (1 + 1e-9)]
    if len(ticks) < 3:
        ticks = sorted(m * 10.0 ** k for k in range(a, b + 1) for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi)
    return ticks


def tick_text(x: float, ticks: list[float]) -> str:
    """A tick's label with as many decimals as the ticks' spacing needs, and no exponent (scores of
    0.0002 read as such)."""
    if x and (abs(x) >= 1e7 or abs(x) < 1e-5):
        return f"{x:.0e}".replace("e+0", "e").replace("e-0", "e-")
    steps = [b - a for a, b in zip(ticks, ticks[1:]) if b > a]
    step = min(steps) if steps else abs(x) or 1
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    while decimals < 12 and abs(round(step, decimals) - step) > step * 1e-6:  # a step of 0.25: 4.75, not 4.8
        decimals += 1
    if abs(x) < 1 and decimals == 0 and x:  # a log axis below 1: 0.01, not 0
        decimals = -math.floor(math.log10(abs(x)) + 1e-9)
    text = f"{x:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


class _Scale:
    """Data -> pixels along one axis: ``lo``..``hi`` onto ``a``..``b`` (b < a for an upward y axis)."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False):
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.a, self.b = a, b

    def __call__(self, x: float) -> float:
        v = math.log10(x) if self.log else x
        return self.a + (v - self.lo) / ((self.hi - self.lo) or 1.0) * (self.b - self.a)


def _svg(width: float, height: float, parts: list[str], cls: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='{cls}' width='{_f(width)}' height='{_f(height)}' "
            f"viewBox='0 0 {_f(width)} {_f(height)}' font-family='{FONT}' font-size='11'>" + "".join(parts)
            + "</svg>")


def _title(text: str, x: float, y: float, size: int = 13) -> str:
    return f"<text class='title' x='{_f(x)}' y='{_f(y)}' font-size='{size}' font-weight='bold'>{_esc(text)}</text>"


def _frame(x0, y0, x1, y1) -> str:
    """The plot area: its outline (and the place tests find it by its class)."""
    return (f"<rect class='frame' x='{_f(x0)}' y='{_f(y0)}' width='{_f(x1 - x0)}' height='{_f(y1 - y0)}' "
            "fill='none' stroke='#e5e5e5'/>")


def _y_axis(scale: _Scale, ticks, x0, x1, labels=None) -> list[str]:
    """Horizontal grid lines and labels left of the plot area at the ``ticks``."""
    out = []
    for t in ticks:
        y = scale(t)
        out.append(f"<line x1='{_f(x0)}' x2='{_f(x1)}' y1='{_f(y)}' y2='{_f(y)}' stroke='#eee'/>")
        out.append(f"<text class='tick y' x='{_f(x0 - 4)}' y='{_f(y + 4)}' text-anchor='end' fill='#444'>"
                   f"{_esc(labels(t) if labels else tick_text(t, ticks))}</text>")
    return out


def _x_axis(scale: _Scale, ticks, y0, y1) -> list[str]:
    """Vertical grid lines and labels below the plot area at the ``ticks``."""
    out = []
    for t in ticks:
        x = scale(t)
        out.append(f"<line x1='{_f(x)}' x2='{_f(x)}' y1='{_f(y0)}' y2='{_f(y1)}' stroke='#eee'/>")
        out.append(f"<text class='tick x' x='{_f(x)}' y='{_f(y1 + 14)}' text-anchor='middle' fill='#444'>"
                   f"{_esc(tick_text(t, ticks))}</text>")
    return out


def _legend(items: list[tuple[str, str]], x: float, y: float, columns: int = 1, horizontal: bool = False,
            size: int = 11) -> tuple[str, float, float]:
    """Swatches and labels from (x, y), top left; returns the group, its width and its height."""
    rows = -(-len(items) // columns)
    col_w = max((_width(_short(k), size) for k, _ in items), default=0) + 20
    out, height = [], rows * (size + 6)
    cx = x
    for n, (label, color) in enumerate(items):
        if horizontal:
            ix, iy = cx, y
            cx += _width(label, size) + 24
        else:
            ix, iy = x + (n // rows) * col_w, y + (n % rows) * (size + 6)
        out.append(f"<rect x='{_f(ix)}' y='{_f(iy + 1)}' width='10' height='10' fill='{color}'/>"
                   f"<text x='{_f(ix + 14)}' y='{_f(iy + size - 1)}' font-size='{size}'>{_esc(_short(label))}"
                   + (f"<title>{_esc(label)}</title>" if len(label) > LABEL_CHARS else "") + "</text>")
    width = (cx - x) if horizontal else columns * col_w
    return f"<g class='legend'>{''.join(out)}</g>", width, (size + 6) if horizontal else height


# --------------------------------------------------------------------------- the charts


def funnel_chart(stages: list[dict]) -> str:
    """Stacked bars per stage: documents kept, and dropped per reason; hover shows counts and shares."""
    names = [str(s["folder"]) for s in stages]
    reasons = sorted({r for s in stages for r in s["dropped"]})
    keys = ["kept", *reasons]
    colors = (PALETTE * (len(keys) // len(PALETTE) + 1))[:len(keys)]
    height = 60 + 34 * len(names)
    # beside the plot, never over it (inside, it hid the longest bars); columns as the reasons need
    rows = max(1, (height - 50) // 17)
    columns = -(-len(keys) // rows)
    _, legend_w, _ = _legend(list(zip(keys, colors)), 0, 0, columns)
    left = min(max(_width(_short(n), 11) for n in names), _width("x" * LABEL_CHARS, 11)) + 12 if names else 40
    width = max(900, left + 300 + legend_w + 20)
    x0, x1, y0, y1 = left, width - legend_w - 20, 32, height - 40
    top = max([(s["out"] or 0) + sum(s["dropped"].values()) for s in stages], default=0) or 1
    ticks = linear_ticks(0, top, 6, integer=True)
    if ticks[-1] < top:
        ticks.append(ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else 1))
    xs = _Scale(0, ticks[-1] * 1.02, x0, x1)
    parts = [_title("Documents per stage", 4, 16), _frame(x0, y0, x1, y1), *_x_axis(xs, ticks, y0, y1),
             f"<text x='{_f((x0 + x1) / 2)}' y='{_f(height - 8)}' text-anchor='middle'>documents (kept + dropped "
             "per reason)</text>"]
    band = (y1 - y0) / max(1, len(names))
    for n, s in enumerate(stages):
        y = y0 + band * n + band * 0.15
        docs_in, dropped = s["in"] or 0, sum(s["dropped"].values())
        share = f"{dropped / docs_in:.1%}" if docs_in else "-"
        # a token set's .bin size is not text: tokenizing loses no text
        out_bytes = "- (tokens)" if s.get("stage") == "tokenize" else _bytes(s["bytes"])
        why = ", ".join(f"{k}={v:,} ({v / docs_in:.1%})" for k, v in s["dropped"].items()) if docs_in else ""
        hover = (f"stage: {names[n]}\nin: {docs_in:,}\nkept: {s['out'] or 0:,}\ndropped: {dropped:,} ({share})\n"
                 f"reasons: {why}\ntext bytes out: {out_bytes}")
        segs, at = [], 0
        for key, color in zip(keys, colors):
            v = (s["out"] or 0) if key == "kept" else s["dropped"].get(key, 0)
            if v:
                segs.append(f"<rect class='bar' x='{_f(xs(at))}' y='{_f(y)}' width='{_f(xs(at + v) - xs(at))}' "
                            f"height='{_f(band * 0.7)}' fill='{color}'/>")
            at += v
        parts.append(f"<g><title>{_esc(hover)}</title><rect x='{_f(x0)}' y='{_f(y)}' width='{_f(x1 - x0)}' "
                     f"height='{_f(band * 0.7)}' fill-opacity='0'/>{''.join(segs)}</g>")
        parts.append(f"<text class='tick y' x='{_f(x0 - 6)}' y='{_f(y + band * 0.35 + 4)}' text-anchor='end'>"
                     f"{_esc(_short(names[n]))}"
                     + (f"<title>{_esc(names[n])}</title>" if len(names[n]) > LABEL_CHARS else "") + "</text>")
    legend, _, _ = _legend(list(zip(keys, colors)), x1 + 14, y0, columns)
    parts.append(legend)
    return _svg(width, height, parts, "funnel")


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


def x_range(v: dict) -> tuple[float, float]:
    """A score view's x axis: its range and a little room either side, so that a threshold at the
    data's edge stays visible."""
    if v["log"]:
        pad = (v["hi"] / v["lo"]) ** 0.02
        return v["lo"] / pad, v["hi"] * pad
    pad = (v["hi"] - v["lo"]) * 0.02 or 0.5
    return v["lo"] - pad, v["hi"] + pad


def score_chart(name: str, f: dict, entry: dict) -> str:
    """One filter's score histogram over the data's range, kept and rejected stacked; thresholds dashed
    on the axis, or named at the edge when far beyond the data."""
    v = score_view(f, entry["histogram"])
    tops = [a + b for a, b in zip(v["kept"], v["rejected"])]
    title = f"{f.get('reason')} ({threshold_text(f)}): {entry['rejected']:,} of {entry['scored']:,} rejected"
    top = max(tops, default=0) or 1
    # headroom above the tallest bar for the labels of thresholds beyond the data
    y_ticks = linear_ticks(0, top * (1.25 if v["beyond"] else 1.05), 4, integer=True)
    y_top = max(top * (1.25 if v["beyond"] else 1.05), y_ticks[-1])
    width, height = 420, 230
    x0 = max(_width(tick_text(t, y_ticks), 11) for t in y_ticks) + 10
    x1, y0, y1 = width - 12, 40, height - 24
    lo, hi = x_range(v)
    xs, ys = _Scale(lo, hi, x0, x1, v["log"]), _Scale(0, y_top, y1, y0)
    x_ticks = log_ticks(lo, hi) if v["log"] else linear_ticks(lo, hi, 5)
    # above the plot, in one row: inside, it covered the tallest bars wherever it went
    items = [("kept", PALETTE[0]), ("rejected", PALETTE[1])]
    legend, _, _ = _legend(items, x1 - sum(_width(k, 10) + 24 for k, _ in items), 22, horizontal=True, size=10)
    parts = [_title(title, 4, 14, 12), legend, _frame(x0, y0, x1, y1), *_y_axis(ys, y_ticks, x0, x1),
             *_x_axis(xs, x_ticks, y0, y1)]
    for a, b, frm, k, r in zip(v["left"], v["right"], v["from"], v["kept"], v["rejected"]):
        xa, xb = xs(a), xs(b)
        hover = f"score {frm:.4g} .. {b:.4g}\nkept {k:,}\nrejected {r:,}"
        # no outlines: a bin without rejects is no rectangle at all (an outline drew an orange rule)
        bars = "".join(f"<rect class='bar {cls}' x='{_f(xa)}' y='{_f(ys(base + n))}' width='{_f(max(xb - xa, 0.5))}' "
                       f"height='{_f(ys(base) - ys(base + n))}' fill='{color}'/>"
                       for cls, base, n, color in (("kept", 0, k, PALETTE[0]), ("rejected", k, r, PALETTE[1])) if n)
        parts.append(f"<g><title>{_esc(hover)}</title><rect x='{_f(xa)}' y='{_f(y0)}' width='{_f(xb - xa)}' "
                     f"height='{_f(y1 - y0)}' fill-opacity='0'/>{bars}</g>")
    for x in v["lines"]:
        px = xs(x)
        parts.append(f"<line class='threshold' x1='{_f(px)}' x2='{_f(px)}' y1='{_f(y0)}' y2='{_f(y1)}' stroke='{RED}' "
                     f"stroke-width='2' stroke-dasharray='6 4'><title>threshold {_esc(_number(x))}</title></line>")
    for side, text in v["beyond"]:
        parts.append(f"<text class='beyond' x='{_f(x0 + 3 if side == 'left' else x1 - 3)}' y='{_f(y0 + 12)}' "
                     f"text-anchor='{'start' if side == 'left' else 'end'}' fill='{RED}' font-size='11'>"
                     f"{_esc(text)}</text>")
    return _svg(width, height, parts, "score")


def threshold_text(f: dict) -> str:
    from curate.app.run_folders import threshold_text as t

    return t(f)


def bars_chart(title: str, labels: list[str], values: list, x_label: str, width=420, counts=True,
               value_label: str = "count") -> str:
    """One bar per label, labels below at an angle; ``counts``: integer ticks (a count has no tick at 2.5)."""
    labels = [str(x) for x in labels]
    shown = [_short(x) for x in labels]
    band = (width - 60) / max(1, len(labels))
    # level while every label fits its bar, else at an angle, as long as the longest needs
    level = all(_width(x, 10) <= band * 0.9 for x in shown)
    drop = 10 if level else math.sin(math.radians(45)) * max((_width(x, 10) for x in shown), default=0)
    y0, y1 = 28, 28 + 160  # the plot keeps its height; long labels get room below it
    height = y1 + drop + 34
    top = max([v for v in values if isinstance(v, (int, float))], default=0) or 1
    y_ticks = linear_ticks(0, top * 1.05, 4, integer=counts)
    y_top = max(top * 1.05, y_ticks[-1])
    x0 = max(_width(tick_text(t, y_ticks), 11) for t in y_ticks) + 10
    x1 = width - 12
    ys = _Scale(0, y_top, y1, y0)
    band = (x1 - x0) / max(1, len(labels))
    every = max(1, math.ceil(12 / band))  # at most a label every 12 px: thinner bands label every few
    parts = [_title(title, 4, 16, 12), _frame(x0, y0, x1, y1), *_y_axis(ys, y_ticks, x0, x1),
             f"<text x='{_f((x0 + x1) / 2)}' y='{_f(height - 6)}' text-anchor='middle'>{_esc(x_label)}</text>"]
    for n, (label, value) in enumerate(zip(labels, values)):
        xa = x0 + band * n
        number = value if isinstance(value, (int, float)) else 0
        text = f"{value:,}" if counts and isinstance(value, int) else (
            f"{value:,.2f}" if isinstance(value, (int, float)) else str(value))
        bar = (f"<rect class='bar' x='{_f(xa + band * 0.1)}' y='{_f(ys(number))}' width='{_f(band * 0.8)}' "
               f"height='{_f(ys(0) - ys(number))}' fill='{PALETTE[0]}'/>") if number > 0 else ""
        parts.append(f"<g><title>{_esc(f'{x_label}: {label}')}\n{_esc(f'{value_label}: {text}')}</title>"
                     f"<rect x='{_f(xa)}' y='{_f(y0)}' width='{_f(band)}' height='{_f(y1 - y0)}' fill-opacity='0'/>"
                     f"{bar}</g>")
        if n % every == 0:
            cx = xa + band / 2
            place = (f"x='{_f(cx)}' y='{_f(y1 + 13)}' text-anchor='middle'" if level else
                     f"text-anchor='end' transform='translate({_f(cx + 3)},{_f(y1 + 10)}) rotate(-45)'")
            parts.append(f"<text class='tick x' {place} font-size='10' fill='#444'>{_esc(shown[n])}</text>")
    return _svg(width, height, parts, "bars")


def time_chart(stages: list[dict]) -> str:
    names = [s["folder"] for s in stages]
    return bars_chart("Seconds per stage", names, [round(s["seconds"] or 0, 2) for s in stages], "stage",
                      width=900, counts=False, value_label="seconds")

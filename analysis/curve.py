"""The probe's training curve, drawn as inline SVG for the attention page.

Training logs the probe to metrics.jsonl every train.probe_interval steps: `probe_heads` (each
head's dev cand@1, an L x H grid), `probe_best_head` and `probe_baselines` (random, first,
nearest); its eval lines carry `val_loss`. From those records this draws each head's cand@1
against step, the best head at the last probe bold, the baselines as flat lines and the val loss
on a second axis: the picture of training/report.py's probe.png, made of SVG elements so the page
stays one file that fetches nothing, and shows with scripts off. The drawing scales with the
page (viewBox), so it fits a phone; the legend is HTML and wraps.
"""

import html
import math
from numbers import Real

WIDTH, HEIGHT = 520, 280  # the drawing's own units (viewBox); the page scales it
LEFT, RIGHT, TOP, BOTTOM = 48, 48, 12, 36  # room for the axes' labels
BEST = "#d95f02"  # the best head, orange as its outline in the maps
LAYER_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                 "#7f7f7f")  # other heads, by layer: no orange, which marks the best one
BASELINE_DASHES = ("2 3", "6 4", "8 3 2 3")  # random, first, nearest
MAX_STEP_LABELS = 6
PASS_MARK = 0.9  # the curve marks where the best head first reaches this cand@1


def _number(x):
    return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(x)


def probe_records(records):
    """The probe lines of metrics.jsonl records that can be drawn: a step, and a grid and
    baselines of numbers shaped like the last probe's; [] when there is none (a run trained
    with the probe off, or a Hugging Face model)."""
    probes = [r for r in records if isinstance(r, dict) and isinstance(r.get("probe_heads"), list)]
    if not probes:
        return []
    shape = [len(row) if isinstance(row, list) else -1 for row in probes[-1]["probe_heads"]]

    def drawable(r):
        grid, best, base = r.get("probe_heads"), r.get("probe_best_head"), r.get("probe_baselines")
        return (_number(r.get("step")) and [len(row) for row in grid if isinstance(row, list)] == shape
                and all(_number(v) for row in grid for v in row)
                and isinstance(best, list) and len(best) == 2
                and isinstance(base, dict) and all(_number(v) for v in base.values()))

    return [r for r in probes if drawable(r)]


def _scale(lo, hi, a, b):
    """The linear map from [lo, hi] onto [a, b]; the middle of [a, b] when lo == hi."""
    if hi == lo:
        return lambda v: (a + b) / 2
    return lambda v: a + (v - lo) / (hi - lo) * (b - a)


def _points(pairs):
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in pairs)


def _text(x, y, text, anchor="middle", upright=False):
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if upright else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" class="axis"{turn}>'
            f"{html.escape(text)}</text>")


def _line(points, colour, width, title, dash=None, opacity=1.0, cls="head"):
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<polyline class="{cls}" points="{_points(points)}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}" stroke-opacity="{opacity}"{dashed}>'
            f"<title>{html.escape(title)}</title></polyline>")


def first_pass(probes, mark=PASS_MARK):
    """The first step at which the last probe's best head had cand@1 >= mark, or None."""
    layer, head = probes[-1]["probe_best_head"]
    return next((r["step"] for r in probes if r["probe_heads"][layer][head] >= mark), None)


def curve_svg(probes, evals):
    """The drawing: `probes` from probe_records, `evals` the records with a val loss. Steps on a
    log axis: training probes at steps spaced in log(step), where the head forms fast."""
    steps = [max(r["step"], 1) for r in probes + evals]
    log_x = _scale(math.log(min(steps)), math.log(max(steps)), LEFT, WIDTH - RIGHT)
    x = lambda step: log_x(math.log(max(step, 1)))  # noqa: E731
    y = _scale(0.0, 1.0, HEIGHT - BOTTOM, TOP)
    parts = []
    for share in (0, 0.25, 0.5, 0.75, 1):  # the cand@1 axis, on the left
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(share):.1f}" '
                     f'y2="{y(share):.1f}" class="rule"/>')
        parts.append(_text(LEFT - 4, y(share) + 4, f"{share:.0%}", "end"))
    shown = sorted({r["step"] for r in probes})
    every = math.ceil(len(shown) / MAX_STEP_LABELS)
    for step in {*shown[::-1][::every]}:  # the last probe's step always labelled
        parts.append(_text(x(step), HEIGHT - BOTTOM + 14, f"{step:,}"))
    parts.append(_text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 4, "step"))
    parts.append(_text(12, (TOP + HEIGHT - BOTTOM) / 2, "dev cand@1", upright=True))

    last = probes[-1]
    for (name, value), dash in zip(last["probe_baselines"].items(), BASELINE_DASHES):
        parts.append(_line([(LEFT, y(value)), (WIDTH - RIGHT, y(value))], "#777", 1.2,
                           f"{name} baseline: {value:.1%}", dash, cls="baseline"))
    best = tuple(last["probe_best_head"])
    heads = [(l, h) for l, row in enumerate(last["probe_heads"]) for h in range(len(row))]
    for l, h in sorted(heads, key=lambda lh: lh == best):  # the best head drawn last, on top
        points = [(x(r["step"]), y(r["probe_heads"][l][h])) for r in probes]
        title = f"L{l} H{h}: {last['probe_heads'][l][h]:.1%} at step {last['step']:,}"
        if (l, h) == best:
            parts.append(_line(points, BEST, 3, title + " (best head)", cls="head best"))
            parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{BEST}"/>' for px, py in points]
        else:
            parts.append(_line(points, LAYER_COLOURS[l % len(LAYER_COLOURS)], 1, title,
                               opacity=0.6))

    passed = first_pass(probes)
    if passed is not None:
        parts.append(f'<line x1="{x(passed):.1f}" x2="{x(passed):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                     f'stroke="{BEST}" stroke-dasharray="2 2" class="pass"><title>the best head reaches '
                     f'{PASS_MARK:.0%} at step {passed:,}</title></line>')
    if evals:  # the val loss, on the right
        losses = [r["val_loss"] for r in evals]
        lo, hi = min(losses), max(losses)
        v = _scale(lo, hi, HEIGHT - BOTTOM, TOP)
        parts.append(_line([(x(r["step"]), v(r["val_loss"])) for r in evals], "#222", 1.5,
                           f"val loss: {losses[-1]:.3f} at step {evals[-1]['step']:,}", "5 3",
                           cls="loss"))
        for value in sorted({lo, hi}):
            parts.append(_text(WIDTH - RIGHT + 4, v(value) + 4, f"{value:.2f}", "start"))
        parts.append(_text(WIDTH - 4, (TOP + HEIGHT - BOTTOM) / 2, "val loss", upright=True))
    return (f'<svg class="curve" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="each head\'s dev cand@1 against step">' + "".join(parts) + "</svg>")


def _swatch(colour, text, dash=None, width=2):
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<span><svg viewBox="0 0 24 8" class="swatch"><line x1="0" x2="24" y1="4" y2="4" '
            f'stroke="{colour}" stroke-width="{width}"{dashed}/></svg>{html.escape(text)}</span>')


def curve_section(records):
    """The page's section on the probe during training, from metrics.jsonl's records; "" when
    they hold no probe line."""
    probes = probe_records(records)
    if not probes:
        return ""
    evals = [r for r in records if isinstance(r, dict) and _number(r.get("val_loss"))
             and _number(r.get("step"))]
    last = probes[-1]
    l, h = last["probe_best_head"]
    layers = len(last["probe_heads"])
    legend = [_swatch(BEST, f"L{l} H{h}, the best head at step {last['step']:,}", width=3)]
    legend += [_swatch(LAYER_COLOURS[i % len(LAYER_COLOURS)], f"layer {i}'s other heads")
               for i in range(layers)]
    legend += [_swatch("#777", f"{name} baseline {value:.1%}", dash, 1.2)
               for (name, value), dash in zip(last["probe_baselines"].items(), BASELINE_DASHES)]
    if evals:
        legend.append(_swatch("#222", "val loss (right axis, nats/token)", "5 3", 1.5))
    passed = first_pass(probes)
    if passed is not None:
        legend.append(_swatch(BEST, f"the best head reaches {PASS_MARK:.0%} at step {passed:,}", "2 2", 1.2))
    return (f'<section class="training"><h2>The head forming during training</h2>'
            f'<p class="help">Each line is one head: how often, on the probe\'s dev sentences, it '
            f"gives the antecedent more attention than any other noun (cand@1), at each step "
            f"where training ran the probe (train.probe_interval, and steps spaced evenly in log(step)); "
            f"steps on a log scale.</p>"
            f"{curve_svg(probes, evals)}"
            f'<div class="curve-legend">{"".join(legend)}</div></section>')

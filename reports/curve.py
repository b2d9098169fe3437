"""The probe's training curve, drawn once, with matplotlib: training/console.py writes the figure
as probe.png, and the attention page inlines the same figure as SVG.

Training logs the probe to metrics.jsonl every train.probe_interval steps: `probe_heads` (each
head's dev cand@1, an L x H grid), `probe_best_head` and `probe_baselines` (random, first,
nearest); its eval lines carry `val_loss`. From those records the figure shows each head's
cand@1 against step on a log axis (training probes at steps spaced in log(step), where the head
forms fast), the best head at the last probe bold and orange, the other heads in their layer's
colour, the baselines as flat grey lines, the step where the best head first reaches 90%, and
the val loss on a second axis, as points (the default run evaluates twice).

The page's SVG scales with the page (viewBox): drawn at a phone's width, its labels stay
readable there; each line is a group whose id and class say what it is, with a <title> that
hovering shows (the head and its last cand@1). Its legend is HTML, made from the same lines, so
that it wraps on a phone; probe.png carries it below the axes.
"""

import html
import io
import re
from typing import NamedTuple

from checks import finite_number

BEST = "#d95f02"  # the best head, orange as its outline in the maps
LAYER_COLOURS = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)  # other heads, by layer: no orange, which marks the best one
BASELINE = "#777"
BASELINE_STYLES = (":", "--", "-.")  # random, first, nearest
DASH_NAMES = {":": "dotted", "--": "dashed", "-.": "dashdot"}  # matplotlib's rcParams for each
PASS_MARK = 0.9  # the curve marks where the best head first reaches this cand@1
# Inches: the page's figure is drawn at about a phone's width (400 px), so its 10 pt labels are
# about 10 px there, and the page scales it up to 600 px; the file's has room for its legend.
PAGE_SIZE, FILE_SIZE = (5.5, 3.2), (7, 5)
FONT_SIZE = 10


class Line(NamedTuple):
    """One line of the figure, as both drawings use it."""

    kind: str  # head, head best, baseline, pass or loss: the SVG group's class
    gid: str  # the SVG group's id, unique in the page
    title: str  # what hovering it says on the page
    x: list  # steps ([] for a baseline: it spans the axis)
    y: list  # values ([] for the pass mark: it spans the axis)
    style: dict  # matplotlib's plot keywords: color, lw, ls, alpha, zorder, label (legend)


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
        return (
            finite_number(r.get("step"))
            and [len(row) for row in grid if isinstance(row, list)] == shape
            and all(finite_number(v) for row in grid for v in row)
            and isinstance(best, list)
            and len(best) == 2
            and isinstance(base, dict)
            and all(finite_number(v) for v in base.values())
        )

    return [r for r in probes if drawable(r)]


def first_pass(probes, mark=PASS_MARK):
    """The first step at which the last probe's best head had cand@1 >= mark, or None."""
    layer, head = probes[-1]["probe_best_head"]
    return next((r["step"] for r in probes if r["probe_heads"][layer][head] >= mark), None)


def _head_lines(probes):
    """Each head's line, the best head's first; one legend entry for each layer's other heads."""
    last, steps = probes[-1], [r["step"] for r in probes]
    best, at = tuple(last["probe_best_head"]), f"at step {last['step']:,}"
    heads = [
        (l, h)
        for l, row in enumerate(last["probe_heads"])
        for h in range(len(row))
        if (l, h) != best
    ]
    lines, labelled = [], set()
    for l, h in [best, *heads]:
        values = [r["probe_heads"][l][h] for r in probes]
        gid, title = f"head-L{l}-H{h}", f"L{l} H{h}: {values[-1]:.1%} {at}"
        if (l, h) == best:
            lines.append(
                Line(
                    "head best",
                    gid,
                    title + " (best head)",
                    steps,
                    values,
                    {
                        "color": BEST,
                        "lw": 3,
                        "zorder": 3,
                        "label": f"L{l} H{h}, the best head {at}",
                    },
                )
            )
            continue
        label = None if l in labelled else f"layer {l}'s other heads"
        labelled.add(l)
        lines.append(
            Line(
                "head",
                gid,
                title,
                steps,
                values,
                {
                    "color": LAYER_COLOURS[l % len(LAYER_COLOURS)],
                    "lw": 1,
                    "alpha": 0.6,
                    "label": label,
                },
            )
        )
    return lines


def curve_lines(records: list) -> list[Line]:
    """The figure's lines from metrics.jsonl's records, in legend order (the best head, each
    layer's other heads, the baselines, the pass mark, the val loss); [] without probe lines."""
    probes = probe_records(records)
    if not probes:
        return []
    lines = _head_lines(probes)
    for i, ((name, value), ls) in enumerate(
        zip(probes[-1]["probe_baselines"].items(), BASELINE_STYLES)
    ):
        said = f"{name} baseline (dev) {value:.1%}"  # the probe's dev set, as the heads' lines
        lines.append(
            Line(
                "baseline",
                f"baseline-{i}",
                said,
                [],
                [value],
                {"color": BASELINE, "lw": 1.2, "ls": ls, "label": said},
            )
        )
    passed = first_pass(probes)
    if passed is not None:
        said = f"the best head reaches {PASS_MARK:.0%} at step {passed:,}"
        lines.append(
            Line(
                "pass",
                "pass",
                said,
                [passed],
                [],
                {"color": BEST, "lw": 1.2, "ls": ":", "label": said},
            )
        )
    return lines + _loss_lines(records)


def _loss_lines(records):
    """The val loss of the records that have one, as points; [] where none has."""
    evals = [
        r
        for r in records
        if isinstance(r, dict) and finite_number(r.get("val_loss")) and finite_number(r.get("step"))
    ]
    if not evals:
        return []
    losses = [r["val_loss"] for r in evals]
    # Points, not a line: at the default eval_interval there are two evaluations, and a line
    # between them would cross the whole axis and draw the eye from the heads.
    style = {"color": "#222", "lw": 1.5, "ls": "none", "marker": "o", "ms": 4}
    label = "val loss (points, right axis, nats/token)"
    said = f"val loss: {losses[-1]:.3f} at step {evals[-1]['step']:,}"
    return [
        Line("loss", "loss", said, [r["step"] for r in evals], losses, {**style, "label": label})
    ]


def draw_curve(lines, size=PAGE_SIZE, legend=False, title=None):
    """A matplotlib Figure of curve_lines' lines, its legend below the axes with `legend`, and
    `title` above them (the page's section has its own heading). The figure is made without
    pyplot: no global state, nothing to close."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator, PercentFormatter

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    ax = fig.add_subplot()
    loss_ax = ax.twinx() if any(line.kind == "loss" for line in lines) else None
    handles = []
    for line in lines:
        if line.kind == "baseline":
            artist = ax.axhline(line.y[0], **line.style)
        elif line.kind == "pass":
            artist = ax.axvline(line.x[0], **line.style)
        else:
            [artist] = (loss_ax if line.kind == "loss" else ax).plot(line.x, line.y, **line.style)
        artist.set_gid(line.gid)
        handles += [artist] if line.style.get("label") else []
    ax.set_xscale("log")  # probes are spaced in log(step): the head forms early
    ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda step, _: f"{step:,.0f}"))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("step (log scale)", fontsize=FONT_SIZE)
    ax.set_ylabel("dev cand@1", fontsize=FONT_SIZE)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=FONT_SIZE + 1)
    for axes in (ax, loss_ax) if loss_ax else (ax,):
        axes.tick_params(labelsize=FONT_SIZE)
    if loss_ax:
        loss_ax.set_ylabel("val loss (nats/token)", fontsize=FONT_SIZE)
    if legend:
        # Two columns: three of the longest labels ("val loss (points, right axis, ...)") are
        # wider than the file's 7 inches, and the legend was cut at both edges.
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def curve_svg(lines):
    """draw_curve's figure as an inline <svg class="curve"> for the page: text as text, no size
    but its viewBox (the page's CSS sizes it), each line's group classed and titled."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    # Text as text, one font named, and ids that do not change: the same page twice is the
    # same file.
    with rc_context(
        {"svg.fonttype": "none", "font.sans-serif": ["DejaVu Sans"], "svg.hashsalt": "probe-curve"}
    ):
        draw_curve(lines).savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # no XML declaration or DOCTYPE: the page is HTML
    end = svg.index(">") + 1
    view_box = re.search(r'viewBox="([^"]+)"', svg[:end]).group(1)
    svg = (
        f'<svg class="curve" viewBox="{view_box}" role="img" '
        f'aria-label="each head\'s dev cand@1 against step">' + svg[end:]
    )
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg.replace("*{", "svg.curve *{")  # matplotlib's style rule, kept to its own drawing
    for line in lines:
        svg = svg.replace(
            f'<g id="{line.gid}">',
            f'<g id="{line.gid}" class="{line.kind}"><title>{html.escape(line.title)}</title>',
            1,
        )
    return svg


def _swatch(style):
    """A legend entry of the page: a short line dashed as matplotlib dashes it (a dot for points),
    and its label."""
    from matplotlib import rcParams

    if style.get("marker"):
        return (
            f'<span><svg viewBox="0 0 24 8" class="swatch"><circle cx="12" cy="4" r="3" '
            f'fill="{style["color"]}"/></svg>{html.escape(style["label"])}</span>'
        )
    name = DASH_NAMES.get(style.get("ls"))
    dash = (
        " ".join(f"{d * style['lw']:g}" for d in rcParams[f"lines.{name}_pattern"]) if name else ""
    )
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<span><svg viewBox="0 0 24 8" class="swatch"><line x1="0" x2="24" y1="4" y2="4" '
        f'stroke="{style["color"]}" stroke-width="{style["lw"]}"{dashed}/></svg>'
        f"{html.escape(style['label'])}</span>"
    )


def curve_section(records):
    """The page's section on the probe during training, from metrics.jsonl's records; "" when
    they hold no probe line."""
    lines = curve_lines(records)
    if not lines:
        return ""
    legend = "".join(_swatch(line.style) for line in lines if line.style.get("label"))
    return (
        f'<section class="training"><h2>The head forming during training</h2>'
        f'<p class="help">Each line is one head: how often, on the probe\'s dev sentences, it '
        f"gives the antecedent more attention than any other noun (cand@1), at each step "
        f"where training ran the probe (train.probe_interval, and steps spaced evenly in "
        f"log(step)); steps on a log scale.</p>"
        f"{curve_svg(lines)}"
        f'<div class="curve-legend">{legend}</div></section>'
    )

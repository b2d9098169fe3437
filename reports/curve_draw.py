"""The training curves' one drawing, with matplotlib: a panel of Lines against step on a log
axis, written as probe.png (lab/plots.py) and as the page's inline SVG (reports/curve.py), so
that the file and the page show the same figure.

The page's SVG scales with the page (viewBox): drawn at a phone's width, its labels stay
readable there; each line is a group whose id and class say what it is, with a <title> that
hovering shows. Its legend is HTML, made from the same lines, so that it wraps on a phone;
probe.png carries it below each panel's axes.
"""

import html
import io
import re
from typing import NamedTuple

DASH_NAMES = {":": "dotted", "--": "dashed", "-.": "dashdot"}  # matplotlib's rcParams for each
# Inches: the page's figure is drawn at about a phone's width (400 px), so its 10 pt labels are
# about 10 px there, and the page scales it up to 600 px; the file's has room for its legend.
PAGE_SIZE, FILE_SIZE = (5.5, 3.2), (7, 5)
FONT_SIZE = 10
LEGEND_DROP = 32  # points from the axes' bottom to their legend's top: below the step label


class Line(NamedTuple):
    """One line of a panel, as both drawings use it."""

    kind: str  # the SVG group's class: head, head best, baseline, pass, loss, kind ..., target
    gid: str  # the SVG group's id, unique in the page
    title: str  # what hovering it says on the page
    x: list  # steps ([] for a flat line: it spans the axis at y[0])
    y: list  # values ([] for a mark at a step: it spans the axis at x[0])
    style: dict  # matplotlib's plot keywords: color, lw, ls, alpha, zorder, label (legend)


class Panel(NamedTuple):
    """One axes of lines: what its y axis says, how many legend columns, and the SVG's
    aria-label (what a screen reader says of it)."""

    lines: list[Line]
    ylabel: str
    columns: int  # of its legend in probe.png
    said: str  # the SVG's aria-label
    prefix: str = ""  # before every SVG id, so that two panels on one page share none
    share: bool = True  # a y axis of shares (0 to 100%); False: of the lines' own values


def _draw_lines(ax, lines):
    """Each line on ax; the artists that have a legend label."""
    handles = []
    for line in lines:
        if not line.x:
            artist = ax.axhline(line.y[0], **line.style)
        elif not line.y:
            artist = ax.axvline(line.x[0], **line.style)
        else:
            [artist] = ax.plot(line.x, line.y, **line.style)
        artist.set_gid(line.gid)
        handles += [artist] if line.style.get("label") else []
    return handles


def draw_panel(ax, panel, title=None):
    """The panel on `ax`: its lines against step on a log axis, `title` above; returns the
    artists that have a legend label."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator, PercentFormatter

    handles = _draw_lines(ax, panel.lines)
    ax.set_xscale("log")  # probes are spaced in log(step): the head forms early
    ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda step, _: f"{step:,.0f}"))
    if panel.share:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_ylim(0, 1.02)
    ax.set_xlabel("step (log scale)", fontsize=FONT_SIZE)
    ax.set_ylabel(panel.ylabel, fontsize=FONT_SIZE)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=FONT_SIZE)
    if title:
        ax.set_title(title, fontsize=FONT_SIZE + 1)
    return handles


# Columns are chosen by each panel: three of the heads' longest labels ("val loss (points, right
# axis, ...)") are wider than the file's 7 inches, and the legend was cut at both edges.
LEGEND = {"fontsize": 8, "frameon": False}


def draw_curve(panel, size=PAGE_SIZE, legend=False, title=None):
    """A matplotlib Figure of one panel, its legend below the axes with `legend`, and `title`
    above them (the page's section has its own heading). The figure is made without pyplot: no
    global state, nothing to close."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    handles = draw_panel(fig.add_subplot(), panel, title)
    if legend:
        fig.legend(handles=handles, loc="outside lower center", ncol=panel.columns, **LEGEND)
    return fig


def draw_panels(panels, titles, size):
    """A Figure of panels one below the other (probe.png), each with its title and its legend;
    their axes are one column of one range of steps, so that a step lines up across them."""
    from matplotlib.figure import Figure
    from matplotlib.transforms import offset_copy

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    heights = [1 if panel.share else 0.45 for panel in panels]  # a loss panel is short
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, panel, title in zip(axes, panels, titles):
        handles = draw_panel(ax, panel, title)
        # Below the step label, a fixed distance from the axes whatever their height.
        below = offset_copy(ax.transAxes, fig=fig, y=-LEGEND_DROP, units="points")
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 0),
            bbox_transform=below,
            ncol=panel.columns,
            **LEGEND,
        )
    limits = [ax.get_xlim() for ax in axes]
    for ax in axes:
        ax.set_xlim(min(lo for lo, _ in limits), max(hi for _, hi in limits))
    return fig


def curve_svg(panel, css_class="curve"):
    """draw_curve's figure as an inline <svg class=css_class> for the page: text as text, no
    size but its viewBox (the page's CSS sizes it), each line's group classed and titled, every
    id led by the panel's prefix."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    # Text as text, one font named, and ids that do not change: the same page twice is the
    # same file.
    salt = f"probe-curve{panel.prefix}"
    with rc_context(
        {"svg.fonttype": "none", "font.sans-serif": ["DejaVu Sans"], "svg.hashsalt": salt}
    ):
        draw_curve(panel).savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # no XML declaration or DOCTYPE: the page is HTML
    end = svg.index(">") + 1
    view_box = re.search(r'viewBox="([^"]+)"', svg[:end]).group(1)
    said = html.escape(panel.said)
    svg = (
        f'<svg class="{css_class}" viewBox="{view_box}" role="img" aria-label="{said}">' + svg[end:]
    )
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg.replace("*{", f"svg.{css_class.split()[0]} *{{")  # matplotlib's style rule
    if panel.prefix:  # matplotlib numbers its ids from 1 in every figure
        svg = re.sub(r'(id="|href="#|url\(#)', rf"\g<1>{panel.prefix}", svg)
    for line in panel.lines:
        svg = svg.replace(
            f'<g id="{panel.prefix}{line.gid}">',
            f'<g id="{panel.prefix}{line.gid}" class="{line.kind}">'
            f"<title>{html.escape(line.title)}</title>",
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


def curve_legend(lines):
    """The page's HTML legend of these lines: one entry for each line with a label."""
    entries = "".join(_swatch(line.style) for line in lines if line.style.get("label"))
    return f'<div class="curve-legend">{entries}</div>'

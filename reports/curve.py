"""The probe's training curve, drawn once, with matplotlib: lab/plots.py writes the figure as
probe.png, and the attention page inlines the same figure as SVG.

Training logs the probe to metrics.jsonl every train.probe_interval steps: `probe_heads` (each
head's dev cand@1, an L x H grid), `probe_best_head` and `probe_baselines` (random, first,
nearest); its eval lines carry `val_loss`. From those records the figure shows each head's
cand@1 against step on a log axis (training probes at steps spaced in log(step), where the head
forms fast), the best head at the last probe bold and orange, the other heads in their layer's
colour, the baselines as flat grey lines, the step where the best head first reaches 90%.

Where the records carry `probe_by_kind`, a second panel follows: each reason's acquisition
curve (reports/kind_curve.py); then, where they carry `val_loss`, the val loss on a short panel
of its own, as points (the default run evaluates twice), its axis in nats, never on the probe's
shares. Every panel is drawn by reports/curve_draw.py, the file's and the
page's alike; each head's line says, on hover, the head and its last cand@1.
"""

from checks import finite_number
from reports.curve_draw import Line, Panel, curve_legend, curve_svg
from reports.kind_curve import kind_panel, kind_part

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
PASS_MARK = 0.9  # the curve marks where the best head first reaches this cand@1


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
    layer's other heads, the baselines, the pass mark); [] without probe lines."""
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
    return lines


def loss_panel(records: list) -> Panel | None:
    """The val loss of the records that have one, as points on a panel of its own (its axis
    in nats, apart from the probe's shares); None where none has."""
    evals = [
        r
        for r in records
        if isinstance(r, dict) and finite_number(r.get("val_loss")) and finite_number(r.get("step"))
    ]
    if not evals:
        return None
    losses = [r["val_loss"] for r in evals]
    # Points, not a line: at the default eval_interval there are two evaluations, and a line
    # between them would cross the whole axis and draw the eye from the heads.
    style = {"color": "#222", "lw": 1.5, "ls": "none", "marker": "o", "ms": 4}
    label = "val loss (nats/token)"
    said = f"val loss: {losses[-1]:.3f} at step {evals[-1]['step']:,}"
    line = Line("loss", "loss", said, [r["step"] for r in evals], losses, {**style, "label": label})
    return Panel([line], "val loss (nats/token)", 1, LOSS_SAID, prefix="loss-", share=False)


LOSS_SAID = "the validation loss against step"


HEADS_SAID = "each head's dev cand@1 against step"


def curve_panels(records: list) -> list[Panel]:
    """probe.png's panels: the heads' (curve_lines), below it each reason's acquisition curve
    where the records hold probe_by_kind (reports/kind_curve.py), then the val loss's where
    they hold one; [] without probe lines."""
    lines = curve_lines(records)
    if not lines:
        return []
    more = [kind_panel(records), loss_panel(records)]
    return [Panel(lines, "dev cand@1", 2, HEADS_SAID), *(p for p in more if p)]


def curve_section(records):
    """The page's section on the probe during training, from metrics.jsonl's records: the
    heads' curve, each reason's where the records hold probe_by_kind, the val loss's where they
    hold one; "" when they hold no probe line."""
    panels = curve_panels(records)
    if not panels:
        return ""
    heads, by_prefix = panels[0], {panel.prefix: panel for panel in panels[1:]}
    loss = by_prefix.get("loss-")
    kinds = by_prefix.get("kinds-")
    return (
        f'<section class="training"><h2>The head forming during training</h2>'
        f'<p class="help">Each line is one head: how often, on the probe\'s dev sentences, it '
        f"gives the antecedent more attention than any other noun (cand@1), at each step "
        f"where training ran the probe (train.probe_interval, and steps spaced evenly in "
        f"log(step)); steps on a log scale.</p>"
        f"{curve_svg(heads)}{curve_legend(heads.lines)}"
        + (kind_part(records, kinds) if kinds else "")
        + (
            '<h3>Validation loss</h3><p class="help">The val loss at each evaluation, on its '
            "own axis (nats per token), against step on a log scale.</p>"
            f"{curve_svg(loss, 'curve loss')}{curve_legend(loss.lines)}"
            if loss
            else ""
        )
        + "</section>"
    )

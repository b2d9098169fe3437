"""The run's two plots, redrawn at every evaluation so that a long run can be watched:
loss.png (the training and validation loss) and probe.png (the live probe's curve, drawn by
reports.curve, the page's drawing too). A watcher of the training loop (training/watchers.py)."""

from reports.curve import curve_panels
from reports.curve_draw import FILE_SIZE, draw_curve, draw_panels
from runs.folder import LOSS_PLOT, PROBE_PLOT
from storage.atomic import write_atomic
from training.watchers import Watcher


class Plots(Watcher):
    """Both plots at every evaluation and at the end, from metrics.jsonl (rank 0)."""

    def after_eval(self, job, progress):
        if job.runtime.is_main:
            records = job.metrics.records()
            plot_losses(records, job.folder / LOSS_PLOT)
            plot_probe(records, job.folder / PROBE_PLOT)

    def on_finish(self, job, progress):
        if job.runtime.is_main:
            records = job.metrics.records()
            plot_probe(records, job.folder / PROBE_PLOT)
            if progress.final is not None:
                plot_losses(records, job.folder / LOSS_PLOT)


def _figure():
    """A new (fig, ax) for a PNG file. matplotlib is imported only when a plot is drawn, and its
    Figure is made without pyplot: no backend to choose, nothing global, nothing to close."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), dpi=100, layout="tight")
    return fig, fig.add_subplot()


def _save(fig, png_path):
    """Write the figure to png_path atomically (storage.atomic)."""
    write_atomic(png_path, lambda f: fig.savefig(f, format="png"))


LOSS_TICKS = (
    1.0,
    1.1,
    1.2,
    1.3,
    1.4,
    1.5,
    1.7,
    2.0,
    2.2,
    2.5,
    3.0,
    3.5,
    4.0,
    5.0,
    6.0,
    7.0,
    8.0,
    9.0,
)


LOSS_TITLE = "Loss during training"
PROBE_TITLE = "The probe during training: each head's dev cand@1"
KINDS_TITLE = "Each reason: the best head's cand@1, the model's choice accuracy and flip"
VAL_TITLE = "The validation loss at each evaluation"
TITLES = {"": PROBE_TITLE, "kinds-": KINDS_TITLE, "loss-": VAL_TITLE}  # by the panel's prefix


def plot_losses(records, png_path):
    """Train (every log line, a line) and train/val (every evaluation, points) loss against
    step, on a log axis
    (the first steps' drop would flatten the range where evaluations sit), and the whole val
    split's loss at the end as a star, drawn under the evaluations' points it sits among."""
    logs = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    full = [r for r in records if "val_loss_full" in r]
    fig, ax = _figure()
    if logs:
        ax.plot(
            [r["step"] for r in logs],
            [r["loss"] for r in logs],
            lw=1,
            alpha=0.5,
            label="train (batch)",
        )
    if evals:
        # Points, not lines: at the default eval_interval there are two or three evaluations, and
        # lines between them would cross the axis and hide the batch curve they sit on.
        steps = [r["step"] for r in evals]
        # Above the star (zorder): the last evaluation sits at the star's step, often at its
        # height, and was hidden under it.
        ax.plot(steps, [r["train_loss"] for r in evals], "o", ms=5, label="train (eval)", zorder=4)
        ax.plot(steps, [r["val_loss"] for r in evals], "s", ms=5, label="val", zorder=4)
    if full:
        ax.plot(
            [full[-1]["step"]],
            [full[-1]["val_loss_full"]],
            "*",
            ms=14,
            color="C3",
            alpha=0.6,
            zorder=3,
            label=f"val, whole split: {full[-1]['val_loss_full']:.3f}",
        )
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    # Labelled ticks at about even log steps, so that a range as narrow as where evaluations sit
    # (1.2-1.4, 2.2-2.3) is read off the axis; 2.5, not 2.5 x 10^0.
    ax.yaxis.set_major_locator(LogLocator(subs=LOSS_TICKS))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.1f"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_title(LOSS_TITLE)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    _save(fig, png_path)


def plot_probe(records, png_path):
    """probe.png: the probe during training (reports.curve's drawing, the page's too), each panel
    with its legend: the heads', below it each reason's where the records hold probe_by_kind,
    and the val loss's on its own axis (one image, so that a step lines up across them);
    nothing when the records hold no probe line."""
    panels = curve_panels(records)
    if len(panels) == 1:  # no val loss, no probe_by_kind: one panel
        _save(draw_curve(panels[0], FILE_SIZE, legend=True, title=PROBE_TITLE), png_path)
    elif panels:
        titles = [TITLES[panel.prefix] for panel in panels]
        size = (FILE_SIZE[0], sum(4.5 if p.share else 2.5 for p in panels))
        _save(draw_panels(panels, titles, size), png_path)

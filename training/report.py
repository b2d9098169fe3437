"""What a run shows and leaves behind for people: the console, metrics.jsonl, loss.png and a
closing summary."""

import json
import math
import sys
from pathlib import Path

from tqdm import tqdm

from analysis.curve import BEST, LAYER_COLOURS, PASS_MARK, first_pass
from runs.folder import read_metrics
from storage.atomic import write_atomic
from training.evaluate import perplexity


class Console:
    """Everything a run prints (nothing on ranks other than 0): what it does on stdout, notes
    about the set-up on stderr, and while the loop runs a progress bar.

    On a terminal the bar is on stderr, with messages and evaluation lines printed above it on
    stdout. Piped to a file (CI, nohup, a scheduler): no bar and no carriage returns, a plain
    line per log interval instead, so grep and tail find every step.
    """

    def __init__(self, enabled):
        self.enabled = enabled
        self.bar = None

    def open_bar(self, total, initial, stream=None):
        """The progress bar, from step `initial` of `total`: only on a terminal."""
        stream = stream or sys.stderr
        if self.enabled and stream.isatty():
            self.bar = tqdm(total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True,
                            mininterval=0.5, file=stream)

    def say(self, message):
        if self.bar is not None:
            self.bar.write(message, file=sys.stdout)
        elif self.enabled:
            print(message, flush=True)

    def note(self, message):
        """A line about the set-up that is not the run's record, on stderr."""
        if self.enabled:
            print(message, file=sys.stderr, flush=True)

    def step(self):
        if self.bar is not None:
            self.bar.update(1)

    def log(self, step, loss, lr, tokens_per_sec, mfu):
        shown = "n/a" if mfu is None else f"{mfu:.1%}"
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {loss:.4f} lr {lr:.2e} {tokens_per_sec:,.0f} tok/s MFU {shown}")
        else:
            self.say(f"step {step}: loss {loss:.4f}, lr {lr:.2e}, {tokens_per_sec:,.0f} tok/s, MFU {shown}")

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def eval_line(step, final, tokens_per_sec, seconds):
    """nanoGPT's `step N: train loss X, val loss Y`, which people grep for, and a little more:
    of a mix, Y is the weighted mean and each source's val loss follows it."""
    bpb = f", val bpb {final['val_bpb']:.3f}" if final.get("val_bpb") is not None else ""
    speed = f", {tokens_per_sec:,.0f} tok/s" if tokens_per_sec else ""
    return (f"step {step}: train loss {final['train_loss']:.4f}, val loss {final['val_loss']:.4f}"
            f"{by_source(final.get('val_loss_sources'))}{bpb}{speed}, {seconds:.0f} s")


def by_source(losses):
    """", val tinyshakespeare 1.7100, pronouns 0.4100" for a mix's per-source losses; "" for none."""
    if not losses:
        return ""
    return ", val " + ", ".join(f"{name} {loss:.4f}" for name, loss in losses.items())


class Metrics:
    """metrics.jsonl: one JSON object per line, each with `step`.

    On resume, lines from steps after the checkpoint (work the interruption threw away) are
    dropped, so the file always describes one consistent run; that rewrite is atomic
    (storage.atomic), so a kill during it leaves the old file.
    """

    def __init__(self, path, resume_step=None, trackers=None):
        self.path = Path(path)
        self.trackers = trackers  # training.trackers.Trackers: each record goes to them too
        kept = [] if resume_step is None else [
            record for record in read_metrics(self.path) if record.get("step", math.inf) <= resume_step]
        write_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def log(self, **record):
        # An append, not write_atomic: rewriting the file per line would cost O(lines^2). The
        # whole line goes in one write in append mode, so lines never interleave and a crash
        # can tear at most the last one, which __init__ skips on resume.
        with open(self.path, "ab") as f:
            f.write((json.dumps(record) + "\n").encode("utf-8"))
        if self.trackers is not None:
            self.trackers.log(record)

    def close(self):
        if self.trackers is not None:
            self.trackers.close()

    def records(self):
        return read_metrics(self.path)


def _figure():
    """A new (fig, ax) for a PNG file; matplotlib is imported only when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 4), dpi=100)


def _save(fig, png_path):
    """Write the figure to png_path atomically (storage.atomic), then free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    try:
        write_atomic(png_path, lambda f: fig.savefig(f, format="png"))
    finally:
        plt.close(fig)


def plot_losses(records, png_path):
    """Train (every log line) and train/val (every evaluation) loss against step, on a log axis
    (the first steps' drop would flatten the range where evaluations sit), and the whole val
    split's loss at the end as a star."""
    logs = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    full = [r for r in records if "val_loss_full" in r]
    fig, ax = _figure()
    if logs:
        ax.plot([r["step"] for r in logs], [r["loss"] for r in logs], lw=1, alpha=0.5, label="train (batch)")
    if evals:
        ax.plot([r["step"] for r in evals], [r["train_loss"] for r in evals], "o-", label="train (eval)")
        ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-", label="val")
    if full:
        ax.plot([full[-1]["step"]], [full[-1]["val_loss_full"]], "*", ms=12, color="C3",
                label=f"val, whole split: {full[-1]['val_loss_full']:.3f}")
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter

    for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis(FormatStrFormatter("%.1f"))  # 2.5, not 2.5 x 10^0
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    _save(fig, png_path)


def plot_probe(records, png_path):
    """Each head's dev cand@1 against step (the best head at the last probe drawn boldly), the
    position baselines as flat lines, and the val loss on a second axis: the coreference head
    appearing during training."""
    probes = [r for r in records if "probe_heads" in r]
    if not probes:
        return
    steps = [r["step"] for r in probes]
    best_layer, best_head = probes[-1]["probe_best_head"]
    fig, ax = _figure()
    fig.set_size_inches(7, 5)  # room for the legend below the axes
    for layer, row in enumerate(probes[-1]["probe_heads"]):
        colour = LAYER_COLOURS[layer % len(LAYER_COLOURS)]  # the page's colours (analysis/curve.py)
        labelled = False  # one legend entry per layer
        for head in range(len(row)):
            values = [r["probe_heads"][layer][head] for r in probes]
            best = (layer, head) == (best_layer, best_head)
            label = f"L{layer} H{head}, the best head" if best else None if labelled else f"layer {layer}'s other heads"
            labelled = labelled or not best
            ax.plot(steps, values, "o-" if best else "-", lw=2.5 if best else 0.8, alpha=1 if best else 0.6,
                    color=BEST if best else colour, label=label, zorder=3 if best else 2)
    for (name, value), style in zip(probes[-1]["probe_baselines"].items(), (":", "--", "-.")):
        ax.axhline(value, color="grey", ls=style, lw=1, label=f"{name} (baseline)")
    passed = first_pass(probes)
    if passed is not None:
        ax.axvline(passed, color=BEST, ls=":", lw=1.2, label=f"the best head reaches {PASS_MARK:.0%} at step {passed:,}")
    ax.set_xscale("log")  # probes are spaced in log(step): the head forms early
    ax.set_xlabel("step (log scale)")
    ax.set_ylabel("dev cand@1 (antecedent gets the most attention)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    evals = [r for r in records if "val_loss" in r]
    if evals:
        loss_ax = ax.twinx()
        loss_ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "k--", lw=1, label="val loss (right axis)")
        loss_ax.set_ylabel("val loss (nats/token)")
        more = loss_ax.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    # One legend, below the axes: it covers no line.
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=8, frameon=False)
    _save(fig, png_path)


def summary(final, tokens_seen, seconds, out_dir):
    ppl = perplexity(final["val_loss"])
    bpb = f", {final['val_bpb']:.3f} bits/byte" if final.get("val_bpb") is not None else ""
    full = ""
    if "val_loss_full" in final:
        full = f"; whole val split {final['val_loss_full']:.4f}{by_source(final.get('val_loss_full_sources'))}"
    return (
        f"done: train loss {final['train_loss']:.4f}, val loss {final['val_loss']:.4f} "
        f"(perplexity {ppl:.2f}{bpb}){full}; {tokens_seen:,} tokens in {seconds:.1f} s "
        f"({tokens_seen / max(seconds, 1e-9):,.0f} tokens/s); run folder {out_dir}"
    )

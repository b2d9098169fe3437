"""What a run shows and leaves behind for people: the console, metrics.jsonl and a closing
summary (the plots are the lab's: lab/plots.py)."""

import json
import math
import sys
from pathlib import Path

from tqdm import tqdm

from cli import terminal_width, wrap_for
from runs.folder import read_metrics
from storage.atomic import write_atomic


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
            self.bar = tqdm(
                total=total,
                initial=initial,
                desc="train",
                unit="step",
                dynamic_ncols=True,
                mininterval=0.5,
                file=stream,
                bar_format=BAR_FORMAT,
            )

    def say(self, message):
        if self.bar is not None:
            self.bar.write(wrap_for(message, sys.stdout), file=sys.stdout)
        elif self.enabled:
            print(wrap_for(message, sys.stdout), flush=True)

    def note(self, message):
        """A line about the set-up that is not the run's record, on stderr."""
        if self.enabled:
            print(wrap_for(message, sys.stderr), file=sys.stderr, flush=True)

    def step(self):
        if self.bar is not None:
            self.bar.update(1)

    def log(self, step, loss, lr, tokens_per_sec, mfu):
        shown = "n/a" if mfu is None else f"{mfu:.1%}"
        fields = [
            f"batch loss {loss:.4f}",  # the last batch's; "train loss" is an evaluation's
            f"lr {lr:.2e}",
            f"{tokens_per_sec:,.0f} tok/s",
            f"MFU {shown}",
        ]
        if self.bar is not None:
            room = terminal_width(self.bar.fp) - len(
                self.bar.format_meter(
                    **{
                        **self.bar.format_dict,
                        "bar_format": BAR_FORMAT.replace("{bar}", ""),
                        "postfix": None,
                    }
                )
            )
            self.bar.set_postfix_str(fit_fields(fields, room - MIN_BAR, BAR_DROPS))
        else:
            self.say(f"step {step}: " + ", ".join(fields))

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# The training bar: tqdm's own, less its steps/s (the tok/s field says the speed); and what the
# postfix drops, in order, when the terminal is too narrow for all of it (lr, MFU, tok/s; the
# loss goes last), so that no field is ever cut in half.
BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
BAR_DROPS = (1, 3, 2, 0)  # indices into Console.log's fields: lr, MFU, tok/s, loss
MIN_BAR = 10  # columns the bar itself keeps


def perplexity(loss):
    """exp(loss), the one rule everywhere: capped at exp(50) so a diverged run prints a number."""
    return math.exp(min(loss, 50))


def fit_fields(fields, room, drops):
    """The fields joined by ", " in their order, leaving out fields in the order of `drops` (their
    indices) until the text is at most `room` characters (tqdm adds the ", " before it)."""
    kept = list(range(len(fields)))
    for i in [None, *drops]:
        if i is not None:
            kept.remove(i)
        text = ", ".join(fields[k] for k in kept)
        if len(text) + 2 <= room or not kept:
            return text
    return ""


def eval_line(step, final, tokens_per_sec, seconds):
    """nanoGPT's `step N: train loss X, val loss Y`, which people grep for, and a little more:
    of a mix, Y is the weighted mean and each source's val loss follows it."""
    bpb = f", val bpb {final['val_bpb']:.3f}" if final.get("val_bpb") is not None else ""
    speed = f", {tokens_per_sec:,.0f} tok/s" if tokens_per_sec else ""
    return (
        f"step {step}: train loss {final['train_loss']:.4f}, val loss {final['val_loss']:.4f}"
        f"{by_source(final.get('val_loss_sources'))}{bpb}{speed}, {seconds:.0f} s"
    )


def by_source(losses):
    """ ", val tinyshakespeare 1.7100, pronouns 0.4100" for a mix's per-source losses; "" for
    none."""
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
        kept = (
            []
            if resume_step is None
            else [
                record
                for record in read_metrics(self.path)
                if record.get("step", math.inf) <= resume_step
            ]
        )
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


def summary(final, tokens_seen, seconds, out_dir):
    ppl = perplexity(final["val_loss"])
    bpb = f", {final['val_bpb']:.3f} bits/byte" if final.get("val_bpb") is not None else ""
    full = ""
    if "val_loss_full" in final:
        full = (
            f"; whole val split {final['val_loss_full']:.4f}"
            f"{by_source(final.get('val_loss_full_sources'))}"
        )
    return (
        f"done: train loss {final['train_loss']:.4f}, val loss {final['val_loss']:.4f} "
        f"(perplexity {ppl:.2f}{bpb}){full}; {tokens_seen:,} tokens in {seconds:.1f} s "
        f"({tokens_seen / max(seconds, 1e-9):,.0f} tokens/s); run folder {out_dir}"
    )

"""What a run leaves behind for people: metrics.jsonl, loss.png and a closing summary."""

import json
import math
from pathlib import Path

from storage.atomic import write_atomic


class Metrics:
    """metrics.jsonl: one JSON object per line, each with `step`.

    On resume, lines from steps after the checkpoint (work the interruption threw away) are
    dropped, so the file always describes one consistent run; that rewrite is atomic
    (storage.atomic), so a kill during it leaves the old file.
    """

    def __init__(self, path, resume_step=None):
        self.path = Path(path)
        lines = []
        if resume_step is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line torn by a kill
                    continue
                if record.get("step", math.inf) <= resume_step:
                    lines.append(line)
        write_atomic(self.path, "".join(line + "\n" for line in lines))

    def log(self, **record):
        # An append, not write_atomic: rewriting the file per line would cost O(lines^2). The
        # whole line goes in one write in append mode, so lines never interleave and a crash
        # can tear at most the last one, which __init__ skips on resume.
        with open(self.path, "ab") as f:
            f.write((json.dumps(record) + "\n").encode("utf-8"))

    def records(self):
        return [json.loads(line) for line in self.path.read_text().splitlines()]


def plot_losses(records, png_path):
    """Train (every log line) and train/val (every evaluation) loss against step."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    logs = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if logs:
        ax.plot([r["step"] for r in logs], [r["loss"] for r in logs], lw=1, alpha=0.5, label="train (batch)")
    if evals:
        ax.plot([r["step"] for r in evals], [r["train_loss"] for r in evals], "o-", label="train (eval)")
        ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-", label="val")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        write_atomic(png_path, lambda f: fig.savefig(f, format="png"))
    finally:
        plt.close(fig)


def summary(final, tokens_seen, seconds, out_dir):
    ppl = math.exp(final["val_loss"]) if final["val_loss"] < 50 else math.inf
    bpb = f", {final['val_bpb']:.3f} bits/byte" if final.get("val_bpb") is not None else ""
    full = f"; whole val split {final['val_loss_full']:.4f}" if "val_loss_full" in final else ""
    return (
        f"done: train loss {final['train_loss']:.4f}, val loss {final['val_loss']:.4f} "
        f"(perplexity {ppl:.2f}{bpb}){full}; {tokens_seen:,} tokens in {seconds:.1f} s "
        f"({tokens_seen / max(seconds, 1e-9):,.0f} tokens/s); run folder {out_dir}"
    )

"""Losses over whole texts: the whole val split at the end of a run (train.final_full_eval), and
any run on any text (`train.py --eval-only`), with a progress bar for the long ones.

Every function takes the plain module, never the DDP wrapper or the compiled one (see
training/evaluate.py).
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

from configs.schema import resolved
from model.device import pick_device, pick_dtype
from runs.loading import load_run
from training.console import perplexity
from training.evaluate import bits_per_byte, eval_batch_size, token_losses
from training.resume import data_fingerprint, data_mismatch, recorded_fingerprint
from training.runtime import Runtime, all_sum
from training.start import prepare_corpus

# windows_loss reads a text GROUP_BATCHES evaluation batches at a time: memory stays bounded for
# any text.
GROUP_BATCHES = 8


PLAIN_EVERY = 30.0  # seconds between the lines of a long evaluation off a terminal


class PlainProgress:
    """windows_bar off a terminal, when asked for (--eval-only): a line as it starts and one
    every PLAIN_EVERY seconds, so a long evaluation piped to a log says that it is working."""

    def __init__(self, total, what):
        self.total, self.what, self.done, self.last = total, what, 0, time.monotonic()
        self._say(f"evaluating {total:,} windows")

    def _say(self, text):
        print(f"{self.what}: {text}", file=sys.stderr, flush=True)

    def update(self, n):
        self.done += n
        if time.monotonic() - self.last >= PLAIN_EVERY:
            self.last = time.monotonic()
            self._say(f"{self.done:,} of {self.total:,} windows")

    def close(self):
        pass


def windows_bar(total, what, runtime, plain=False):
    """A progress bar on stderr for an evaluation of `total` windows, as the training bar: on
    rank 0 and only on a terminal (tqdm's disable=None), so logs and pipes stay plain; `plain`:
    off a terminal, a PlainProgress's few lines instead."""
    from tqdm import tqdm

    if plain and runtime.is_main and not sys.stderr.isatty():
        return PlainProgress(total, what)

    return tqdm(
        total=total,
        desc=what,
        unit="window",
        dynamic_ncols=True,
        mininterval=0.5,
        leave=False,
        file=sys.stderr,
        disable=None if runtime.is_main else True,
    )


@torch.inference_mode()
def windows_loss(model, ids, block_size, batch_size, runtime, what=None, plain=False):
    """Mean next-token loss over a sequence of token ids (any 1-D array), cut into
    non-overlapping block_size windows (one shorter window if the text is shorter than that),
    in evaluation batches of at least batch_size windows; each process takes every
    world_size-th group of them. With `what` (the text's name), a progress bar (windows_bar)
    says how far it is."""
    window = min(block_size, len(ids) - 1)
    if window < 1:
        raise ValueError("the text is one token or less; give a longer text to evaluate")
    starts = np.arange((len(ids) - 1) // window) * window
    device_type = runtime.device.type
    group = eval_batch_size(window, batch_size, device_type) * GROUP_BATCHES
    total = torch.zeros((), dtype=torch.float64, device=runtime.device)
    mine = range(runtime.rank * group, len(starts), runtime.world_size * group)
    bar = None
    if what:
        bar = windows_bar(sum(len(starts[i : i + group]) for i in mine), what, runtime, plain)
    model.eval()
    try:
        for i in mine:
            windows = np.stack([ids[s : s + window + 1] for s in starts[i : i + group]])
            windows = torch.from_numpy(windows.astype(np.int64)).to(runtime.device)  # (B, T + 1)
            total += token_losses(model, windows[:, :-1], windows[:, 1:], runtime)
            if bar is not None:
                bar.update(len(windows))
    finally:
        if bar is not None:
            bar.close()
    model.train()
    return (all_sum(total, runtime) / (len(starts) * window)).item()


def _val_name(prepared):
    """A source's val split as its progress bar names it: short, so the bar keeps its room."""
    return f"val {Path(str(prepared.meta['source'])).name}"


def full_val_loss(model, prepared, block_size, batch_size, runtime):
    """windows_loss over the whole val split of one prepared source."""
    data = np.memmap(prepared.val_path, dtype=np.dtype(prepared.meta["dtype"]), mode="r")
    return windows_loss(model, data, block_size, batch_size, runtime, what=_val_name(prepared))


def full_val_losses(model, data, block_size, batch_size, runtime):
    """{"val_loss_full": ...}: the whole val split's loss; of a mix, the weighted mean of each
    source's, which are in "val_loss_full_sources" ({name: loss})."""
    per = {
        p.name: full_val_loss(model, p.prepared, block_size, batch_size, runtime)
        for p in data.parts
    }
    out = {"val_loss_full": sum(p.weight * per[p.name] for p in data.parts)}
    if data.is_mix:
        out["val_loss_full_sources"] = per
    return out


def evaluate_run(run, runtime, batch_size, text_path=None, data=None):
    """The loss of a loaded run (runs.loading.load_run) on a text file, or on the val split of each
    source of `data` (a data.mix.Mixture); returns one line per text for people."""
    if text_path is None:
        return "\n".join(
            _evaluate_text(run, runtime, batch_size, prepared=p.prepared) for p in data.parts
        )
    return _evaluate_text(run, runtime, batch_size, text_path)


def _evaluate_text(run, runtime, batch_size, text_path=None, prepared=None):
    if text_path is not None:
        try:
            text = Path(text_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(
                f"cannot read {text_path} as UTF-8 text ({getattr(e, 'strerror', None) or e})"
            ) from None
        ids = np.asarray(run.tokenizer.encode(text), dtype=np.int64)
        meta, what = {"val_tokens": len(ids), "val_bytes": len(text.encode())}, str(text_path)
        bar = Path(text_path).name
    else:
        ids = np.memmap(prepared.val_path, dtype=np.dtype(prepared.meta["dtype"]), mode="r")
        meta, what = prepared.meta, f"the val split of {prepared.meta['source']}"
        bar = _val_name(prepared)
    block = run.model.config.block_size
    loss = windows_loss(run.model, ids, block, batch_size, runtime, bar, plain=True)
    bpb = bits_per_byte(loss, meta)
    return (
        f"{what}: loss {loss:.4f} nats/token, perplexity {perplexity(loss):.2f}"
        + (f", {bpb:.3f} bits/byte" if bpb is not None else "")
        + f" over {len(ids):,} tokens"
    )


def evaluate_only(config, text_path=None):
    """`train.py --eval-only`: the loss of the run in out_dir on a text file, or on the val split
    of the config's data — which must be the data the run was trained on."""
    config = resolved(config)  # the run folder train.py and train() choose
    device = pick_device(config.train.device)
    runtime = Runtime(device, pick_dtype(config.train.dtype, device))
    run = load_run(config.out_dir, device)
    data = None
    if text_path is None:
        # A fine-tuned run was prepared with its source's tokenizer, which the run folder holds.
        data = prepare_corpus(config, run.tokenizer if config.train.init_from else None)
        mismatch = data_mismatch(
            recorded_fingerprint(run.ckpt, config.out_dir), data_fingerprint(data)
        )
        if mismatch:
            raise ValueError(
                f"{config.out_dir} {mismatch}, so this config's val split is not its own; "
                "give the config it was trained with, or a text file to measure it on"
            )
    return evaluate_run(run, runtime, config.train.batch_size, text_path, data)

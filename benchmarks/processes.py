"""Training as a user runs it, timed: our train.py and a nanoGPT checkout's, whole processes, and
a command that, failing, says why."""

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from runs.folder import CONFIG_FILE, METRICS_FILE

ROOT = Path(__file__).resolve().parent.parent
CPU_RECIPE = "configs/shakespeare_char_cpu.yaml"
SPEEDRUN = "configs/shakespeare_char_cpu_speedrun.yaml"
MUON_RECIPE = "configs/shakespeare_char_cpu_muon.yaml"
# nanoGPT's documented CPU recipe (its README), the same shape and batch as CPU_RECIPE.
NANOGPT_CPU = [
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--eval_iters=20",
    "--log_interval=1",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--lr_decay_iters=2000",
    "--dropout=0.0",
]


WINDOW = 10  # steps per timing window, both sides: our log interval, nanoGPT's iterations grouped


def run_ours(iters, *overrides, config=CPU_RECIPE):
    """Our train.py as a user runs it; returns (ms per step of each timing window but the first,
    final record, seconds, median tokens/s, median MFU as the loop logged it)."""
    out = Path(tempfile.mkdtemp(prefix="bench-"))
    steps = [f"train.max_iters={iters}"] if iters else []  # None: the config's own
    cmd = [
        sys.executable,
        "train.py",
        config,
        f"out_dir={out}",
        *steps,
        "train.resume=never",
        f"train.log_interval={WINDOW}",
        *overrides,
    ]
    start = time.perf_counter()
    run_or_explain(cmd, ROOT)
    seconds = time.perf_counter() - start
    records = [json.loads(line) for line in (out / METRICS_FILE).read_text().splitlines()]
    resolved = yaml.safe_load((out / CONFIG_FILE).read_text())
    t = resolved["train"]
    tok_step = t["batch_size"] * t["grad_accum_steps"] * resolved["model"]["block_size"]
    # Tokens/s of each log window, evaluations left out; the first window holds the warm-up.
    logs = [r for r in records if "tokens_per_sec" in r][1:]
    windows = [r["tokens_per_sec"] for r in logs]
    final = next((r for r in reversed(records) if "val_loss_full" in r), {})
    mfus = [r["mfu"] for r in logs if r.get("mfu") is not None]
    return (
        [tok_step / tps * 1000 for tps in windows],
        final,
        seconds,
        statistics.median(windows),
        statistics.median(mfus) if mfus else None,
    )


def run_or_explain(cmd, cwd):
    """subprocess.run that, when the command fails, exits with the tail of its stderr."""
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-15:])
        sys.exit(f"error: `{' '.join(map(str, cmd))}` failed (exit {r.returncode}):\n{tail}")
    return r


def run_nanogpt(path, iters):
    """nanoGPT's train.py from a checkout (data/shakespeare_char prepared there); ms per
    iteration of each window of WINDOW iterations after the first (windows holding an evaluation
    left out, as ours leaves evaluations out), its last val loss, and the whole process's
    seconds."""
    cmd = [
        sys.executable,
        "train.py",
        *NANOGPT_CPU,
        f"--max_iters={iters}",
        f"--out_dir={tempfile.mkdtemp(prefix='bench-nanogpt-')}",
    ]
    start = time.perf_counter()
    out = run_or_explain(cmd, path).stdout
    seconds = time.perf_counter() - start
    times = {
        int(i): float(t) for i, t in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", out)
    }
    evals = {int(s) for s in re.findall(r"step (\d+): train loss", out)}
    windows = []
    for first in range(WINDOW + 1, max(times, default=0) - WINDOW + 2, WINDOW):
        block = range(first, first + WINDOW)
        if all(i in times for i in block) and not evals.intersection(block):
            windows.append(statistics.mean(times[i] for i in block))
    val = re.findall(r"val loss ([\d.]+)", out)
    return windows, float(val[-1]) if val else None, seconds

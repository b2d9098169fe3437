"""Training speed: our loop against nanoGPT's on the same recipe, the CPU speedrun against its
2000 steps, a Muon step against an AdamW one; whole processes, alternating."""

import statistics
import sys

from benchmarks.processes import MUON_RECIPE, SPEEDRUN, run_nanogpt, run_ours


def bench_train(args):
    """Our loop on nanoGPT's CPU recipe (eager, and compiled with --compile), and nanoGPT itself
    with --nanogpt, alternating so that both see the same machine. Per step: the median and the
    best of every WINDOW-step window of every run; start to finish: the median and the best run.
    On a shared machine other jobs only ever slow a run down, so the best is the steadier
    estimate of each side's own speed; both are shown."""
    row, ours, theirs, compiled, walls, walls_n = {}, [], [], [], [], []
    for _ in range(args.repeat):
        ms, final, seconds, tps, _ = run_ours(args.iters)
        ours += ms
        walls.append(seconds)
        row["train tokens/s (ours)"] = tps
        if args.compile:
            compiled += run_ours(args.iters, "train.compile=true")[0]
        if args.nanogpt:
            ms_n, val, seconds_n = run_nanogpt(args.nanogpt, args.iters)
            theirs += ms_n
            walls_n.append(seconds_n)
    for how, pick in (("median", statistics.median), ("best", min)):
        row[f"train wall s, {how} (ours, whole process)"] = pick(walls)
        if walls_n:
            row[f"train wall s, {how} (nanoGPT, whole process)"] = pick(walls_n)
            row[f"start-to-finish speed-up vs nanoGPT, {how}"] = pick(walls_n) / pick(walls)
    for how, pick in (("median", statistics.median), ("best", min)):
        row[f"train ms/step, {how} window (ours)"] = pick(ours)
        if compiled:
            row[f"train ms/step, {how} window (ours, torch.compile)"] = pick(compiled)
        if theirs:
            row[f"train ms/step, {how} window (nanoGPT)"] = pick(theirs)
            row[f"speed-up per step vs nanoGPT, {how} (eager)"] = pick(theirs) / pick(ours)
            if compiled:
                row[f"speed-up per step vs nanoGPT, {how} (compiled)"] = pick(theirs) / pick(
                    compiled
                )
    if final:
        row["val loss, whole split (ours)"] = final["val_loss_full"]
    return row


def bench_speedrun(args):
    """configs/shakespeare_char_cpu_speedrun.yaml against nanoGPT's whole 2000-iteration CPU recipe,
    whole processes, alternating: the time ratio and both final val losses (ours on the whole val
    split; nanoGPT's is its own 20-batch estimate). Done when ours is <= 1.88."""
    if not args.nanogpt:
        sys.exit("error: bench.py speedrun compares with nanoGPT: give --nanogpt DIR")
    walls, walls_n, losses, losses_n = [], [], [], []
    for _ in range(args.repeat):
        _, final, seconds, _, _ = run_ours(None, config=SPEEDRUN)
        walls.append(seconds)
        losses.append(final["val_loss_full"])
        _, val, seconds_n = run_nanogpt(args.nanogpt, 2000)
        walls_n.append(seconds_n)
        losses_n.append(val)
    return {
        "speedrun wall s (ours, whole process)": statistics.median(walls),
        "speedrun val loss, whole split (ours)": statistics.median(losses),
        "nanoGPT 2000 iterations wall s": statistics.median(walls_n),
        "nanoGPT val loss (its estimate)": statistics.median(losses_n),
        "speedrun speed-up vs nanoGPT": statistics.median(walls_n) / statistics.median(walls),
    }


def bench_optimizers(args):
    """One training step of the Muon recipe against one of the AdamW recipe (same model, data and
    tokens per step), whole runs alternating: median ms per step of the ten-step windows."""
    adamw, muon = [], []
    for _ in range(args.repeat):
        adamw += run_ours(args.iters)[0]
        muon += run_ours(args.iters, config=MUON_RECIPE)[0]
    return {
        "train ms/step, median window (AdamW recipe)": statistics.median(adamw),
        "train ms/step, median window (Muon recipe)": statistics.median(muon),
        "Muon step / AdamW step": statistics.median(muon) / statistics.median(adamw),
    }

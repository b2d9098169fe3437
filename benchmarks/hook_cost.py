"""What the hook points cost where nothing is hooked: a training step (forward and backward) of
the default recipe's model, this tree's GPT against another tree's (an older checkout, say the
commit before the points existed), alternating in one process so both see the same machine."""

import importlib
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.processes import ROOT

# The default recipe's model and batch (configs/default.yaml): 2 x 4 heads, 128 wide, a 4096-token
# vocabulary, 32 x 64 tokens.
SHAPE = dict(vocab_size=4096, block_size=64, n_layer=2, n_head=4, n_embd=128)
BATCH = 32


def _gpt_module(tree):
    """model.gpt as `tree` has it, imported apart from the project's own copy."""
    for name in [m for m in sys.modules if m == "model" or m.startswith("model.") or m == "checks"]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        return importlib.import_module("model.gpt")
    finally:
        sys.path.remove(str(tree))
        for name in [
            m for m in sys.modules if m == "model" or m.startswith("model.") or m == "checks"
        ]:
            del sys.modules[name]  # the next import finds the project's copy again


def _same_models(trees):
    """{label: the GPT of each tree's model/ code}, all with this tree's initial weights."""
    models = {}
    for label, tree in trees.items():
        gpt = _gpt_module(tree)
        torch.manual_seed(0)
        models[label] = gpt.GPT(gpt.GPTConfig(**SHAPE))
    state = models["this tree"].state_dict()
    for model in models.values():
        model.load_state_dict(state)
    return models


def bench_hooks(args):
    """Step time with no hook installed, this tree against --before DIR (rounds of 20 steps,
    alternating; medians), and the ratio; plus this tree with a no-op hook on every pattern (the
    explicit path, for scale)."""
    from model.gpt import lm_loss
    from model.hooks import hooks

    trees = {"this tree": ROOT}
    if args.before:
        trees[f"before ({args.before})"] = Path(args.before).resolve()
    models = _same_models(trees)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, SHAPE["vocab_size"], (BATCH, SHAPE["block_size"]), generator=g)
    y = torch.randint(0, SHAPE["vocab_size"], (BATCH, SHAPE["block_size"]), generator=g)
    explicit = {lambda name: name.endswith("hook_pattern"): lambda value, hook: None}

    def step(model):
        logits = model(x)
        lm_loss(logits, y).backward()
        model.zero_grad(set_to_none=True)

    def timed(label, steps=20):
        model = models[label.removesuffix(" + explicit")]
        start = time.perf_counter()
        if label.endswith(" + explicit"):
            with hooks(model, explicit):
                for _ in range(steps):
                    step(model)
        else:
            for _ in range(steps):
                step(model)
        return (time.perf_counter() - start) / steps * 1e3

    labels = [*trees, "this tree + explicit"]
    for label in labels:  # warm-up
        timed(label, 3)
    times = {label: [] for label in labels}
    for _ in range(args.rounds):
        for label in labels:
            times[label].append(timed(label))
    rows = {
        f"step ms, no hooks, {label}"
        if "explicit" not in label
        else "step ms, a no-op hook on every pattern (explicit path), this tree": statistics.median(
            values
        )
        for label, values in times.items()
    }
    if args.before:
        before = statistics.median(times[f"before ({args.before})"])
        rows["no-hook step time, this tree / before"] = (
            statistics.median(times["this tree"]) / before
        )
    return rows

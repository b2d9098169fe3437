"""One training step looked into: where its time goes (torch.profiler), and the memory it takes
above what stays resident, eager and compiled."""

import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from benchmarks.processes import CPU_RECIPE, ROOT

LOSS_MEMORY_CHILD = """
import os, sys, torch
sys.path.insert(0, os.getcwd())
from model.gpt import GPT, GPTConfig, lm_loss
variant = sys.argv[1]
torch.manual_seed(0)
raw = GPT(GPTConfig(vocab_size=50257, vocab_multiple=64, block_size=512, n_layer=2, \
n_head=4, n_embd=256))
loss_of = lambda x, y: raw(x, y)[1]
if variant == "compiled model, eager loss":
    compiled = torch.compile(raw)
    loss_of = lambda x, y: lm_loss(compiled(x), y)
elif variant == "model and loss compiled together":
    compiled = torch.compile(raw)
    loss_of = lambda x, y: compiled(x, y)[1]
x = torch.randint(0, 50257, (8, 512)); y = torch.randint(0, 50257, (8, 512))
def step():
    loss_of(x, y).backward()
    raw.zero_grad(set_to_none=False)  # gradients stay allocated: the step's own memory is measured
for _ in range(3):
    step()
def status(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key)) / 1024
open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM, the peak resident set
before = status("VmRSS:")
for _ in range(3):
    step()
print(status("VmHWM:") - before)
"""


def bench_loss_memory(args):
    """The memory one training step takes above what stays resident, on the CPU at GPT-2's
    vocabulary (8 x 512 tokens, 2 x 4 x 256 body, 50,304 padded rows): eager, the model compiled
    with the loss outside the graph (the old path), and the model and its loss compiled together
    (GPT.forward with targets, what training compiles now). Each in its own process, the
    peak resident set (Linux /proc VmHWM, reset after warm-up) minus the resident set before the
    measured steps; MALLOC_MMAP_THRESHOLD_ makes freed tensors leave the resident set."""
    if not Path("/proc/self/clear_refs").exists():
        return {"loss memory": "needs Linux (/proc/self/clear_refs)"}
    env = dict(
        os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(torch.get_num_threads())
    )
    rows = {}
    for variant in ("eager", "compiled model, eager loss", "model and loss compiled together"):
        r = subprocess.run(
            [sys.executable, "-c", LOSS_MEMORY_CHILD, variant],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        rows[f"step memory MB, GPT-2 vocab on the CPU: {variant}"] = (
            float(r.stdout.strip().splitlines()[-1])
            if r.returncode == 0
            else f"failed: {r.stderr.strip()[-200:]}"
        )
    return rows


def bench_profile(args):
    """One training step of the CPU recipe under torch.profiler, split into kinds of work."""
    from torch.profiler import ProfilerActivity, profile

    from configs.load import load_config
    from data.loader import get_batch
    from data.prepare import prepare
    from model.gpt import GPT, GPTConfig, lm_loss
    from training.optim import make_optimizer

    cfg = load_config(CPU_RECIPE)
    data = prepare(cfg.data.source, "char", None, cfg.data.val_fraction, cfg.data.cache_dir)
    model = GPT(GPTConfig(vocab_size=data.tokenizer.vocab_size, **asdict(cfg.model)))
    opt = make_optimizer(model, cfg.train, "cpu")  # AdamW, lr 1e-3, as the recipe trains
    g = torch.Generator().manual_seed(0)
    spans = {"data": 0.0, "forward+backward": 0.0, "clip": 0.0, "optimizer": 0.0}

    def step():
        t0 = time.perf_counter()
        x, y = get_batch(data.train_path, data.meta["dtype"], 12, 64, "cpu", g)
        t1 = time.perf_counter()
        lm_loss(model(x), y).backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3

    for _ in range(10):
        step()
    n = 30
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            for key, dt in zip(spans, step()):
                spans[key] += dt / n
    total = sum(spans.values())
    ops = {e.key: e.self_cpu_time_total / n / 1e6 for e in prof.key_averages()}
    mm = sum(v for k, v in ops.items() if k in ("aten::mm", "aten::addmm", "aten::bmm"))
    attn = sum(v for k, v in ops.items() if "scaled_dot_product" in k)
    row = {"step ms (profiled)": total * 1e3}
    row.update({f"{k} %": 100 * v / total for k, v in spans.items()})
    row["matmuls % (in fwd+bwd)"] = 100 * mm / total
    row["attention kernels %"] = 100 * attn / total
    row["rest of fwd+bwd % (elementwise, LayerNorm, GELU, Python)"] = (
        100 * (spans["forward+backward"] - mm - attn) / total
    )
    return row

"""Benchmarks: timings live here, never in tests. Compare two things in one run, report ratios.

    python bench.py                      # every CPU benchmark, a table
    python bench.py --json               # the same, one JSON object
    python bench.py train --nanogpt DIR  # our loop against a nanoGPT checkout, same recipe, same run
    python bench.py profile              # where one training step's time goes (torch.profiler)
    python bench.py load                 # a 124M GPT-2 folder: our loader against transformers'
    python bench.py speedrun --nanogpt DIR   # the CPU speedrun config against nanoGPT's 2000 steps
    python bench.py optimizers           # a step of the Muon recipe against one of the AdamW recipe
    python bench.py causal               # the probe's causal tests on 300 sentences, 1 thread vs default
    python bench.py gpu-check            # `make gpu-check`: the GPU table (needs one CUDA GPU)

Machines are shared and noisy: every comparison runs both sides in the same invocation, and
the ratio is the number to quote. Every table starts with the machine: CPU model, the kernels
torch chose for it (its capability: AVX2, AVX512, ...) and whether it computes bf16 in hardware,
since a bf16 path that is fast on one CPU is emulated, many times slower, on another.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
import yaml

from runs.folder import CONFIG_FILE, METRICS_FILE

ROOT = Path(__file__).resolve().parent
CPU_RECIPE = "configs/shakespeare_char_cpu.yaml"
SPEEDRUN = "configs/shakespeare_char_cpu_speedrun.yaml"
MUON_RECIPE = "configs/shakespeare_char_cpu_muon.yaml"
# nanoGPT's documented CPU recipe (its README), the same shape and batch as CPU_RECIPE.
NANOGPT_CPU = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
               "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
               "--n_embd=128", "--lr_decay_iters=2000", "--dropout=0.0"]


WINDOW = 10  # steps per timing window, both sides: our log interval, nanoGPT's iterations grouped


def run_ours(iters, *overrides, config=CPU_RECIPE):
    """Our train.py as a user runs it; returns (ms per step of each timing window but the first,
    final record, seconds, median tokens/s, median MFU as the loop logged it)."""
    out = Path(tempfile.mkdtemp(prefix="bench-"))
    steps = [f"train.max_iters={iters}"] if iters else []  # None: the config's own
    cmd = [sys.executable, "train.py", config, f"out_dir={out}", *steps, "train.resume=never",
           f"train.log_interval={WINDOW}", *overrides]
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
    return ([tok_step / tps * 1000 for tps in windows], final, seconds, statistics.median(windows),
            statistics.median(mfus) if mfus else None)


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
    left out, as ours leaves evaluations out), its last val loss, and the whole process's seconds."""
    cmd = [sys.executable, "train.py", *NANOGPT_CPU, f"--max_iters={iters}",
           f"--out_dir={tempfile.mkdtemp(prefix='bench-nanogpt-')}"]
    start = time.perf_counter()
    out = run_or_explain(cmd, path).stdout
    seconds = time.perf_counter() - start
    times = {int(i): float(t) for i, t in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", out)}
    evals = {int(s) for s in re.findall(r"step (\d+): train loss", out)}
    windows = []
    for first in range(WINDOW + 1, max(times, default=0) - WINDOW + 2, WINDOW):
        block = range(first, first + WINDOW)
        if all(i in times for i in block) and not evals.intersection(block):
            windows.append(statistics.mean(times[i] for i in block))
    val = re.findall(r"val loss ([\d.]+)", out)
    return windows, float(val[-1]) if val else None, seconds


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
                row[f"speed-up per step vs nanoGPT, {how} (compiled)"] = pick(theirs) / pick(compiled)
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
    return {"speedrun wall s (ours, whole process)": statistics.median(walls),
            "speedrun val loss, whole split (ours)": statistics.median(losses),
            "nanoGPT 2000 iterations wall s": statistics.median(walls_n),
            "nanoGPT val loss (its estimate)": statistics.median(losses_n),
            "speedrun speed-up vs nanoGPT": statistics.median(walls_n) / statistics.median(walls)}


def bench_optimizers(args):
    """One training step of the Muon recipe against one of the AdamW recipe (same model, data and
    tokens per step), whole runs alternating: median ms per step of the ten-step windows."""
    adamw, muon = [], []
    for _ in range(args.repeat):
        adamw += run_ours(args.iters)[0]
        muon += run_ours(args.iters, config=MUON_RECIPE)[0]
    return {"train ms/step, median window (AdamW recipe)": statistics.median(adamw),
            "train ms/step, median window (Muon recipe)": statistics.median(muon),
            "Muon step / AdamW step": statistics.median(muon) / statistics.median(adamw)}


def machine():
    """The CPU and torch a timing ran on."""
    from model.device import bf16_native
    from training.runtime import cpu_name
    bf16 = "bf16 in hardware" if bf16_native(torch.device("cpu")) else "no bf16 in hardware"
    return (f"{cpu_name()}, {torch.backends.cpu.get_cpu_capability()}, {bf16}; {os.cpu_count()} CPUs, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads")


def bench_generation(args):
    """Sampling at 256 tokens of context, with and without the KV cache, interleaved, five runs
    each: the median rate of each and the median of the five paired ratios. Threads as
    generate.py sets them (one for a model this small: two made the cached path bimodal, its
    many tiny kernels waiting on the second core)."""
    from generate import generation_threads
    from model.gpt import GPT, GPTConfig
    from model.sampling import generate

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=1024, block_size=512, n_layer=2, n_head=4, n_embd=128)).eval()
    prompt = torch.randint(0, 1024, (1, 256))
    threads, before = generation_threads(model.config.n_embd), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        rates = {True: [], False: []}
        for use_cache in (True, False) * 5:
            start = time.perf_counter()
            for _ in generate(model, prompt, 128, temperature=0.0, use_cache=use_cache):
                pass
            rates[use_cache].append(128 / (time.perf_counter() - start))
    finally:
        torch.set_num_threads(before)
    ratios = [a / b for a, b in zip(rates[True], rates[False])]
    return {"generate tok/s at 256 context, KV cache (median of 5)": statistics.median(rates[True]),
            "generate tok/s at 256 context, no cache (median of 5)": statistics.median(rates[False]),
            "KV-cache speed-up (median of 5 paired runs)": statistics.median(ratios),
            "KV-cache speed-up, lowest and highest": f"{min(ratios):.1f}x .. {max(ratios):.1f}x",
            "generation threads": threads or torch.get_num_threads()}


def bench_causal(args):
    """The causal tests (every head, each layer, all heads) on the 300 built-in test sentences, for
    the default model's shape (random weights: the cost does not depend on them), at one thread
    and at torch's default, alternating, median of three each."""
    from analysis.causal import causal_tests
    from data.prepare import prepare
    from data.pronouns import examples
    from model.gpt import GPT, GPTConfig

    tokenizer = prepare("pronouns", "bpe", 1024, 0.1, ROOT / ".cache").tokenizer
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=128)).eval()
    test = examples("test")
    default, seconds = torch.get_num_threads(), {1: [], 0: []}
    try:
        for _ in range(3):
            for threads in (1, 0):
                torch.set_num_threads(threads or default)
                start = time.perf_counter()
                causal_tests(model, tokenizer, test)
                seconds[threads].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(default)
    return {"causal tests s, 300 sentences, 1 thread (median of 3)": statistics.median(seconds[1]),
            f"causal tests s, 300 sentences, {default} threads (median of 3)": statistics.median(seconds[0])}


def bench_tokenizer(args):
    from data.sources import open_source
    from data.tokenizer import train_tokenizer

    text = open_source(args.text, ROOT / ".cache").read_text()
    start = time.perf_counter()
    tok = train_tokenizer("bpe", text, 4096)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    n = len(tok.encode(text))
    encode_s = time.perf_counter() - start
    mb = len(text.encode()) / 1e6
    return {f"BPE-4096 train s ({args.text})": train_s, "BPE bytes/token": mb * 1e6 / n,
            "BPE encode MB/s": mb / encode_s, **bench_bpe_without_whitespace()}


def bench_bpe_without_whitespace():
    """Random ACGT (fixed seed), which GPT-4's split pattern leaves as one giant piece: 5 MB,
    and 1 MB of it, whose time ratio shows whether training grows linearly with the text."""
    from data.tokenizer import train_tokenizer

    dna = "".join(random.Random(0).choices("ACGT", k=5_000_000))
    seconds = {}
    for mb in (1, 5):
        start = time.perf_counter()
        train_tokenizer("bpe", dna[: mb * 1_000_000], 1024)
        seconds[mb] = time.perf_counter() - start
    return {"BPE-1024 train s (5 MB DNA, no whitespace)": seconds[5],
            "BPE-1024 DNA train time, 5 MB / 1 MB (linear: 5)": seconds[5] / seconds[1]}


def bench_prepare(args):
    """Preparing a 20 MB text. char: prepare() once (one worker: threads cannot speed up its
    Python encode). bpe, one worker against every usable CPU, alternating: the whole prepare()
    from scratch (hash, scan, train the BPE on its first 10 M characters with its pieces counted
    on N processes, encode on N threads), five times each, the best and the median of each; then
    the encoding pass alone (data.prepare._encode, as prepare runs it once the tokenizer is
    trained), three times each, the best of each. Every bpe output must match the first
    one-worker files byte for byte."""
    import numpy as np

    import data.prepare as prep
    from data.pronouns import corpus_text
    from data.sources import open_source

    n = prep.usable_cpus()
    encoding, busy = {}, {}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "corpus.txt"
        path.write_text(corpus_text(seed=1, n_bytes=20_000_000))
        mb = path.stat().st_size / 1e6
        start = time.perf_counter()
        prep.prepare(str(path), "char", None, 0.1, Path(d) / "char")
        char_s = time.perf_counter() - start

        first, whole = None, {1: [], n: []}
        for i, workers in enumerate([1, n] * 5):
            start = time.perf_counter()
            done = prep.prepare(str(path), "bpe", None, 0.1, Path(d) / f"bpe{i}", workers=workers)
            whole[workers].append(time.perf_counter() - start)
            first = first or done
            if done.dir.name != first.dir.name:
                sys.exit(f"error: the cache folder depends on the worker count: {done.dir.name}")
            same_files(first.dir, done.dir, f"prepare() with {workers} workers")
        meta = first.meta
        for i, workers in enumerate([1, n] * 3):
            out = Path(d) / f"pass{i}"
            out.mkdir()
            start, cpu = time.perf_counter(), time.process_time()
            prep._encode(open_source(str(path)), first.tokenizer, meta["split_char"],
                         meta["source_chars"], np.dtype(meta["dtype"]), out, workers,
                         prep.ENCODE_CHUNK_CHARS)
            seconds = time.perf_counter() - start
            if seconds < encoding.get(workers, float("inf")):
                encoding[workers], busy[workers] = seconds, (time.process_time() - cpu) / seconds
            same_files(first.dir, out, f"the encoding pass with {workers} workers")
            shutil.rmtree(out)
    return {"prepare MB/s (char, 20 MB, includes hashing)": mb / char_s,
            "prepare MB/s (bpe, 20 MB, whole, 1 worker, best)": mb / min(whole[1]),
            f"prepare MB/s (bpe, 20 MB, whole, {n} workers, best)": mb / min(whole[n]),
            "prepare speed-up, bpe whole (N workers / 1), best": min(whole[1]) / min(whole[n]),
            "prepare speed-up, bpe whole (N workers / 1), median": (statistics.median(whole[1])
                                                                   / statistics.median(whole[n])),
            "bpe encoding pass MB/s (1 worker)": mb / encoding[1],
            f"bpe encoding pass MB/s ({n} workers)": mb / encoding[n],
            "bpe encoding pass speed-up (N workers / 1)": encoding[1] / encoding[n],
            # Cores this process kept busy: below N, other work on the machine took the rest.
            f"bpe encoding pass CPU s / wall s ({n} workers)": busy[n]}


def bench_mix(args):
    """Preparing a mix against preparing its sources one by one, from empty caches, alternating,
    three times each, the best of each: two generated texts (10 MB and 2 MB), bpe 4096 and char.
    The mix hashes each source twice and trains one tokenizer; one by one trains one per source."""
    from data.mix import MixEntry, prepare_mix
    from data.prepare import prepare
    from data.pronouns import corpus_text

    results = {}
    with tempfile.TemporaryDirectory() as d:
        paths = [Path(d) / "big.txt", Path(d) / "small.txt"]
        paths[0].write_text(corpus_text(seed=1, n_bytes=10_000_000))
        paths[1].write_text(corpus_text(seed=2, n_bytes=2_000_000))
        for kind, vocab in (("bpe", 4096), ("char", None)):
            best = {"mix": float("inf"), "one by one": float("inf")}
            for i in range(3):
                start = time.perf_counter()
                prepare_mix([MixEntry(str(paths[0]), 0.8), MixEntry(str(paths[1]), 0.2)], kind, vocab,
                            cache_dir=Path(d) / f"mix-{kind}{i}")
                best["mix"] = min(best["mix"], time.perf_counter() - start)
                start = time.perf_counter()
                for path in paths:
                    prepare(str(path), kind, vocab, cache_dir=Path(d) / f"one-{kind}{i}")
                best["one by one"] = min(best["one by one"], time.perf_counter() - start)
            results[f"prepare a mix of 10 + 2 MB, {kind}, s (best of 3)"] = best["mix"]
            results[f"prepare the 2 sources one by one, {kind}, s (best of 3)"] = best["one by one"]
            results[f"mix / one by one, {kind}"] = best["mix"] / best["one by one"]
    return results


LOSS_MEMORY_CHILD = """
import os, sys, torch
sys.path.insert(0, os.getcwd())
from model.gpt import GPT, GPTConfig, lm_loss
from training.start import TrainingLoss
variant = sys.argv[1]
torch.manual_seed(0)
raw = GPT(GPTConfig(vocab_size=50257, vocab_multiple=64, block_size=512, n_layer=2, n_head=4, n_embd=256))
loss_of = TrainingLoss(raw)
if variant == "compiled model, eager loss":
    compiled = torch.compile(raw)
    loss_of = lambda x, y: lm_loss(compiled(x), y)
elif variant == "model and loss compiled together":
    loss_of = torch.compile(loss_of)
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
    (TrainingLoss, what training compiles now). Each in its own process, the peak resident set
    (Linux /proc VmHWM, reset after warm-up) minus the resident set before the measured steps;
    MALLOC_MMAP_THRESHOLD_ makes freed tensors leave the resident set."""
    if not Path("/proc/self/clear_refs").exists():
        return {"loss memory": "needs Linux (/proc/self/clear_refs)"}
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS=str(torch.get_num_threads()))
    rows = {}
    for variant in ("eager", "compiled model, eager loss", "model and loss compiled together"):
        r = subprocess.run([sys.executable, "-c", LOSS_MEMORY_CHILD, variant], cwd=ROOT, env=env,
                           capture_output=True, text=True)
        rows[f"step memory MB, GPT-2 vocab on the CPU: {variant}"] = (
            float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else f"failed: {r.stderr.strip()[-200:]}")
    return rows


def same_files(reference, folder, what):
    """Exit with an error unless every file in `folder` equals its namesake in `reference`."""
    differ = [p.name for p in sorted(folder.iterdir())
              if p.read_bytes() != (reference / p.name).read_bytes()]
    if differ:
        sys.exit(f"error: {what} wrote other bytes than one worker in {', '.join(differ)}")


def bench_load(args):
    """GPT-2 small's shape (124M, random weights) saved by transformers as a Hugging Face folder
    (model.safetensors), loaded by our loader as load_run does it (model.gpt2_import +
    checkpoint.build_gpt, unpadded) and by transformers' GPT2LMHeadModel.from_pretrained,
    alternating, best of 3 each. Both map the file, so loading reads little; "+ first forward" (64
    tokens) also reads every weight once. Fine-tuning (train.init_from) pads the token table to a
    multiple of 64, a 154 MB copy: its row shows that cost."""
    try:
        import transformers
    except ImportError:
        sys.exit("error: `bench.py load` compares with transformers: pip install -r requirements-test.txt")
    from model.checkpoint import build_gpt
    from model.gpt2_import import read_gpt2

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    loaders = {"ours": lambda d: build_gpt(*read_gpt2(d, vocab_multiple=1)),
               "transformers": lambda d: transformers.GPT2LMHeadModel.from_pretrained(d).eval(),
               "ours, padded for fine-tuning": lambda d: build_gpt(*read_gpt2(d, vocab_multiple=64))}
    load_s, first_s = {}, {}
    x = torch.randint(0, 50257, (1, 64), generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as d:
        torch.manual_seed(0)
        transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(d)
        for _ in range(3):
            for name, load in loaders.items():
                start = time.perf_counter()
                model = load(d)
                loaded = time.perf_counter() - start
                with torch.no_grad():
                    model(x)
                used = time.perf_counter() - start
                del model
                load_s[name] = min(loaded, load_s.get(name, float("inf")))
                first_s[name] = min(used, first_s.get(name, float("inf")))
    return {"load GPT-2 124M s (ours)": load_s["ours"],
            "load GPT-2 124M s (transformers)": load_s["transformers"],
            "load speed-up vs transformers": load_s["transformers"] / load_s["ours"],
            "load + first forward s (ours)": first_s["ours"],
            "load + first forward s (transformers)": first_s["transformers"],
            "load + first forward speed-up vs transformers": first_s["transformers"] / first_s["ours"],
            "load GPT-2 124M s (ours, padded for fine-tuning)": load_s["ours, padded for fine-tuning"]}


def bench_profile(args):
    """One training step of the CPU recipe under torch.profiler, split into kinds of work."""
    from torch.profiler import ProfilerActivity, profile

    from configs.schema import load_config
    from data.loader import get_batch
    from data.prepare import prepare
    from model.gpt import GPT, GPTConfig, lm_loss
    from training.optim import make_optimizer

    cfg = load_config(CPU_RECIPE)
    data = prepare(cfg.data.source, "char", None, cfg.data.val_fraction, cfg.data.cache_dir)
    model = GPT(GPTConfig(vocab_size=data.tokenizer.vocab_size, **asdict(cfg.model)))
    opt = make_optimizer(model, "adamw", 1e-3, 0.1, (0.9, 0.99), "cpu")
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
        100 * (spans["forward+backward"] - mm - attn) / total)
    return row


def gpu_versions():
    """torch, the CUDA it was built for, and the NVIDIA driver (from nvidia-smi, if present)."""
    driver = None
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                           capture_output=True, text=True)
        driver = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    return {"torch": torch.__version__, "built for CUDA": torch.version.cuda or "none (a CPU build)",
            "NVIDIA driver, GPU": driver or "not found (no nvidia-smi)"}


def gpu_check(args, show=None):
    """One table on one CUDA GPU, in about five minutes: the versions, the test suite on CUDA, the
    baby GPT with bf16 + compile + fused AdamW, and GPT-2 small's MFU on random tokens. Each row is
    shown (show(key, value)) as soon as it is measured; a step that fails adds a row saying why
    and the next step runs, so no row already measured is lost."""
    from training.runtime import compile_problem, peak_flops

    show = show or print_row
    versions = gpu_versions()
    for key, value in versions.items():
        show(key, value)
    if not torch.cuda.is_available():
        if "not found" in versions["NVIDIA driver, GPU"] or not torch.version.cuda:
            sys.exit("error: gpu-check needs a CUDA GPU and a CUDA build of torch; on a CPU run "
                     "`python bench.py` instead")
        sys.exit(f"error: torch {torch.__version__} is built for CUDA {torch.version.cuda}, which this "
                 "NVIDIA driver cannot run (CUDA 13 builds need driver 580 or newer); update the driver, "
                 "or install the torch build for an older CUDA as PyTorch's install selector shows, "
                 "e.g. CUDA 12.6")
    problem = compile_problem("cuda")
    if problem:
        show("note", f"torch.compile needs a C compiler and Python headers: {problem}; compiling is left off")
    device = torch.device("cuda", torch.cuda.current_device())
    peak = peak_flops(device)
    show("GPU", torch.cuda.get_device_name(device))
    show("bf16 peak TFLOP/s", peak / 1e12 if peak else "unknown (set train.peak_flops)")
    steps = (("test suite", gpu_test_suite), ("shakespeare_char", partial(gpu_baby_gpt, args.gpu_iters, not problem)),
             ("gpt2_124m", partial(gpu_gpt2_small, device, peak, not problem)))
    return run_steps(steps, show)


def run_steps(steps, show):
    """Run each (name, step) in turn, showing the rows it returns; a step that fails (an
    exception, or sys.exit from a command it ran) becomes the row "<name> failed" with the reason
    in one line, and the next step runs. Returns every row."""
    rows = {}
    for name, step in steps:
        try:
            got = step()
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure is one row of the table
            reason = " ".join(str(e).split()) or type(e).__name__
            got = {f"{name} failed": reason[-300:]}
        for key, value in got.items():
            show(key, value)
        rows.update(got)
    return rows


def print_row(key, value, width=52):
    print(f"{key:<{width}}  {value:,.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}", flush=True)


def gpu_test_suite():
    """The whole test suite, on the GPU where a test asks for one."""
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                           cwd=ROOT, capture_output=True, text=True)
    row = {"test suite (CUDA tests run, CPU ones too)": ((tests.stdout or tests.stderr).strip().splitlines()
                                                         or ["no output"])[-1]}
    if tests.returncode != 0:
        failed = [line for line in tests.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        row["failed tests"] = "; ".join(failed[:5]) or "see pytest's output"
    return row


def gpu_baby_gpt(iters, compile):
    """shakespeare_char through train.py: a fixed number of steps, its schedule fitted to them,
    evaluated at the end (the corpus from .cache/corpora/ when it is there, else downloaded)."""
    _, final, seconds, tps, util = run_ours(iters, "train.eval_interval=100000", f"train.compile={str(compile).lower()}",
                                            "train.dtype=bfloat16", "train.device=cuda",
                                            config="configs/shakespeare_char.yaml")
    return {f"shakespeare_char {iters} steps: wall s (with compile, eval)": seconds,
            "shakespeare_char tokens/s": tps, "shakespeare_char MFU": util if util is not None else "n/a",
            "shakespeare_char val loss (whole split)": final.get("val_loss_full")}


def gpu_gpt2_small(device, peak, compile):
    """GPT-2 small on random tokens: the model, optimizer and precision of gpt2_124m.yaml, the
    model and its loss compiled together as training does."""
    from model.gpt import GPT, GPTConfig
    from training.optim import make_optimizer
    from training.runtime import mfu
    from training.start import TrainingLoss

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=50257, vocab_multiple=64, block_size=1024, n_layer=12, n_head=12,
                       n_embd=768, bias=True)
    raw = GPT(config).to(device)
    model = TrainingLoss(raw)
    model = torch.compile(model) if compile else model
    opt = make_optimizer(raw, "adamw", 6e-4, 0.1, (0.9, 0.95), "cuda")
    B = 16
    x = torch.randint(0, 50257, (B, 1024), device=device)
    y = torch.randint(0, 50257, (B, 1024), device=device)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):  # compile and warm up
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    start, n = time.perf_counter(), 20
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    tps = n * B * 1024 / (time.perf_counter() - start)
    util = mfu(raw.flops_per_token(), tps, peak, 1)
    return {"gpt2_124m tokens/s (random tokens, bf16, compile)": tps,
            "gpt2_124m MFU": util if util is not None else "n/a",
            "gpt2_124m peak GPU memory GiB (batch 16 x 1024)": torch.cuda.max_memory_allocated(device) / 2**30}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="*", default=[], help="train, generate, tokenizer, prepare, mix, load, loss-memory, causal, profile, speedrun, optimizers, gpu-check")
    p.add_argument("--json", action="store_true")
    p.add_argument("--iters", type=int, default=300, help="training steps per timed run (default 300)")
    p.add_argument("--nanogpt", metavar="DIR", help="a nanoGPT checkout with data/shakespeare_char prepared")
    p.add_argument("--compile", action="store_true", help="train: also time our loop with torch.compile")
    p.add_argument("--repeat", type=int, default=1, help="train: alternate the timed runs this many times")
    p.add_argument("--text", default="tinyshakespeare", help="corpus for the tokenizer benchmark")
    p.add_argument("--gpu-iters", type=int, default=2500, help="gpu-check: steps of shakespeare_char")
    args = p.parse_args()
    benches = {"train": bench_train, "generate": bench_generation, "tokenizer": bench_tokenizer,
               "prepare": bench_prepare, "mix": bench_mix, "load": bench_load,
               "loss-memory": bench_loss_memory, "profile": bench_profile, "gpu-check": gpu_check,
               "speedrun": bench_speedrun, "optimizers": bench_optimizers, "causal": bench_causal}
    chosen = args.what or ["train", "generate", "tokenizer", "prepare"]
    unknown = [w for w in chosen if w not in benches]
    if unknown:
        p.exit(2, f"error: unknown benchmark {unknown[0]!r}; choose from {', '.join(benches)}\n")
    results = {"machine": machine()}
    for name in chosen:
        if name == "gpu-check" and not args.json:  # its rows are printed as they are measured
            benches[name](args)
            continue
        results.update(benches[name](args, show=lambda key, value: None) if name == "gpu-check"
                       else benches[name](args))
    results["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps(results))
    else:
        width = max(map(len, results))
        for key, value in results.items():
            print_row(key, value, width)


if __name__ == "__main__":
    main()

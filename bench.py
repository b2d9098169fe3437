"""Benchmarks: timings live here, never in tests. Compare two things in one run, report ratios.

    python bench.py                      # every CPU benchmark, a table
    python bench.py --json               # the same, one JSON object
    python bench.py train --nanogpt DIR  # our loop against a nanoGPT checkout, same recipe,
                                         # same run
    python bench.py profile              # where one training step's time goes (torch.profiler)
    python bench.py load                 # a 124M GPT-2 folder: our loader against transformers'
    python bench.py speedrun --nanogpt DIR   # the CPU speedrun config against nanoGPT's 2000 steps
    python bench.py optimizers           # a step of the Muon recipe against one of the AdamW recipe
    python bench.py causal               # the probe's causal tests on 300 sentences, 1 thread
                                         # vs default
    python bench.py hooks --before DIR   # a step with no hook installed: this tree against DIR's
    python bench.py circuit [--run DIR]  # --probe --circuit's computation: default and GPT-2 shapes
    python bench.py gpu-check            # `make gpu-check`: the GPU table (needs one CUDA GPU)
    python bench.py resolve [--config F] # training until every kind's choice is learned; it
                                         # stops there

Machines are shared and noisy: every comparison runs both sides in the same invocation, and
the ratio is the number to quote. Every table starts with the machine: CPU model, the kernels
torch chose for it (its capability: AVX2, AVX512, ...) and whether it computes bf16 in hardware,
since a bf16 path that is fast on one CPU is emulated, many times slower, on another.
"""

import argparse
import json
import os
import resource
import signal
import sys

import torch

from analysis.acquisition import ACCURACY, FLIP
from benchmarks.circuit_cost import bench_circuit
from benchmarks.gpu import gpu_check
from benchmarks.hook_cost import bench_hooks
from benchmarks.inference import bench_causal, bench_generation, bench_load
from benchmarks.preparation import bench_mix, bench_prepare, bench_tokenizer
from benchmarks.resolve import RESOLVE_CONFIG, bench_resolve, share
from benchmarks.step import bench_loss_memory, bench_profile
from benchmarks.training import bench_optimizers, bench_speedrun, bench_train
from checks import did_you_mean
from cli import OneLineErrorParser


def machine():
    """The CPU and torch a timing ran on."""
    from model.device import bf16_native
    from training.peak import cpu_name

    bf16 = "bf16 in hardware" if bf16_native(torch.device("cpu")) else "no bf16 in hardware"
    return (
        f"{cpu_name()}, {torch.backends.cpu.get_cpu_capability()}, {bf16}; {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )


def print_row(key, value, width=52):
    print(
        f"{key:<{width}}  {value:,.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}",
        flush=True,
    )


def build_parser():
    p = OneLineErrorParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "what",
        nargs="*",
        default=[],
        help="train, generate, tokenizer, prepare, mix, load, loss-memory, causal, profile, "
        "speedrun, optimizers, hooks, circuit, gpu-check, resolve",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--iters", type=int, default=300, help="training steps per timed run (default 300)"
    )
    p.add_argument(
        "--nanogpt", metavar="DIR", help="a nanoGPT checkout with data/shakespeare_char prepared"
    )
    p.add_argument(
        "--compile", action="store_true", help="train: also time our loop with torch.compile"
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="train: alternate the timed runs this many times"
    )
    p.add_argument("--text", default="tinyshakespeare", help="corpus for the tokenizer benchmark")
    p.add_argument(
        "--gpu-iters", type=int, default=2500, help="gpu-check: steps of shakespeare_char"
    )
    p.add_argument("--before", metavar="DIR", help="hooks: an older checkout to compare against")
    p.add_argument("--rounds", type=int, default=10, help="hooks: alternating rounds of 20 steps")
    p.add_argument(
        "--run", metavar="DIR", help="circuit: a trained run folder for the default shape"
    )
    add_resolve_flags(p)
    return p


def add_resolve_flags(p):
    """resolve's flags: the config it trains, and the targets at which it stops."""
    p.add_argument(
        "--config",
        default=RESOLVE_CONFIG,
        help=f"resolve: the config to train (default {RESOLVE_CONFIG}); the run stops, saved, "
        "at the first probe where every kind it measures is resolved, and its folder is removed",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="resolve: a config override, as train.py takes them (repeat for more; "
        "train.max_iters=N: at most N steps)",
    )
    p.add_argument(
        "--accuracy",
        type=share,
        default=ACCURACY,
        help=f"resolve: each kind's choice accuracy target (default {ACCURACY:.2f})",
    )
    p.add_argument(
        "--flip",
        type=share,
        default=FLIP,
        help=f"resolve: each kind's flip target (default {FLIP:.2f})",
    )


def main():
    p = build_parser()
    args = p.parse_args()
    benches = {
        "train": bench_train,
        "generate": bench_generation,
        "tokenizer": bench_tokenizer,
        "prepare": bench_prepare,
        "mix": bench_mix,
        "load": bench_load,
        "loss-memory": bench_loss_memory,
        "profile": bench_profile,
        "gpu-check": gpu_check,
        "speedrun": bench_speedrun,
        "optimizers": bench_optimizers,
        "causal": bench_causal,
        "hooks": bench_hooks,
        "circuit": bench_circuit,
        "resolve": bench_resolve,
    }
    chosen = args.what or ["train", "generate", "tokenizer", "prepare"]
    unknown = [w for w in chosen if w not in benches]
    if unknown:
        meant = did_you_mean(unknown[0], benches)
        meant = f"{meant} " if meant else ""
        p.exit(
            2, f"error: unknown benchmark {unknown[0]!r}; {meant}choose from {', '.join(benches)}\n"
        )
    results = {"machine": machine()}
    for name in chosen:
        if name == "gpu-check" and not args.json:  # its rows are printed as they are measured
            benches[name](args, show=print_row)
            continue
        results.update(
            benches[name](args, show=lambda key, value: None)
            if name == "gpu-check"
            else benches[name](args)
        )
    results["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps(results))
    else:
        width = max(map(len, results))
        for key, value in results.items():
            print_row(key, value, width)


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: temporary folders are removed on the way out


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)  # the training's own handler takes over in its loop
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)  # as train.py: one line, no traceback
        sys.exit(130)

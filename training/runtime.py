"""Where training runs: device, precision, (under torchrun) the process group, and the FLOP/s
that count as 100% MFU."""

import contextlib
import datetime
import json
import os
import platform
import re
import shutil
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model.device import pick_device, pick_dtype
from storage.atomic import write_atomic

# Dense bf16 tensor-core peaks (FLOP/s), from the vendors' data sheets (the "without sparsity"
# column). Matched against torch.cuda.get_device_name() as whole words, longest name first,
# so "L40S" is not taken for "L4" and "H100 PCIe" not for "H100" (the SXM part).
GPU_BF16_PEAK = {
    "B200": 2250e12,
    "H200 NVL": 835e12,
    "H200": 989e12,
    "GH200": 989e12,
    "H100 NVL": 835e12,
    "H100 PCIe": 756e12,
    "H100": 989e12,
    "H800": 989e12,
    "A100": 312e12,
    "A800": 312e12,
    "A10G": 125e12,
    "A10": 125e12,
    "L40S": 362e12,
    "L40": 181e12,
    "L4": 121e12,
    "RTX 6000 Ada": 364e12,
    "RTX A6000": 155e12,
    "RTX 4090": 165e12,
    "RTX 3090": 71e12,
    "V100": 125e12,
    "T4": 65e12,  # V100/T4: fp16
}

# GPUs without TF32 tensor cores: their plain fp32 peak (data sheets).
GPU_FP32_PEAK = {"V100": 15.7e12, "T4": 8.1e12}

# A process that is gone or out of step fails the run within this time, not hours later.
PROCESS_GROUP_TIMEOUT = datetime.timedelta(minutes=10)
# Except while waiting ranks sit in a barrier as one rank per node tokenises a corpus, which
# may take long for a few GB (`train.py --prepare-only` before torchrun avoids the wait).
PREPARE_TIMEOUT = datetime.timedelta(hours=2)


@dataclass
class Runtime:
    device: torch.device
    dtype: torch.dtype  # the autocast dtype; float32 means no autocast
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    control: object = None  # under torchrun: a gloo group for agreeing on host-side decisions
    preparing: object = None  # under torchrun: a gloo group with PREPARE_TIMEOUT, for preparation

    @property
    def ddp(self):
        return self.world_size > 1

    @property
    def is_main(self):
        return self.rank == 0

    def autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)


def compile_problem(device_type, which=shutil.which, python_include=None):
    """Why torch.compile cannot build kernels for `device_type` on this machine, or None.
    Inductor writes C++ for a CPU; for a GPU, Triton builds a small C helper against Python's
    headers. `which` finds a program on PATH; python_include is where Python.h should be."""
    if device_type == "cpu" and not any(which(c) for c in ("c++", "g++", "clang++")):
        return "no C++ compiler (install g++)"
    if device_type == "cuda":
        if not any(which(c) for c in ("cc", "gcc", "clang")):
            return "no C compiler (install gcc)"
        include = (
            python_include
            if python_include is not None
            else sysconfig.get_paths().get("include", "")
        )
        if not Path(include, "Python.h").exists():
            return f"no Python headers ({Path(include, 'Python.h')}; install python3-dev)"
    return None


def torchrun_env(environ=os.environ):
    """(rank, local_rank, world_size) as torchrun sets them; (0, 0, 1) for a plain process."""
    return (
        int(environ.get("RANK", "0")),
        int(environ.get("LOCAL_RANK", "0")),
        int(environ.get("WORLD_SIZE", "1")),
    )


def setup_runtime(device_name, dtype_name):
    """Read torchrun's environment if present and set up the device (a CUDA device always with
    its index), the process group (nccl on CUDA, gloo on CPU) and TF32 matmuls."""
    rank, local_rank, world_size = torchrun_env()
    device = pick_device(device_name, world_size, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # first: pick_dtype asks the current GPU what it computes
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = pick_dtype(dtype_name, device)
    if world_size == 1:
        return Runtime(device, dtype)
    if not dist.is_initialized():
        # device_id binds NCCL's communicator to this process's GPU (and silences its
        # "devices unknown" warning).
        dist.init_process_group(
            backend="nccl" if device.type == "cuda" else "gloo",
            timeout=PROCESS_GROUP_TIMEOUT,
            device_id=device if device.type == "cuda" else None,
        )
    # CPU-side groups: a flag or a barrier on the host never waits for the GPU's queue.
    control = dist.new_group(backend="gloo")
    preparing = dist.new_group(backend="gloo", timeout=PREPARE_TIMEOUT)
    return Runtime(device, dtype, rank, local_rank, world_size, control, preparing)


def teardown(runtime):
    if runtime.ddp and dist.is_initialized():
        dist.destroy_process_group()


def any_process(flag, runtime):
    """True on every process when `flag` is true on any one of them (a one-number all-reduce
    on the CPU group). Every process must call it at the same point."""
    if not runtime.ddp:
        return bool(flag)
    value = torch.tensor(int(bool(flag)))
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=runtime.control)
    return bool(value.item())


def all_sum(value, runtime):
    """The sum of a scalar tensor over all processes (itself when there is one)."""
    if runtime.ddp:
        value = value.clone()
        dist.all_reduce(value)
    return value


def gpu_peak_flops(name, dtype=torch.bfloat16):
    """The peak FLOP/s of the GPU called `name` (torch.cuda.get_device_name) in the dtype a run
    computes in, or None if unknown: the table's bf16 (fp16) peak; for float32, which runs on
    TF32 tensor cores (setup_runtime turns them on), half of it, except on GPUs without TF32."""
    for key in sorted(GPU_BF16_PEAK, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", name, re.IGNORECASE):
            if dtype == torch.float32:
                return GPU_FP32_PEAK.get(key, GPU_BF16_PEAK[key] / 2)
            return GPU_BF16_PEAK[key]
    return None


def peak_flops(device, override=None, cache_dir=None, dtype=torch.bfloat16):
    """FLOP/s of one process taken as 100% MFU: the override, a GPU's peak in `dtype` from the
    table (None for a GPU the table lacks: MFU is then not shown), or on a CPU the best fp32
    matmul rate of several warmed-up timings (cpu_peak_flops: measured once per machine)."""
    if override:
        return float(override)
    if device.type == "cuda":
        return gpu_peak_flops(torch.cuda.get_device_name(device), dtype)
    if device.type == "cpu":
        return cpu_peak_flops(cache_dir)
    return None


def cpu_peak_flops(cache_dir=None):
    """measured_matmul_flops at torch's thread count, kept in <cache_dir>/cpu_peak_flops.json
    under the CPU's name, the thread count and torch's version, so later runs on the machine
    reuse it (delete the file to measure again). A figure for n threads below one thread's was
    measured while other work held the cores: it is measured again (twice at most), and kept only
    once plausible, so a busy moment never stays in the cache. Without a cache_dir, or one that
    cannot be read or written, it is measured every time."""
    threads = torch.get_num_threads()
    key = f"{cpu_name()}; {threads} threads; torch {torch.__version__}"
    path = Path(cache_dir) / "cpu_peak_flops.json" if cache_dir is not None else None
    known = {}
    if path is not None:
        with contextlib.suppress(OSError, ValueError):
            known = json.loads(path.read_text())
        if not isinstance(known, dict):
            known = {}
        entry = known.get(key)
        if isinstance(entry, dict) and plausible_peak(entry.get("flops"), entry.get("one_thread")):
            return float(entry["flops"])
    flops, one = _peaks(threads)
    for _ in range(2):
        if plausible_peak(flops, one):
            break
        flops = max(flops, _peaks(threads)[0])
    if path is not None and plausible_peak(flops, one):
        with contextlib.suppress(
            ValueError
        ):  # write_atomic's one-line error: measured again next run
            write_atomic(
                path,
                json.dumps({**known, key: {"flops": flops, "one_thread": one}}, indent=1) + "\n",
            )
    return max(flops, one)


def plausible_peak(flops, one_thread):
    """Whether a peak measured at n threads can be the machine's: numbers, and not below 90% of
    one thread's (n threads never multiply slower than one; a lower figure met busy cores)."""
    numbers = all(isinstance(x, (int, float)) and x > 0 for x in (flops, one_thread))
    return numbers and flops >= 0.9 * one_thread


def _peaks(threads):
    """(peak at `threads` threads, peak at one thread): one measurement each."""
    flops = measured_matmul_flops(torch.device("cpu"))
    if threads == 1:
        return flops, flops
    torch.set_num_threads(1)
    try:
        one = measured_matmul_flops(torch.device("cpu"))
    finally:
        torch.set_num_threads(threads)
    return flops, one


def cpu_name():
    """The processor's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def measured_matmul_flops(device, n=1024, runs=5, seconds=0.06):
    """The best of `runs` timings of n×n matmuls: a busy moment lowers a timing, and a lowered
    peak would overstate MFU, so the fastest run is the one closest to what the machine can do.
    n = 1024: smaller matmuls can run far below the machine's rate, below even what the model's
    own matmuls reach, and MFU would then read above 100%."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(3):
        a @ b  # warm up: thread pool, caches
    best = 0.0
    for _ in range(runs):
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            a @ b
            reps += 1
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - start))
    return best


def mfu(flops_per_token, tokens_per_sec, peak, world_size):
    """Model FLOPs utilisation of all processes together: tokens/s counts every process's
    tokens, so it is measured against the peak of all of them. None when the peak is unknown."""
    if not peak:
        return None
    return flops_per_token * tokens_per_sec / (peak * world_size)


def training_module(raw_model, runtime, compile):
    """What the training step calls, model(x, y) -> (logits, loss): raw_model, under torchrun
    DDP-wrapped, then maybe compiled (the loss compiled with the model: the cross-entropy fuses
    with the LM head). Compiling after the DDP wrap is the order torch's notes on DDP and compile
    advise: dynamo's DDPOptimizer then cuts the graph at the gradient buckets, so that each
    bucket's all-reduce overlaps the rest of the backward."""
    model = raw_model
    if runtime.ddp:
        # The only buffer (positions) is a constant: syncing it every forward would be waste.
        model = DDP(
            model,
            device_ids=[runtime.device.index] if runtime.device.type == "cuda" else None,
            forward_sync_buffers=False,
        )
    return torch.compile(model) if compile else model

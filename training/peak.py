"""The FLOP/s that count as 100% MFU: a GPU's from its data sheet, a CPU's measured (and kept
per machine), and MFU itself. Only the log line's MFU reads them."""

import contextlib
import json
import platform
import re
import time
from pathlib import Path

import torch

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

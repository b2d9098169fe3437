"""Where training runs: device, precision, and (under torchrun) the process group."""

import contextlib
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

# Dense bf16 peaks (FLOP/s) of common GPUs, matched against torch.cuda.get_device_name().
GPU_BF16_PEAK = {
    "H200": 989e12, "H100": 989e12, "A100": 312e12, "A10G": 125e12, "L4": 121e12,
    "L40S": 362e12, "RTX 4090": 165e12, "RTX 3090": 71e12, "V100": 125e12, "T4": 65e12,
}


@dataclass
class Runtime:
    device: torch.device
    dtype: torch.dtype  # the autocast dtype; float32 means no autocast
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

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


def pick_device(name):
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_dtype(name, device):
    """auto: bf16 autocast on CUDA GPUs that have it, fp16 (with a GradScaler) on older ones,
    fp32 elsewhere."""
    if name != "auto":
        return getattr(torch, name)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def setup_runtime(device_name, dtype_name):
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) if present and set up the
    device, the process group (nccl on CUDA, gloo on CPU) and TF32 matmuls."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name)
    if device.type == "cuda":
        if world_size > 1:
            device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    dtype = pick_dtype(dtype_name, device)
    if device.type != "cuda" and dtype == torch.float16:
        raise ValueError("train.dtype=float16 needs a CUDA GPU; use float32 or bfloat16 on this device")
    return Runtime(device, dtype, rank, local_rank, world_size)


def teardown(rt):
    if rt.ddp and dist.is_initialized():
        dist.destroy_process_group()


def all_sum(value, rt):
    """The sum of a scalar tensor over all processes (itself when there is one)."""
    if rt.ddp:
        value = value.clone()
        dist.all_reduce(value)
    return value


def peak_flops(device, override=None):
    """FLOP/s taken as 100% MFU: the override, a GPU's bf16 peak from the table, or a CPU
    fp32 matmul peak measured here and now (about a quarter of a second)."""
    if override:
        return float(override)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, flops in GPU_BF16_PEAK.items():
            if key in name:
                return flops
    return measured_matmul_flops(device)


def measured_matmul_flops(device, n=512, seconds=0.25):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm up
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        reps += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return 2 * n**3 * reps / (time.perf_counter() - start)

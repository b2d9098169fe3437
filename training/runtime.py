"""Where training runs: device, precision and, under torchrun, the process group and the DDP
wrap (the FLOP/s that count as 100% MFU: training/peak.py)."""

import contextlib
import datetime
import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model.device import pick_device, pick_dtype

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

"""Where a model runs and in what precision: small pure decisions, and the one place that asks
torch what this machine has.

The decisions (`resolve_device`, `choose_dtype`, `cpu_bf16_native`, `fast_matmul_dtype`) take the
machine's facts as arguments, so every case — one GPU, torchrun on several, no GPU, an old GPU, a
CPU with or without bf16 in hardware — is tested on any machine, CPU included. `pick_device`,
`pick_dtype` and `bf16_native` gather the facts and call them; training and generation use these.
"""

import contextlib
import os
from dataclasses import dataclass

import torch

DEVICE_HELP = "use auto, cpu, cuda, cuda:N or mps"


@dataclass(frozen=True)
class Machine:
    """What the decisions need to know about this machine."""

    cuda_count: int = 0  # visible CUDA GPUs (0: no usable CUDA)
    cuda_current: int = 0  # torch.cuda.current_device(): the GPU a bare "cuda" means
    mps: bool = False

    @classmethod
    def here(cls):
        cuda = torch.cuda.is_available()
        mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
        return cls(
            torch.cuda.device_count() if cuda else 0,
            torch.cuda.current_device() if cuda else 0,
            mps,
        )


def resolve_device(name, machine, world_size=1, local_rank=0):
    """The torch.device for `name` ("auto", "cpu", "cuda", "cuda:N", "mps") on `machine`.

    A CUDA device always comes back with an index, since torch.cuda.set_device and DDP need one:
    under torchrun (world_size > 1) process `local_rank` takes GPU `local_rank`; alone, a bare
    "cuda" means the current GPU. "auto" prefers cuda, then mps, then cpu. Raises ValueError,
    one line saying what to do, for a name torch does not know, a device this machine lacks, or
    one GPU named for several processes.
    """
    if name == "auto":
        name = "cuda" if machine.cuda_count else "mps" if machine.mps else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {name!r}; {DEVICE_HELP}") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "mps":
        if not machine.mps:
            raise ValueError("device mps asked for, but MPS is not available here; use cpu")
        return device
    if device.type != "cuda":
        raise ValueError(f"unsupported device {name!r}; {DEVICE_HELP}")
    if not machine.cuda_count:
        raise ValueError(f"device {name} asked for, but no CUDA GPU is available; use cpu or auto")
    if world_size > 1:
        if device.index is not None:
            raise ValueError(
                f"device {name} names one GPU, but torchrun started {world_size} "
                "processes; use cuda or auto, and each process takes its local rank's GPU"
            )
        index = local_rank
    else:
        index = machine.cuda_current if device.index is None else device.index
    if index >= machine.cuda_count:
        raise ValueError(
            f"GPU {index} asked for, but {machine.cuda_count} are visible "
            f"(cuda:0 .. cuda:{machine.cuda_count - 1})"
        )
    return torch.device("cuda", index)


def choose_dtype(name, device_type, bf16_native=False):
    """The autocast dtype for `name` ("auto", "float32", "bfloat16", "float16") on a device type.

    auto: bf16 on CUDA GPUs that compute it natively (Ampere and newer), fp16 on older ones
    (V100, T4: with a GradScaler), fp32 elsewhere. float16 needs CUDA (ValueError otherwise).
    """
    if name == "auto":
        if device_type == "cuda":
            return torch.bfloat16 if bf16_native else torch.float16
        return torch.float32
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        name
    )
    if dtype is None:
        raise ValueError(f"unknown dtype {name!r}; use auto, float32, bfloat16 or float16")
    if dtype == torch.float16 and device_type != "cuda":
        raise ValueError("dtype float16 needs a CUDA GPU; use float32 or bfloat16 on this device")
    return dtype


# oneDNN, which runs torch's bf16 matmuls on a CPU, can be capped below an ISA by the variable
# ONEDNN_MAX_CPU_ISA; these caps leave it no bf16 instructions, so bf16 is emulated.
_ONEDNN_ISAS_WITHOUT_BF16 = {
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
}


def cpu_bf16_native(capabilities, onednn_max_isa=None):
    """Whether a CPU multiplies bf16 matrices in hardware: it has AVX512-BF16 or AMX-BF16
    (`capabilities` as torch.cpu.get_capabilities() gives them) and oneDNN is not capped below
    them. Elsewhere (an AVX2-only x86 CPU, an Arm CPU we know nothing of) torch emulates bf16
    matmuls, element by element, many times slower than float32."""
    if (onednn_max_isa or "").strip().upper() in _ONEDNN_ISAS_WITHOUT_BF16:
        return False
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def fast_matmul_dtype(device_type, bf16_native):
    """The dtype for matrix products whose precision the code may choose (Muon's Newton–Schulz
    iterations): bf16 where the device computes it natively (Ampere and newer CUDA GPUs, CPUs with
    AVX512-BF16 or AMX), float32 everywhere else, where bf16 would be emulated (an AVX2 CPU, a
    V100) or is unknown to us (MPS)."""
    return torch.bfloat16 if bf16_native and device_type in ("cuda", "cpu") else torch.float32


def pick_device(name, world_size=1, local_rank=0):
    """resolve_device on this machine."""
    return resolve_device(name, Machine.here(), world_size, local_rank)


def bf16_native(device):
    """Whether `device` computes bf16 natively (emulated bf16 does not count: it is slow)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return cpu_bf16_native(torch.cpu.get_capabilities(), os.environ.get("ONEDNN_MAX_CPU_ISA"))
    return False


def pick_dtype(name, device):
    """choose_dtype for `device`."""
    return choose_dtype(name, device.type, bf16_native(device))


@contextlib.contextmanager
def inference_precision(device):
    """Run a model on `device` as fast as training does: on a GPU, TF32 matmuls and autocast to
    the dtype `dtype: auto` picks there (bf16, or fp16 where bf16 is not native; the KV cache
    follows it); elsewhere float32, unchanged."""
    device = torch.device(device)
    if device.type != "cuda" or pick_dtype("auto", device) == torch.float32:
        yield
        return
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with torch.autocast("cuda", dtype=pick_dtype("auto", device)):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


# Sampling runs one token per step, and the causal tests one query per intervention: below GPT-2
# small's width such matmuls are too small to share out, and on a busy machine a second thread
# waits (spinning) for a core instead of helping (docs/log/performance.md, "Generation and
# threads").
ONE_THREAD_BELOW_WIDTH = 768


def generation_threads(n_embd: int, requested: int | None = None, environ=os.environ) -> int | None:
    """How many CPU threads sampling and the analyses should use: `requested` when given; None
    (keep torch's default) when OMP_NUM_THREADS says, or for models ONE_THREAD_BELOW_WIDTH wide
    or more; else 1, because a small model's one-token steps (sampling) and one-query passes (the
    causal tests) gain nothing from a second thread and lose much when the cores are busy."""
    if requested is not None:
        return requested
    if environ.get("OMP_NUM_THREADS") or n_embd >= ONE_THREAD_BELOW_WIDTH:
        return None
    return 1


def use_generation_threads(model: torch.nn.Module, requested: int | None = None) -> int:
    """Set torch's CPU thread count (process-wide) for sampling from or studying `model`, as
    generate.py does (generation_threads of its width), and return the count now in force. From
    Python, call it once after loading a run and before sampling or the analyses; training keeps
    its own count."""
    threads = generation_threads(model.config.n_embd, requested)
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()

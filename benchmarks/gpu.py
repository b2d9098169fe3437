"""`make gpu-check`: one table on one CUDA GPU, each row shown as it is measured."""

import shutil
import subprocess
import sys
import time
from functools import partial

import torch

from benchmarks.processes import ROOT, run_ours


def gpu_versions():
    """torch, the CUDA it was built for, and the NVIDIA driver (from nvidia-smi, if present)."""
    driver = None
    if shutil.which("nvidia-smi"):
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        driver = (
            r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
        )
    return {
        "torch": torch.__version__,
        "built for CUDA": torch.version.cuda or "none (a CPU build)",
        "NVIDIA driver, GPU": driver or "not found (no nvidia-smi)",
    }


def gpu_check(args, show):
    """One table on one CUDA GPU, in about five minutes: the versions, the test suite on CUDA, the
    baby GPT with bf16 + compile + fused AdamW, and GPT-2 small's MFU on random tokens. Each row is
    shown (show(key, value)) as soon as it is measured; a step that fails adds a row saying why
    and the next step runs, so no row already measured is lost."""
    from training.peak import peak_flops
    from training.runtime import compile_problem

    versions = gpu_versions()
    for key, value in versions.items():
        show(key, value)
    if not torch.cuda.is_available():
        if "not found" in versions["NVIDIA driver, GPU"] or not torch.version.cuda:
            sys.exit(
                "error: gpu-check needs a CUDA GPU and a CUDA build of torch; on a CPU run "
                "`python bench.py` instead"
            )
        sys.exit(
            f"error: torch {torch.__version__} is built for CUDA {torch.version.cuda}, which this "
            "NVIDIA driver cannot run (CUDA 13 builds need driver 580 or newer); update the "
            "driver, or install the torch build for an older CUDA as PyTorch's install selector "
            "shows, e.g. CUDA 12.6"
        )
    problem = compile_problem("cuda")
    if problem:
        show(
            "note",
            f"torch.compile needs a C compiler and Python headers: {problem}; "
            "compiling is left off",
        )
    device = torch.device("cuda", torch.cuda.current_device())
    peak = peak_flops(device)
    show("GPU", torch.cuda.get_device_name(device))
    show("bf16 peak TFLOP/s", peak / 1e12 if peak else "unknown (set train.peak_flops)")
    steps = (
        ("test suite", gpu_test_suite),
        ("shakespeare_char", partial(gpu_baby_gpt, args.gpu_iters, not problem)),
        ("gpt2_124m", partial(gpu_gpt2_small, device, peak, not problem)),
    )
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


def gpu_test_suite():
    """The whole test suite, on the GPU where a test asks for one."""
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    row = {
        "test suite (CUDA tests run, CPU ones too)": (
            (tests.stdout or tests.stderr).strip().splitlines() or ["no output"]
        )[-1]
    }
    if tests.returncode != 0:
        failed = [
            line for line in tests.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))
        ]
        row["failed tests"] = "; ".join(failed[:5]) or "see pytest's output"
    return row


def gpu_baby_gpt(iters, compile):
    """shakespeare_char through train.py: a fixed number of steps, its schedule fitted to them,
    evaluated at the end (the corpus from .cache/corpora/ when it is there, else downloaded)."""
    _, final, seconds, tps, util = run_ours(
        iters,
        "train.eval_interval=100000",
        f"train.compile={str(compile).lower()}",
        "train.dtype=bfloat16",
        "train.device=cuda",
        config="configs/shakespeare_char.yaml",
    )
    return {
        f"shakespeare_char {iters} steps: wall s (with compile, eval)": seconds,
        "shakespeare_char tokens/s": tps,
        "shakespeare_char MFU": util if util is not None else "n/a",
        "shakespeare_char val loss (whole split)": final.get("val_loss_full"),
    }


def gpu_gpt2_small(device, peak, compile):
    """GPT-2 small on random tokens: the model, optimizer and precision of gpt2_124m.yaml, the
    model and its loss compiled together as training does."""
    from configs.schema import TrainConfig
    from model.gpt import GPT, GPTConfig
    from training.optim import make_optimizer
    from training.peak import mfu

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=50257,
        vocab_multiple=64,
        block_size=1024,
        n_layer=12,
        n_head=12,
        n_embd=768,
        bias=True,
    )
    raw = GPT(config).to(device)
    model = torch.compile(raw) if compile else raw
    opt = make_optimizer(raw, TrainConfig(lr=6e-4, weight_decay=0.1, beta2=0.95), "cuda")
    B = 16
    x = torch.randint(0, 50257, (B, 1024), device=device)
    y = torch.randint(0, 50257, (B, 1024), device=device)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(x, y)
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
    return {
        "gpt2_124m tokens/s (random tokens, bf16, compile)": tps,
        "gpt2_124m MFU": util if util is not None else "n/a",
        "gpt2_124m peak GPU memory GiB (batch 16 x 1024)": torch.cuda.max_memory_allocated(device)
        / 2**30,
    }

"""bench.py's command line (its timings are never asserted: they belong to the benchmark)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def bench(*args):
    return subprocess.run([sys.executable, "bench.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_unknown_benchmark_is_a_one_line_error():
    r = bench("nothing")
    assert r.returncode == 2 and r.stderr.startswith("error: unknown benchmark 'nothing'")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: gpu-check would run")
def test_gpu_check_without_a_gpu_says_what_to_run_instead():
    r = bench("gpu-check")
    assert r.returncode == 1 and "needs a CUDA GPU" in r.stderr and "Traceback" not in r.stderr


def test_generation_benchmark_reports_both_rates_and_their_ratio_as_json():
    import json

    r = bench("generate", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    cached, plain = row["generate tok/s at 256 context, KV cache"], row["generate tok/s at 256 context, no cache"]
    assert row["KV-cache speed-up"] == pytest.approx(cached / plain)

"""bench.py's command line and output, driven in this process with stand-in benchmarks: nothing
is timed here (timings belong to the benchmark, never to a test)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import bench
import benchmarks.gpu
from benchmarks.gpu import run_steps
from benchmarks.processes import ROOT, run_or_explain

CPU_BENCHES = ("bench_train", "bench_generation", "bench_tokenizer", "bench_prepare")


def run_bench(monkeypatch, capsys, *argv):
    """bench.main() with these arguments: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["bench.py", *argv])
    code = 0
    try:
        bench.main()
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def stand_ins(monkeypatch):
    """Each CPU benchmark replaced by one that returns a fixed row and records its arguments."""
    called = []

    def stand_in(name, row):
        def run(args):
            called.append((name, args))
            return row

        return run

    rows = {
        "bench_train": {"train ms/step (ours)": 71.9, "train tokens/s (ours)": 10680.5},
        "bench_generation": {"generate tok/s at 256 context, KV cache": 1050.25},
        "bench_tokenizer": {"bpe bytes/token": 3.59, "bpe vocabulary": 4096},
        "bench_prepare": {"prepare MB/s (char)": 11.0},
    }
    for name, row in rows.items():
        monkeypatch.setattr(bench, name, stand_in(name, row))
    return called, rows


def test_no_argument_runs_the_four_cpu_benchmarks_in_order(monkeypatch, capsys, stand_ins):
    called, _ = stand_ins
    code, out, _ = run_bench(monkeypatch, capsys, "--iters", "7")
    assert code == 0 and [name for name, _ in called] == list(CPU_BENCHES)
    assert all(args.iters == 7 for _, args in called)  # each gets the parsed flags


def test_json_is_one_object_with_the_machine_every_row_and_the_peak_memory(
    monkeypatch, capsys, stand_ins
):
    _, rows = stand_ins
    code, out, _ = run_bench(monkeypatch, capsys, "generate", "tokenizer", "--json")
    assert code == 0 and out.count("\n") == 1
    result = json.loads(out)
    assert list(result) == [
        "machine",
        *rows["bench_generation"],
        *rows["bench_tokenizer"],
        "peak RSS MB",
    ]
    assert {k: result[k] for k in rows["bench_tokenizer"]} == rows["bench_tokenizer"]
    assert f"torch {torch.__version__}" in result["machine"] and result["peak RSS MB"] > 0
    # the CPU a timing ran on: a bf16 path fast on one CPU is emulated on another
    assert f", {torch.backends.cpu.get_cpu_capability()}, " in result["machine"]
    assert "bf16 in hardware" in result["machine"]


def test_the_table_aligns_values_and_prints_floats_with_three_decimals(
    monkeypatch, capsys, stand_ins
):
    code, out, _ = run_bench(monkeypatch, capsys, "train", "tokenizer")
    lines = out.splitlines()
    width = len("train tokens/s (ours)")  # the longest key
    assert code == 0 and lines[0].startswith(f"{'machine':<{width}}  ")
    assert lines[-1].startswith(f"{'peak RSS MB':<{width}}  ")
    assert lines[1:-1] == [
        f"{'train ms/step (ours)':<{width}}  71.900",
        f"{'train tokens/s (ours)':<{width}}  10,680.500",
        f"{'bpe bytes/token':<{width}}  3.590",
        f"{'bpe vocabulary':<{width}}  4096",
    ]  # an int as it is


def test_an_unknown_benchmark_is_a_one_line_error_before_anything_runs(
    monkeypatch, capsys, stand_ins
):
    called, _ = stand_ins
    code, out, err = run_bench(monkeypatch, capsys, "train", "nothing")
    assert code == 2 and out == "" and called == []
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "'nothing'" in err and "gpu-check" in err  # the name given, and the names to choose from


@pytest.mark.parametrize(
    "driver, cuda, says",
    [
        ("not found (no nvidia-smi)", "13.0", ("CUDA GPU", "`python bench.py`")),
        ("470.82, Tesla V100", "13.0", ("CUDA 13.0", "driver 580")),
    ],
)
def test_gpu_check_without_a_usable_gpu_says_what_to_do(monkeypatch, capsys, driver, cuda, says):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(
        benchmarks.gpu,
        "gpu_versions",
        lambda: {"torch": "2.13.0", "built for CUDA": cuda, "NVIDIA driver, GPU": driver},
    )
    monkeypatch.setattr(torch.version, "cuda", cuda)
    code, out, _ = run_bench(monkeypatch, capsys, "gpu-check")
    assert isinstance(code, str) and code.startswith("error: ")  # sys.exit(message): exit 1
    assert all(s in code for s in says), code
    assert re.search(
        rf"^NVIDIA driver, GPU +{re.escape(driver)}$", out, re.M
    )  # the versions come first


def test_gpu_check_rows_are_shown_as_measured_and_a_failed_step_loses_none(capsys):
    def failing():
        run_or_explain([sys.executable, "-c", "import sys; sys.exit('no corpus here')"], ROOT)

    shown = []
    rows = run_steps(
        [("first", lambda: {"a": 1.5}), ("baby GPT", failing), ("last", lambda: {"b": "ok"})],
        lambda key, value: shown.append((key, value)),
    )
    assert [key for key, _ in shown] == ["a", "baby GPT failed", "b"] and rows == dict(shown)
    assert "no corpus here" in rows["baby GPT failed"] and "\n" not in rows["baby GPT failed"]
    bench.print_row("a", 1.5, width=4)
    bench.print_row("b", "ok", width=4)
    assert capsys.readouterr().out == "a     1.500\nb     ok\n"


def tiny_resolve_config(tmp_path, *overrides):
    """A tiny config on pronoun sentences (its probe file beside it), written to tiny.yaml."""
    from configs.load import load_config, to_yaml
    from data.pronouns import examples
    from data.pronouns.jsonl import write_jsonl
    from tests.helpers import TINY_MODEL

    (tmp_path / "text.txt").write_text("\n".join(e.text for e in examples("train", n=300)))
    write_jsonl(examples("dev", n=40), tmp_path / "probe.jsonl")
    config = load_config(
        None,
        [
            f"data.source={tmp_path / 'text.txt'}",
            f"data.cache_dir={tmp_path / 'cache'}",
            *TINY_MODEL,
            "tokenizer.kind=bpe",
            "tokenizer.vocab_size=300",
            "model.block_size=64",
            "train.max_iters=20",
            "train.eval_interval=10",
            "train.eval_iters=2",
            f"train.probe_file={tmp_path / 'probe.jsonl'}",
            *overrides,
        ],
    )
    (tmp_path / "tiny.yaml").write_text(to_yaml(config))
    return tmp_path / "tiny.yaml"


def test_resolve_trains_a_config_until_every_kind_is_resolved_and_stops_there(
    monkeypatch, capsys, tmp_path
):
    """A tiny config with targets any probe meets: the run stops after its first probe (step
    1), and the table says so, with the training's seconds until then."""
    argv = ["resolve", "--config", str(tiny_resolve_config(tmp_path)), "--json"]
    code, out, err = run_bench(monkeypatch, capsys, *argv, "--accuracy", "0", "--flip", "0")
    assert code == 0, err
    row = json.loads(out)
    name = f"resolve ({tmp_path / 'tiny.yaml'}, accuracy >= 0.00, flip >= 0.00)"
    assert row[name] == "resolved at step 1"
    assert (
        0
        <= row["resolve wall s (training, until resolved)"]
        < row["resolve wall s (whole call: data, model, training)"]
    )
    assert re.search(r"at step 1 of 20", out + err)  # the loop stopped there, saved
    assert any(v.endswith("at step 1") for k, v in row.items() if k.endswith(": accuracy, flip"))
    # Its folder is removed: nothing invites the user to resume it (issue 60: 3).
    assert "run the same command" not in err and "temporary" in err, err


@pytest.mark.parametrize("flag, value", [("--accuracy", "1.5"), ("--flip", "nan")])
def test_resolve_refuses_a_target_that_is_not_a_share(monkeypatch, capsys, flag, value):
    code, out, err = run_bench(monkeypatch, capsys, "resolve", flag, value)  # issue 60: 10
    assert code == 2 and flag in err and value in err and err.count("\n") == 1, err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_resolve_stopped_by_a_signal_is_one_line_and_leaves_nothing(tmp_path, sig):  # 60: 3
    config = tiny_resolve_config(tmp_path, "train.max_iters=100000", "train.eval_interval=50")
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "bench.py", "resolve", "--config", config, "--accuracy", "1"],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    deadline = time.time() + 90
    while not list((tmp_path / "tmp").glob("bench-resolve-*/metrics.jsonl")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.rstrip().endswith("interrupted") and "run the same command" not in err, err
    assert list((tmp_path / "tmp").iterdir()) == []


def test_resolves_rows_say_where_it_resolved_or_how_near_each_kind_came():
    from benchmarks.resolve import resolve_rows

    def probe(step, seconds, agreement, meaning):
        rows = {"agreement": agreement, "meaning": meaning, "role": None}
        return {
            "step": step,
            "seconds": seconds,
            "probe_by_kind": {
                kind: {"twins": 0, "accuracy": None, "flip": None}
                if got is None
                else {"twins": 5, "accuracy": got[0], "flip": got[1]}
                for kind, got in rows.items()
            },
        }

    records = [probe(10, 1.5, (0.6, 0.3), (0.5, 0.2)), probe(20, 3.0, (0.95, 0.8), (0.92, 0.71))]
    row = resolve_rows("c.yaml", records, 0.9, 0.7)
    assert row == {
        "resolve (c.yaml, accuracy >= 0.90, flip >= 0.70)": "resolved at step 20",
        "resolve wall s (training, until resolved)": 3.0,
        "resolve agreement: accuracy, flip": "0.95, 0.80 at step 20",
        "resolve meaning: accuracy, flip": "0.92, 0.71 at step 20",
        "resolve role: accuracy, flip": "no choice twins",
    }
    row = resolve_rows("c.yaml", records[:1], 0.9, 0.7)
    assert row["resolve (c.yaml, accuracy >= 0.90, flip >= 0.70)"] == "not resolved in 10 steps"
    assert row["resolve agreement: accuracy, flip"] == "best 0.60, 0.30 at step 10"
    assert row["resolve role: accuracy, flip"] == "no choice twins"

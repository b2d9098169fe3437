"""train.py end to end on a tiny corpus: schedule, accumulation, checkpoints, resume, faults,
DDP."""

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from lab.run import train
from model import gpt
from model.checkpoint import CKPT_NAME, atomic_save, load_checkpoint
from model.device import cpu_bf16_native
from model.gpt import ARCHITECTURE_KEYS, GPT, GPTConfig, lm_loss
from tests.helpers import (
    ROOT,
    run_script,
    start_training,
    tiny_config,
    torchrun_two,
    wait_for_metrics,
    write_yaml,
)
from training import loop
from training.resume import CannotResume
from training.stopping import TrainingStopped


def test_two_micro_batches_of_half_the_windows_step_like_one_batch_of_all(
    corpus, tmp_path, monkeypatch
):
    # Each micro-batch draws its own windows (micro_batch_generator), so the two runs would see
    # different data: the loop is given the same 8 windows, whole or as two halves in turn.
    real_get_batch, served = loop.get_mixed_batch, []

    def the_same_windows(files, dtype, batch_size, block_size, device, generator):
        x, y = real_get_batch(files, dtype, 8, block_size, device, torch.Generator().manual_seed(0))
        start = sum(served) % 8
        served.append(batch_size)
        return x[start : start + batch_size], y[start : start + batch_size]

    monkeypatch.setattr(loop, "get_mixed_batch", the_same_windows)

    def one_step(name, batch_size, accum):
        served.clear()
        out = tmp_path / name
        train(
            tiny_config(
                corpus,
                out,
                f"train.batch_size={batch_size}",
                f"train.grad_accum_steps={accum}",
                "train.max_iters=1",
                "train.log_interval=1",
            )
        )
        loss = next(
            r["loss"]
            for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if "loss" in r
        )
        return served.copy(), loss, load_checkpoint(out)["model"]

    served_whole, loss_whole, whole = one_step("whole", 8, 1)
    served_halves, loss_halves, halves = one_step("halves", 4, 2)
    _, _, first_half_only = one_step("first-half", 4, 1)
    assert served_whole == [8] and served_halves == [4, 4]
    # The logged loss is the mean over all 8 windows: each micro-batch's loss is divided by 2.
    assert loss_halves == pytest.approx(loss_whole, rel=1e-6)
    for name, tensor in whole.items():
        torch.testing.assert_close(halves[name], tensor, atol=1e-6, rtol=1e-5, msg=name)
    # The second micro-batch counted: without it the step goes elsewhere.
    assert any(not torch.allclose(first_half_only[name], t, atol=1e-6) for name, t in whole.items())


def test_end_to_end_run_writes_a_complete_run_folder(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(tiny_config(corpus, out))
    assert result["step"] == 20
    assert {
        "ckpt.pt",
        "config.yaml",
        "meta.json",
        "tokenizer.json",
        "metrics.jsonl",
        "loss.png",
    } <= {p.name for p in out.iterdir()}
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logs, evals = [r for r in records if "loss" in r], [r for r in records if "val_loss" in r]
    assert [r["step"] for r in logs] == [5, 10, 15, 20] and [r["step"] for r in evals] == [10, 20]
    assert all({"lr", "tokens_per_sec", "mfu"} <= r.keys() for r in logs)
    assert all({"train_loss", "val_loss", "val_bpb", "val_ppl"} <= r.keys() for r in evals)
    # ASCII text with the char tokenizer: one token per byte, so bits/byte = nats/token / ln 2.
    assert evals[-1]["val_bpb"] == pytest.approx(evals[-1]["val_loss"] / math.log(2))
    vocab = json.loads((out / "meta.json").read_text())["vocab_size"]
    assert evals[-1]["val_loss"] < math.log(vocab) - 0.5  # learned something beyond uniform
    ckpt = load_checkpoint(out)
    assert ckpt["step"] == 20 and ckpt["best_val_loss"] == pytest.approx(
        min(r["val_loss"] for r in evals)
    )
    assert not any(k.startswith("_orig_mod.") for k in ckpt["model"])


@pytest.mark.parametrize("onednn_isa", ["AVX2", ""])
def test_the_start_line_says_how_muon_and_bf16_run_on_this_cpu(
    corpus, tmp_path, monkeypatch, capsys, onednn_isa
):
    # ONEDNN_MAX_CPU_ISA=AVX2 takes the bf16 instructions away from any CPU: emulated bf16.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn_isa)
    native = onednn_isa == "" and cpu_bf16_native(torch.cpu.get_capabilities())
    train(
        tiny_config(
            corpus,
            tmp_path / "run",
            "train.optimizer=muon",
            "train.dtype=bfloat16",
            "train.max_iters=2",
        )
    )
    out = capsys.readouterr().out
    assert f"Muon's Newton–Schulz in {'bfloat16' if native else 'float32'}" in out
    # The first lines' words are said where a reader first meets them, before any MFU or bpb.
    [terms] = [line for line in out.splitlines() if line.startswith("terms: ")]
    assert all(
        word in terms for word in ("MFU, model FLOPs utilization", "val bpb", "Newton–Schulz,")
    )
    assert out.index("terms: ") < out.index("MFU ") and out.index("terms: ") < out.index("bpb ")
    assert ("train.dtype=bfloat16 is emulated" in out) is not native


def test_resume_continues_exactly_like_an_uninterrupted_run(corpus, tmp_path):
    train(tiny_config(corpus, tmp_path / "whole"))
    assert train(tiny_config(corpus, tmp_path / "split", "train.run_steps=10"))["stopped"]
    assert load_checkpoint(tmp_path / "split")["step"] == 10
    train(tiny_config(corpus, tmp_path / "split"))

    def losses(name):
        return [
            (r["step"], r.get("loss"), r.get("val_loss"))
            for r in map(json.loads, (tmp_path / name / "metrics.jsonl").read_text().splitlines())
        ]

    whole, split = losses("whole"), losses("split")
    assert [s for s, *_ in whole] == [s for s, *_ in split]
    for (step, a, va), (_, b, vb) in zip(whole, split):
        assert (
            a == pytest.approx(b, abs=1e-6) if a is not None else va == pytest.approx(vb, abs=1e-6)
        ), step


def test_resume_never_refuses_and_changed_shape_is_clear(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    with pytest.raises(CannotResume, match="train.resume=never") as e:
        train(tiny_config(corpus, out, "train.resume=never"))
    assert "force=True" in str(e.value) and "--force" not in str(e.value)
    with pytest.raises(CannotResume, match=r"shape.*n_layer 2 -> 3"):
        train(tiny_config(corpus, out, "model.n_layer=3"))
    with pytest.raises(
        ValueError, match=r"shape.*rotary False -> True.*tie_embeddings True -> False"
    ):
        train(tiny_config(corpus, out, "model.rotary=true", "model.tie_embeddings=false"))
    with pytest.raises(ValueError, match=r"optimizer.*train\.optimizer=adamw"):
        train(tiny_config(corpus, out, "train.optimizer=muon", "train.max_iters=6"))
    result = train(
        tiny_config(
            corpus, out, "train.resume=never", "train.max_iters=5", "train.eval_interval=5"
        ),
        force=True,
    )
    assert result["step"] == 5


def test_a_checkpoint_older_than_vocab_multiple_loads_unpadded(tmp_path):
    from model.checkpoint import model_parts

    config = GPTConfig(
        vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=16, vocab_multiple=1
    )
    saved = asdict(config)
    del saved["vocab_multiple"]  # written before the key existed, when the table was never padded
    atomic_save({"model": GPT(config).state_dict(), "model_config": saved}, tmp_path / "ckpt.pt")
    loaded, state = model_parts(load_checkpoint(tmp_path))
    assert loaded == config and state["tok_emb.weight"].shape[0] == 50


def test_a_checkpoint_older_than_the_architecture_options_resumes_as_gpt2(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    ckpt = load_checkpoint(out)
    for key in ARCHITECTURE_KEYS:  # written before the options existed
        del ckpt["model_config"][key]
    torch.save(ckpt, out / CKPT_NAME)
    assert (
        train(tiny_config(corpus, out, "train.max_iters=7", "train.eval_interval=5"))["step"] == 7
    )
    torch.save({**ckpt, "model_config": {**ckpt["model_config"], "qk_norm": True}}, out / CKPT_NAME)
    with pytest.raises(ValueError, match=r"shape.*qk_norm True -> False"):
        train(tiny_config(corpus, out, "train.max_iters=9"))


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(corpus, tmp_path, monkeypatch):
    out = tmp_path / "run"
    calls = {"n": 0}
    real = gpt.lm_loss

    def failing_after_12_steps(logits, targets):
        calls["n"] += 1
        loss = real(logits, targets)
        # Training calls come one per step; evaluation's (eval_iters x 2) come at step 10.
        return loss * float("nan") if calls["n"] > 12 + 4 else loss

    monkeypatch.setattr(gpt, "lm_loss", failing_after_12_steps)  # GPT.forward calls it
    with pytest.raises(TrainingStopped, match=rf"step 10.*{re.escape(str(out))}.*intact"):
        train(tiny_config(corpus, out))
    ckpt = load_checkpoint(out)
    assert ckpt["step"] == 10 and all(torch.isfinite(v).all() for v in ckpt["model"].values())


def test_a_diverged_run_stops_before_it_writes_over_the_good_checkpoint(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(corpus, out))
    good = load_checkpoint(out)
    with pytest.raises(
        TrainingStopped,
        match=rf"diverged; stopped without saving.*step 20 in {re.escape(str(out))}",
    ):  # resumed with a learning rate far too high: val 2.x -> hundreds of nats
        train(tiny_config(corpus, out, "train.max_iters=40", "train.lr=30", "train.muon_lr=30"))
    kept = load_checkpoint(out)
    assert kept["step"] == 20 and kept["best_val_loss"] == good["best_val_loss"]
    assert all(torch.equal(kept["model"][k], v) for k, v in good["model"].items())


def test_a_stop_between_evaluations_evaluates_first_and_keeps_the_good_checkpoint(corpus, tmp_path):
    # train.run_steps stops at step 25, between the evaluations at 20 and 30: the weights there
    # are diverged, and a save without an evaluation would write them over the good checkpoint.
    out = tmp_path / "run"
    train(tiny_config(corpus, out))
    good = load_checkpoint(out)
    overrides = ("train.max_iters=40", "train.run_steps=5", "train.lr=30", "train.muon_lr=30")
    with pytest.raises(TrainingStopped, match=r"step 25.*diverged; stopped without saving"):
        train(tiny_config(corpus, out, *overrides))
    kept = load_checkpoint(out)
    assert kept["step"] == 20
    assert all(torch.equal(kept["model"][k], v) for k, v in good["model"].items())


def test_a_healthy_stop_between_evaluations_is_evaluated_and_saved(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(tiny_config(corpus, out, "train.run_steps=7"))
    assert result == {"step": 7, "stopped": True}
    assert load_checkpoint(out)["step"] == 7
    evals = [
        r["step"]
        for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
        if "val_loss" in r
    ]
    assert evals == [7]  # the stop's evaluation, before its save


def test_divergence_is_a_val_loss_far_above_the_best_in_ratio_and_in_nats():
    from training.divergence import diverged

    assert diverged(4.2, 2.786) and diverged(840.0, 2.786) and diverged(float("inf"), 2.0)
    assert not diverged(4.1, 2.786)  # under 1.5x the best
    assert not diverged(0.04, 0.02)  # twice the best, but a near-zero loss: 0.02 nats is noise
    assert not diverged(9.0, math.inf)  # before the first evaluation every loss is the best


@pytest.mark.slow
def test_atomic_save_survives_kill_9(tmp_path):
    path = tmp_path / "ckpt.pt"
    writer = (
        "import sys, torch; sys.path.insert(0, %r)\n"
        "from model.checkpoint import atomic_save\n"
        "i = 0\n"
        "while True:\n"
        "    atomic_save({'i': i, 'w': torch.full((2_000_000,), float(i))}, %r); i += 1\n"
        "    print(i, flush=True)\n"
    ) % (str(ROOT), str(path))
    for delay in (0.05, 0.13, 0.21, 0.34):
        proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # one save is complete; kill somewhere in the following ones
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        ckpt = load_checkpoint(path)  # never torn: always one whole save
        assert torch.all(ckpt["w"] == float(ckpt["i"]))


def test_failed_save_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    atomic_save({"i": 1}, path)

    def broken_save(obj, f):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}.*disk full.*untouched"):
        atomic_save({"i": 2}, path)
    monkeypatch.undo()
    assert load_checkpoint(path) == {"i": 1} and [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_saves_and_the_same_command_resumes(corpus, tmp_path, sig):
    out = tmp_path / "run"
    cfg = write_yaml(
        tiny_config(corpus, out, "train.max_iters=100000", "train.log_interval=1"),
        tmp_path / "c.yaml",
    )
    proc = start_training(cfg)
    wait_for_metrics(out, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    step = load_checkpoint(out)["step"]
    assert step >= 1
    [said] = [line for line in stdout.splitlines() if sig.name in line]
    assert f"step {step}" in said and str(out) in said  # the signal, the step saved and where
    r = run_script("train.py", cfg, f"train.max_iters={step + 2}")
    assert r.returncode == 0 and f"resuming from step {step}" in r.stdout
    assert load_checkpoint(out)["step"] == step + 2


@pytest.mark.slow
def test_two_quick_ctrl_c_quit_without_saving_and_say_so(corpus, tmp_path):
    out = tmp_path / "run"
    # Evaluating every step keeps checkpoints coming; the second Ctrl-C must not tear one.
    cfg = write_yaml(
        tiny_config(
            corpus, out, "train.max_iters=100000", "train.log_interval=1", "train.eval_interval=1"
        ),
        tmp_path / "c.yaml",
    )
    proc = start_training(cfg)
    wait_for_metrics(out, proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    # stopped without saving or, should the save win the race, saved: either way the step kept
    assert re.search(r"(without saving|\(SIGINT\)).*step \d+", stdout), stdout
    load_checkpoint(out)  # whole either way
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_ctrl_c_during_start_up_is_one_line(corpus, tmp_path):
    cfg = write_yaml(tiny_config(corpus, tmp_path / "run"), tmp_path / "c.yaml")
    proc = start_training(cfg)
    time.sleep(1.0)  # inside main(), still importing torch
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr


def test_ctrl_c_held_back_while_torch_starts_is_raised_when_it_has():
    from cli import interrupt_after

    # Python's own handler, as a script starts with (this worker's may be another: put back after)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    ran = []
    try:
        with pytest.raises(KeyboardInterrupt), interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C in the middle of the block
            time.sleep(0.01)  # where the handler runs, between two bytecodes
            ran.append("the rest of the block")
        assert ran == ["the rest of the block"]  # nothing was raised inside it
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with interrupt_after():
            ran.append("no Ctrl-C")  # and without one, nothing is raised
        assert len(ran) == 2
    finally:
        signal.signal(signal.SIGINT, previous)


def worker_pid(parent, rank):
    """The PID of the torchrun worker of `rank` under the process `parent` (from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(
                stat.read_text().rsplit(")", 1)[1].split()[1]
            ) == parent and f"RANK={rank}".encode() in (stat.parent / "environ").read_bytes().split(
                b"\0"
            ):
                return int(stat.parent.name)
    return None


@pytest.mark.slow
@pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="finds torchrun's workers through /proc"
)
def test_sigterm_to_one_torchrun_process_stops_both_at_the_same_step_with_a_checkpoint(
    corpus, tmp_path
):
    # Only rank 1 is told to stop: without agreeing, it would leave while rank 0 waits in the next
    # gradient all-reduce, and the interruption's checkpoint would never be written.
    out = tmp_path / "ddp"
    cfg = write_yaml(
        tiny_config(
            corpus,
            out,
            "train.max_iters=100000",
            "train.log_interval=1",
            "train.grad_accum_steps=2",
        ),
        tmp_path / "ddp.yaml",
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "train.py",
            str(cfg),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    wait_for_metrics(out, proc)
    rank1 = worker_pid(proc.pid, 1)
    assert rank1 is not None
    os.kill(rank1, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    match = re.search(r"interrupted \(on another process\): checkpoint of step (\d+) saved", stdout)
    assert match, stdout[-2000:] + stderr[-2000:]
    assert load_checkpoint(out)["step"] == int(match.group(1)) >= 1
    assert "Connection closed by peer" not in stderr and "timed out" not in stderr


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process(corpus, tmp_path):
    # Same global batch: 2 processes x 1 micro-batch vs 1 process x 2 micro-batches.
    single = tiny_config(
        corpus, tmp_path / "single", "train.grad_accum_steps=2", "train.max_iters=10"
    )
    train(single)
    cfg = write_yaml(
        tiny_config(corpus, tmp_path / "ddp", "train.grad_accum_steps=2", "train.max_iters=10"),
        tmp_path / "ddp.yaml",
    )
    torchrun_two(cfg)
    a = [
        json.loads(line)
        for line in (tmp_path / "single" / "metrics.jsonl").read_text().splitlines()
    ]
    b = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        for key in ("loss", "train_loss", "val_loss"):
            if key in ra:
                assert rb[key] == pytest.approx(ra[key], abs=1e-4), (ra["step"], key)


@pytest.mark.slow
def test_prepare_only_then_torchrun_with_fewer_eval_batches_than_processes(corpus, tmp_path):
    # A fresh cache: local rank 0 prepares while rank 1 waits; then eval_iters=1 leaves rank 1
    # without an eval batch, which must not hang a collective.
    cache = tmp_path / "cache"
    cfg = write_yaml(
        tiny_config(
            corpus,
            tmp_path / "ddp",
            f"data.cache_dir={cache}",
            "train.grad_accum_steps=2",
            "train.max_iters=6",
            "train.eval_interval=3",
            "train.eval_iters=1",
        ),
        tmp_path / "ddp.yaml",
    )
    torchrun_two(cfg)
    evals = [
        json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [e["step"] for e in evals if "val_loss" in e] == [3, 6]
    assert len(list((cache / "prepared").iterdir())) == 1

    fresh = tmp_path / "fresh-cache"
    r = run_script(
        "train.py",
        cfg,
        f"data.cache_dir={fresh}",
        "--prepare-only",
        f"out_dir={tmp_path / 'unused'}",
    )
    assert r.returncode == 0, r.stderr
    prepared = next((fresh / "prepared").iterdir())
    assert f"in {prepared}" in r.stdout and (prepared / "meta.json").exists()
    assert not (tmp_path / "unused").exists()  # preparing writes no run folder


def test_full_val_loss_averages_every_window_of_the_val_split(corpus, tmp_path, monkeypatch):
    import numpy as np

    import training.eval_text
    import training.evaluate
    from data.prepare import prepare
    from runs.loading import load_run
    from training.eval_text import full_val_loss
    from training.runtime import Runtime

    out = tmp_path / "run"
    result = train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    model = load_run(out).model
    prepared = prepare(str(corpus / "text.txt"), "char", None, 0.1, corpus / "cache")
    data = torch.from_numpy(
        np.fromfile(prepared.val_path, dtype=prepared.meta["dtype"]).astype(np.int64)
    )
    n = (len(data) - 1) // 16
    windows = torch.stack([data[i * 16 : i * 16 + 17] for i in range(n)])
    expected = lm_loss(model(windows[:, :-1]), windows[:, 1:]).item()
    runtime = Runtime(torch.device("cpu"), torch.float32)
    monkeypatch.setitem(training.evaluate.EVAL_TOKENS, "cpu", 8 * 16)  # batches of 8 windows
    monkeypatch.setattr(training.eval_text, "GROUP_BATCHES", 2)  # read 16 windows at a time
    group = 16
    assert n > 2 * group and n % group % 8  # several groups, the last one ragged
    assert full_val_loss(model, prepared, 16, 3, runtime) == pytest.approx(expected, rel=1e-5)
    assert result["final"]["val_loss_full"] == pytest.approx(expected, rel=1e-5)


def test_evaluation_batches_are_cache_sized_on_a_cpu_and_never_below_the_training_batch():
    from training.evaluate import eval_batch_size

    assert eval_batch_size(64, 12, "cpu") == 32  # 2,048 tokens
    assert eval_batch_size(64, 12, "cuda") == 256  # 16,384 tokens
    assert eval_batch_size(1024, 12, "cpu") == 12 and eval_batch_size(4096, 1, "cpu") == 1


@pytest.mark.slow
def test_piped_output_is_one_plain_line_per_log_and_eval(corpus, tmp_path):
    cfg = write_yaml(tiny_config(corpus, tmp_path / "run"), tmp_path / "c.yaml")
    proc = subprocess.Popen(
        [sys.executable, "train.py", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = [line.rstrip("\n") for line in proc.stdout]  # read as they come, line by line
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, stderr
    assert "\r" not in stderr and not any("\r" in line for line in lines)
    logs = [line for line in lines if line.startswith("step ") and ": batch loss " in line]
    evals = [line for line in lines if line.startswith("step ") and ": train loss " in line]
    assert [line.split(":")[0] for line in logs] == ["step 5", "step 10", "step 15", "step 20"]
    assert [line.split(":")[0] for line in evals] == ["step 10", "step 20"]
    assert "val loss" in evals[0] and "tok/s" in evals[0] and lines[-1].startswith("done:")


def test_the_training_module_is_the_model_then_ddp_then_compile(tmp_path, tiny_gpt):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from training.runtime import Runtime, training_module

    model = tiny_gpt()
    x, y = torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))
    plain = training_module(model, Runtime(torch.device("cpu"), torch.float32), compile=False)
    assert plain is model
    assert plain(x, y)[1].item() == pytest.approx(lm_loss(model(x), y).item())
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        ddp_runtime = Runtime(torch.device("cpu"), torch.float32, world_size=2)  # as under torchrun
        wrapped = training_module(
            model, ddp_runtime, compile=True
        )  # compiles lazily: no compiler run
        assert isinstance(wrapped, torch._dynamo.eval_frame.OptimizedModule)
        assert isinstance(wrapped._orig_mod, DDP) and wrapped._orig_mod.module is model
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_reader_that_leaves_the_pipe_neither_stops_nor_loses_the_run(corpus, tmp_path):
    # `train.py | head -3`: a real pipe whose reader closes it after three lines.
    out = tmp_path / "run"
    cfg = write_yaml(
        tiny_config(
            corpus, out, "train.max_iters=150", "train.log_interval=1", "train.eval_interval=50"
        ),
        tmp_path / "c.yaml",
    )
    proc = subprocess.Popen(
        [sys.executable, "train.py", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(3):
        proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0 and "Broken pipe" not in stderr and "Traceback" not in stderr, (
        stderr
    )
    assert load_checkpoint(out)["step"] == 150

"""The run-folder contract: resume never mixes runs, one run per folder, faults are one line and
lose nothing."""

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from configs.schema import TrainConfig
from lab.run import train
from model import gpt
from model.checkpoint import atomic_save, load_checkpoint
from tests.helpers import run_script, start_training, tiny_config, wait_for_metrics, write_yaml
from training import loop
from training.optim import lr_at
from training.resume import CannotResume
from training.stopping import TrainingStopped


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}


def assert_one_line_error(r, code=2):
    assert r.returncode == code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_resume_takes_the_new_learning_rate_and_says_so(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.lr=1e-2", "train.min_lr=1e-3", "train.run_steps=5"))
    result = train(tiny_config(corpus, out, "train.lr=1e-3", "train.min_lr=1e-4"))
    assert result["step"] == 20
    assert (
        "from the new config: train.lr 0.01 -> 0.001, train.min_lr 0.001 -> 0.0001"
        in capsys.readouterr().out
    )
    groups = load_checkpoint(out)["optimizer"]["param_groups"]
    schedule = TrainConfig(lr=1e-3, min_lr=1e-4, warmup_iters=2, max_iters=20)  # the resumed run's
    last = lr_at(19, schedule)  # what the last step ran with
    assert all(g["peak_lr"] == 1e-3 and g["lr"] == pytest.approx(last) for g in groups)
    logged = {
        r["step"]: r["lr"]
        for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
        if "lr" in r
    }
    assert logged[10] == pytest.approx(lr_at(9, schedule))


def test_other_data_is_refused_before_anything_is_written(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    before = snapshot(out)
    # The same characters in another order: same vocabulary, same model shape, other data.
    lines = (corpus / "text.txt").read_text().splitlines()
    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed(lines)) + "\n")
    with pytest.raises(CannotResume, match=rf"other data.*{re.escape(str(other))}") as e:
        train(tiny_config(corpus, out, f"data.source={other}", "train.max_iters=5"))
    assert "--" not in str(e.value)  # a Python caller is told force=True, not a flag
    with pytest.raises(ValueError, match="other data"):  # even with nothing to train
        train(tiny_config(corpus, out, f"data.source={other}", "train.max_iters=1"))
    assert snapshot(out) == before


def test_another_tokenizer_is_refused_for_a_checkpoint_without_a_data_record(corpus, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    ckpt = load_checkpoint(out)
    del ckpt["data"]  # as checkpoints written before the record existed
    atomic_save(ckpt, out / "ckpt.pt")
    train(
        tiny_config(corpus, out, "train.max_iters=6", "train.eval_interval=6")
    )  # meta.json and tokenizer agree
    tokenizer = out / json.loads((out / "meta.json").read_text())["tokenizer_file"]
    vocab = json.loads(tokenizer.read_text())
    tokenizer.write_text(json.dumps(vocab, indent=1))  # another file: as another tokenizer would be
    ckpt = load_checkpoint(out)
    del ckpt["data"]
    atomic_save(ckpt, out / "ckpt.pt")
    with pytest.raises(ValueError, match="another tokenizer"):
        train(tiny_config(corpus, out, "train.max_iters=7"))


def test_dropout_may_change_on_resume_and_force_starts_over(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    assert train(tiny_config(corpus, out, "model.dropout=0.1", "train.max_iters=8"))["step"] == 8
    assert "model.dropout 0.0 -> 0.1" in capsys.readouterr().out
    assert (
        train(tiny_config(corpus, out, "model.n_layer=1", "train.max_iters=3"), force=True)["step"]
        == 3
    )
    assert load_checkpoint(out)["model_config"]["n_layer"] == 1


def test_force_over_a_mount_point_is_refused_before_it_trains(corpus, tmp_path, monkeypatch):
    from runs.restart import check_swappable

    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=5", "train.eval_interval=5"))
    before = snapshot(out)
    real_ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == out or real_ismount(p))

    def no_step(*args):
        raise AssertionError("trained before the refusal")

    monkeypatch.setattr(loop, "get_mixed_batch", no_step)  # a step's first act is its batch
    with pytest.raises(ValueError, match=rf"out_dir={re.escape(str(out))} is a mount point.*/run"):
        train(tiny_config(corpus, out, "train.max_iters=8"), force=True)
    assert snapshot(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.")]  # nothing aside
    monkeypatch.undo()
    with pytest.raises(ValueError, match="mount point"):  # a real one
        check_swappable("/proc")
    check_swappable(out)  # a plain folder can be swapped


def test_an_out_dir_that_is_a_symlink_to_a_file_or_to_nothing_is_named_so(corpus, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "to_file").symlink_to(tmp_path / "notes.txt")
    (tmp_path / "to_nothing").symlink_to(tmp_path / "gone")
    cases = {
        "to_file": f"{tmp_path / 'to_file'} is a symlink to {tmp_path / 'notes.txt'}, a file",
        "to_nothing": f"{tmp_path / 'to_nothing'} is a symlink to {tmp_path / 'gone'}, which "
        "does not exist",
        "notes.txt/run": f"{tmp_path / 'notes.txt'} is a file",
    }
    for out, says in cases.items():
        with pytest.raises(ValueError) as e:
            train(tiny_config(corpus, tmp_path / out))
        assert says in str(e.value) and "File exists" not in str(e.value), e.value
    assert (tmp_path / "notes.txt").read_text() == "mine" and not (tmp_path / "gone").exists()


def test_a_checkpoint_that_is_a_folder_is_named_once_by_train_and_generate(corpus, tmp_path):
    from tests.helpers import run_generate

    out = tmp_path / "run"
    (out / "ckpt.pt").mkdir(parents=True)
    says = f"{out / 'ckpt.pt'} is a folder, not a checkpoint file"
    with pytest.raises(ValueError, match=re.escape(says)):
        train(tiny_config(corpus, out))
    for ckpt in (out, out / "ckpt.pt"):
        code, _, err = run_generate("--ckpt", ckpt, "--prompt", "a")
        assert code == 2 and says in err and "ckpt.pt/ckpt.pt" not in err, err


def test_resume_with_dropout_is_exact(corpus, tmp_path):
    overrides = ("model.dropout=0.2", "train.final_full_eval=false")
    train(tiny_config(corpus, tmp_path / "whole", *overrides))
    train(tiny_config(corpus, tmp_path / "split", *overrides, "train.run_steps=7"))
    train(tiny_config(corpus, tmp_path / "split", *overrides))
    whole, split = (load_checkpoint(tmp_path / name)["model"] for name in ("whole", "split"))
    assert all(torch.equal(whole[k], split[k]) for k in whole)


@pytest.mark.slow
def test_a_second_run_on_the_same_folder_is_refused_and_kill_9_frees_it(corpus, tmp_path):
    out = tmp_path / "run"
    cfg = write_yaml(
        tiny_config(corpus, out, "train.max_iters=100000", "train.log_interval=1"),
        tmp_path / "c.yaml",
    )
    proc = start_training(cfg)
    try:
        wait_for_metrics(out, proc)
        with pytest.raises(ValueError, match=rf"{re.escape(str(out))}.*in use.*\b{proc.pid}\b"):
            train(tiny_config(corpus, out, "train.max_iters=3"))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert train(tiny_config(corpus, out), force=True)["step"] == 20  # the kernel released the lock


def test_stale_temp_files_of_dead_writers_are_removed(corpus, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = out / f".ckpt.pt.{dead.pid}.0123abcd.tmp"
    stale.write_bytes(b"half a checkpoint")
    live = out / f".ckpt.pt.{os.getpid()}.4567cdef.tmp"
    live.write_bytes(b"someone is writing this")
    train(tiny_config(corpus, out, "train.max_iters=2"))
    assert not stale.exists() and live.exists()


class FakeClock:
    """perf_counter that moves only when the test says: 1 s per training step, 100 s per
    evaluation."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self):
        return self.now


def test_tokens_per_second_leave_out_evaluation_that_falls_between_log_lines(
    corpus, tmp_path, monkeypatch
):
    clock = FakeClock()
    real_batch, real_eval = loop.get_mixed_batch, loop.evaluate

    def batch(*args):  # one micro-batch a step: each step takes 1 s
        clock.now += 1.0
        return real_batch(*args)

    def evaluate(*args):
        clock.now += 100.0
        return real_eval(*args)

    monkeypatch.setattr(loop, "time", clock)
    monkeypatch.setattr(loop, "get_mixed_batch", batch)
    monkeypatch.setattr(loop, "evaluate", evaluate)
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.log_interval=10", "train.eval_interval=5"))
    logs = {
        r["step"]: r
        for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
        if "tokens_per_sec" in r
    }
    tokens_per_step = 4 * 16  # batch_size x block_size
    assert logs[10]["tokens_per_sec"] == pytest.approx(tokens_per_step)  # 10 steps in 10 s
    assert logs[20]["tokens_per_sec"] == pytest.approx(tokens_per_step)
    assert logs[10]["mfu"] <= 1.0


def test_nan_before_any_checkpoint_does_not_claim_one(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(gpt, "lm_loss", lambda logits, targets: logits.sum() * float("nan"))
    with pytest.raises(
        TrainingStopped, match=rf"no checkpoint.*{re.escape(str(tmp_path / 'run'))}"
    ):
        train(tiny_config(corpus, tmp_path / "run"))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real small filesystem (tmpfs), for a full disk and a read-only folder; root only."""
    mount = tmp_path / "fs"
    mount.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_disk_full_during_a_checkpoint_is_one_line_and_keeps_the_previous_one(
    corpus, tmp_path, small_tmpfs
):
    out = small_tmpfs / "run"
    cfg = write_yaml(
        tiny_config(corpus, out, "train.max_iters=10", "train.eval_interval=5"), tmp_path / "c.yaml"
    )
    assert run_script("train.py", cfg).returncode == 0
    before = (out / "ckpt.pt").read_bytes()
    free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
    (small_tmpfs / "filler").write_bytes(
        b"\0" * (free - len(before) // 2)
    )  # room for half a checkpoint
    line = assert_one_line_error(run_script("train.py", cfg, "train.max_iters=20"), code=1)
    assert (
        "No space left on device" in line and "ckpt.pt" in line and "untouched" in line
    )  # the OS's reason
    assert "steps 11-15 are lost" in line and "from the checkpoint of step 10" in line
    assert (out / "ckpt.pt").read_bytes() == before and load_checkpoint(out)["step"] == 10
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    (small_tmpfs / "filler").unlink()  # space again: the resume redoes steps 11-20
    assert run_script("train.py", cfg, "train.max_iters=20").returncode == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    kinds = [(r["step"], "val_loss" in r, "loss" in r) for r in records]
    assert len(kinds) == len(set(kinds))  # each step's log and evaluation once


@pytest.mark.slow
def test_read_only_out_dir_and_cache_dir_are_one_line(corpus, tmp_path, small_tmpfs):
    (small_tmpfs / "run").mkdir()
    (small_tmpfs / "cache").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    cfg = write_yaml(tiny_config(corpus, small_tmpfs / "run"), tmp_path / "c.yaml")
    assert "Read-only file system" in assert_one_line_error(run_script("train.py", cfg))
    fresh_cache = f"data.cache_dir={small_tmpfs / 'cache'}"
    line = assert_one_line_error(
        run_script("train.py", cfg, f"out_dir={tmp_path / 'run'}", fresh_cache)
    )
    assert "Read-only file system" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, names",
    [
        ("out_dir=", ("out_dir", "empty")),
        ("train.peak_flops=0", ("train.peak_flops", "positive")),
        ("train.lr=nan", ("train.lr", "finite")),
        ("train.device=tpu", ("unknown device", "'tpu'")),
    ],
)
def test_bad_settings_are_one_line(corpus, tmp_path, override, names):
    cfg = write_yaml(tiny_config(corpus, tmp_path / "run"), tmp_path / "c.yaml")
    line = assert_one_line_error(run_script("train.py", cfg, override))
    assert all(name in line for name in names), line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_out_dir_or_cache_dir_that_is_a_file_is_one_line(corpus, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("not a folder")
    cfg = write_yaml(tiny_config(corpus, tmp_path / "run"), tmp_path / "c.yaml")
    assert str(a_file) in assert_one_line_error(run_script("train.py", cfg, f"out_dir={a_file}"))
    assert str(a_file) in assert_one_line_error(
        run_script("train.py", cfg, f"data.cache_dir={a_file}")
    )
    assert a_file.read_text() == "not a folder"


def test_load_run_refuses_a_tokenizer_that_does_not_fit_the_model(corpus, tmp_path):
    from runs.loading import load_run

    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.max_iters=2"))
    load_run(out)
    tokenizer = out / json.loads((out / "meta.json").read_text())["tokenizer_file"]
    saved = json.loads(tokenizer.read_text())
    saved["chars"] = saved["chars"][
        :-1
    ]  # one token fewer, as another corpus's tokenizer would have
    tokenizer.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="another tokenizer"):  # the recorded SHA-256
        load_run(out)
    import torch

    from model.checkpoint import atomic_save

    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    del ckpt["data"]  # as a checkpoint older than that record: the sizes still tell
    atomic_save(ckpt, out / "ckpt.pt")
    with pytest.raises(ValueError, match="mixes two runs"):
        load_run(out)

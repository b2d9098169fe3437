"""A forced restart (--force) replaces a run folder whole at its first checkpoint and leaves the
old run whole until then; a refused run leaves the folder as it found it. Through train.py as a
user runs it."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (
    ROOT,
    TINY_MODEL,
    error_line,
    run_script,
    tiny_config,
    write_yaml,
)

pytestmark = pytest.mark.slow  # the scripts run as a user runs them


def snapshot(folder):
    """Every file in `folder` and its bytes (the lock file too)."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}


def tiny_args(corpus, out, *overrides, source=None):
    """train.py's arguments for tiny_config, as key=value words."""
    config = tiny_config(corpus, out)
    return [
        f"out_dir={out}",
        f"data.source={source or config.data.source}",
        f"data.cache_dir={corpus / 'cache'}",
        *TINY_MODEL,
        "train.max_iters=10",
        "train.warmup_iters=2",
        "train.eval_interval=5",
        "train.eval_iters=2",
        "train.log_interval=5",
        "train.final_full_eval=false",
        "train.probe_interval=0",
        *overrides,
    ]


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """A run folder train.py trained for tiny_args's 10 steps, made once for this file's tests."""
    out = tmp_path_factory.mktemp("restart") / "my"
    r = run_script("train.py", *tiny_args(corpus, out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def my_run(trained, tmp_path):
    """`tmp_path / "my"`: a copy of the `trained` run folder (its files, bytes and times), for a
    test to change."""
    return Path(shutil.copytree(trained, tmp_path / "my", symlinks=True))


def other_text(tmp_path):
    """Another corpus, with characters the fixture's has not: another tokenizer too."""
    path = tmp_path / "other.txt"
    path.write_text("Zebras QUIETLY jump over 7 foxes; why?\n" * 300)
    return path


def test_a_forced_restart_that_fails_before_its_first_checkpoint_leaves_the_old_run_whole(
    corpus, my_run, tmp_path
):
    out = my_run  # trained once for this file, copied
    before = snapshot(out)
    r = run_script(
        "train.py", *tiny_args(corpus, out, "train.lr=1e6", source=other_text(tmp_path)), "--force"
    )
    assert r.returncode == 1 and "loss is nan" in r.stderr, r.stderr
    assert "still holds the old run" in r.stderr, r.stderr
    assert snapshot(out) == before  # config.yaml, meta.json, the tokenizer and metrics.jsonl too
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".my.")]  # nothing left aside
    g = run_script("generate.py", "--ckpt", out, "--prompt", "the", "--max-new-tokens", "3")
    assert g.returncode == 0, g.stderr


def test_a_forced_restart_replaces_the_folder_whole_at_its_first_checkpoint(corpus, tmp_path):
    out = tmp_path / "my"
    assert run_script("train.py", *tiny_args(corpus, out, "train.max_iters=15")).returncode == 0
    (out / "notes.txt").write_text("mine")  # not the run's: kept
    r = run_script("train.py", *tiny_args(corpus, out, source=other_text(tmp_path)), "--force")
    assert r.returncode == 0, r.stderr
    assert "replaced" in r.stdout and "notes.txt" in r.stdout, r.stdout
    steps = [
        line.split('"step": ')[1].split(",")[0]
        for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps[-1] == "10" and "15" not in steps  # the new run's history alone
    assert (
        "other.txt" in (out / "config.yaml").read_text()
        and (out / "notes.txt").read_text() == "mine"
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".my.")]
    g = run_script("generate.py", "--ckpt", out, "--prompt", "Z", "--max-new-tokens", "3")
    assert g.returncode == 0, g.stderr


def aside_folders(out):
    return [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_kill_9_or_a_second_run_during_a_forced_restart_never_touch_the_old_run(
    corpus, my_run, tmp_path
):
    out = my_run  # trained once for this file, copied
    before = snapshot(out)
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)  # out_dir given through a symlink, with a slash
    cfg = write_yaml(
        tiny_config(
            corpus,
            f"{link}/",
            "train.max_iters=100000",
            "train.eval_interval=100000",
            "train.log_interval=1",
        ),
        tmp_path / "c.yaml",
    )
    proc = subprocess.Popen(
        [sys.executable, "train.py", str(cfg), "--force"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while not any(
            (p / "metrics.jsonl").is_file() and (p / "metrics.jsonl").read_text()
            for p in aside_folders(out)
        ):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.1)
        r = run_script("train.py", *tiny_args(corpus, out, "train.max_iters=20"))
        said = error_line(r)
        assert "in use" in said and str(proc.pid) in said, said
        second = run_script("train.py", *tiny_args(corpus, out), "--force")
        assert "in use" in error_line(second)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert {k: v for k, v in snapshot(out).items() if k != ".lock"} == {
        k: v for k, v in before.items() if k != ".lock"
    }
    assert (
        run_script(
            "generate.py", "--ckpt", out, "--prompt", "the", "--max-new-tokens", "2"
        ).returncode
        == 0
    )
    assert aside_folders(out)  # the killed run's aside folder, until the next run on out
    assert (
        run_script("train.py", *tiny_args(corpus, out, "train.max_iters=12")).returncode == 0
    )  # resumes
    assert not aside_folders(out)


def test_a_refused_run_leaves_the_folder_as_it_found_it(corpus, my_run, tmp_path):
    out = my_run  # trained once for this file, copied
    before = snapshot(out)
    stat = os.stat(out / ".lock")
    r = run_script(
        "train.py", *tiny_args(corpus, out, source=other_text(tmp_path))
    )  # other data: refused
    assert "other data" in error_line(r)
    assert snapshot(out) == before and os.stat(out / ".lock").st_mtime_ns == stat.st_mtime_ns
    fresh = tmp_path / "new" / "run"
    r = run_script("train.py", *tiny_args(corpus, fresh, source=tmp_path / "missing.txt"))
    assert "missing.txt" in error_line(r)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not text" * 10)
    r = run_script("train.py", *tiny_args(corpus, fresh, source=bad))
    assert r.returncode == 2, r.stderr
    assert not (tmp_path / "new").exists()


def test_a_refusal_names_the_path_this_run_was_given_when_another_had_the_same_text(
    corpus, tmp_path
):
    mine, copy = tmp_path / "my.txt", tmp_path / "e.txt"
    mine.write_text((corpus / "text.txt").read_text())
    assert run_script("train.py", *tiny_args(corpus, tmp_path / "a", source=mine)).returncode == 0
    copy.write_text(mine.read_text())  # the same text: its preparation is the cached one of my.txt
    out = tmp_path / "e"
    assert run_script("train.py", *tiny_args(corpus, out, source=copy)).returncode == 0
    assert (
        "e.txt" in (out / "meta.json").read_text()
        and "my.txt" not in (out / "meta.json").read_text()
    )
    copy.write_text(mine.read_text().replace("cat", "cot"))
    said = error_line(
        run_script("train.py", *tiny_args(corpus, out, "train.max_iters=20", source=copy))
    )
    assert str(copy) in said and "my.txt" not in said and "changed" in said, said


# train.py where the system has no renameat2 (the swap falls back to three renames), killed
# (SIGKILL) right after the swap's rename number argv[1]: the fallback's exact points.
KILLED_MID_SWAP = """
import os, runpy, signal, sys, types
import runs.restart, storage.atomic
storage.atomic.ctypes = types.SimpleNamespace(CDLL=lambda *a, **k: object())  # no renameat2
after, exchange, rename = int(sys.argv.pop(1)), runs.restart.exchange_folders, os.rename
def exchange_then_die(a, b):
    done = []
    def counted(src, dst):
        rename(src, dst)
        done.append(dst)
        if len(done) == after:
            os.kill(os.getpid(), signal.SIGKILL)
    os.rename = counted
    exchange(a, b)
runs.restart.exchange_folders = exchange_then_die
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


@pytest.mark.parametrize("renames_done", [1, 2])
def test_a_swap_killed_between_its_renames_loses_neither_run(
    corpus, my_run, tmp_path, renames_done
):
    out, other = my_run, other_text(tmp_path)
    (out / "notes.txt").write_text("mine")
    killed = run_script(
        "-c", KILLED_MID_SWAP, renames_done, *tiny_args(corpus, out, source=other), "--force"
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(aside_folders(out)) == 3 - renames_done  # 1: out_dir gone, both runs aside
    assert out.is_dir() == (renames_done == 2)
    r = run_script("train.py", *tiny_args(corpus, out, "train.max_iters=15", source=other))
    assert r.returncode == 0, r.stderr
    assert ("put in its place" in r.stderr) == (renames_done == 1), r.stderr
    assert "resuming from step 5 " in r.stdout, r.stdout  # the new run, from its checkpoint
    assert "other.txt" in (out / "config.yaml").read_text()
    assert (out / "notes.txt").read_text() == "mine" and not aside_folders(out)
    before = snapshot(out)
    again = run_script("train.py", *tiny_args(corpus, out, "train.max_iters=15", source=other))
    assert again.returncode == 0 and "already trained" in again.stdout, again.stderr
    assert snapshot(out).keys() == before.keys() and not aside_folders(out)

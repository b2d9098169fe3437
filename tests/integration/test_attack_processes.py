"""A process killed at the worst moment, as the next command a user runs meets what it left: a
forced restart (train.py --force) killed mid-swap leaves aside folders beside out_dir, and the
next generate.py or train.py says what each is and whether it can be removed, touching none of
them. The battery of issue 53 (case 13); docs/reference/promises.md says what it holds the
project to. tests/e2e/test_restart.py kills real runs at each point of the swap and checks that
these are the states they leave and that the next training run finishes or removes them."""

import hashlib
import shutil

import pytest

from tests.helpers import make_run, run_main

DEAD = 4194304  # above Linux's PID_MAX_LIMIT: the pid of no live process, as a killed run's is


@pytest.fixture(scope="module")
def a_run(tmp_path_factory):
    """An untrained char run folder, made once for this file; tests copy it into place."""
    folder = tmp_path_factory.mktemp("attack_processes") / "run"
    make_run(folder, "char", 32)
    return folder


def aside(out, tag, source, marked=False):
    """A copy of the run folder `source` as a killed forced restart on `out` leaves it beside
    out: named as storage.atomic names its temps, with the swap's mark when `marked`."""
    folder = out.parent / f".{out.name}.{DEAD}.{tag}.tmp"
    shutil.copytree(source, folder)
    if marked:
        (folder / ".replacing").touch()
    return folder


def snapshot(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_swap_killed_before_out_dir_is_back_says_where_each_run_is(a_run, tmp_path):
    # Killed between the fallback swap's first two renames: out_dir gone, both runs aside.
    out = tmp_path / "my"
    new = aside(out, "0000000a", a_run, marked=True)
    old = aside(out, "0000000b", a_run)
    before = snapshot(tmp_path)
    r = run_main("generate.py", "--ckpt", out, "--prompt", "a", "--max-new-tokens", "2")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    [note] = [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    said = (str(new), "new run", "puts in place", str(old), "old run", "can be removed")
    assert all(s in note for s in said), note
    at = [note.index(s) for s in said]
    assert at == sorted(at), note  # each folder, then what it is
    assert snapshot(tmp_path) == before  # a note only: nothing is moved or removed


def test_a_swap_killed_after_out_dir_is_back_says_the_aside_can_be_removed(a_run, tmp_path):
    # Killed after the swap (between the fallback's last renames, or just after renameat2's):
    # out_dir holds the new run, the old one is aside.
    out = shutil.copytree(a_run, tmp_path / "my")
    old = aside(out, "0000000c", a_run)
    before = snapshot(tmp_path)
    r = run_main("generate.py", "--ckpt", out, "--prompt", "a", "--max-new-tokens", "2")
    assert r.returncode == 0, r.stderr
    [note] = r.stderr.splitlines()
    assert str(old) in note and "killed" in note and "can be removed" in note, note
    # train.py, refused here (a char run has no Hugging Face form), says the same
    r = run_main("train.py", f"out_dir={out}", "--export-hf", tmp_path / "hf")
    assert r.returncode == 2 and r.stderr.count("\n") == 2, r.stderr
    assert str(old) in r.stderr and "can be removed" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before

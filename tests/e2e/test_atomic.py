"""storage/atomic.py and the writers built on it: modes, refused paths, full and read-only disks,
and the temps of killed writers, all on real files (and real tmpfs mounts where permitted)."""

import contextlib
import errno
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from data.prepare import prepare
from data.pronouns import write_jsonl
from data.rank_file import write_ranks
from data.sources import pronouns_path
from data.tokenizer import CharTokenizer
from lab.plots import plot_losses
from model.checkpoint import atomic_save, load_checkpoint
from reports.page_writer import write_html
from storage.atomic import clean_stale_temps, make_temp_folder, write_atomic
from tests.helpers import ROOT, mount_tmpfs, one_line, read_only_folder
from training.console import Metrics

SENTENCE = {"tokens": ["a", " b"], "attention": torch.full((1, 1, 2, 2), 0.5), "pronoun": None}
WRITERS = {
    "write_atomic": lambda path: write_atomic(path, b"new"),
    "checkpoint": lambda path: atomic_save({"w": torch.zeros(3)}, path),
    "html": lambda path: write_html(path, [SENTENCE]),
    "tokenizer": lambda path: CharTokenizer(["a", "b"]).save(path),
    "bpe ranks": lambda path: write_ranks({bytes([b]): b for b in range(256)}, path),
    "jsonl": lambda path: write_jsonl([], path),
    "metrics": lambda path: Metrics(path),
    "loss.png": lambda path: plot_losses([{"step": 1, "loss": 2.0}], path),
}


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(params=[0o022, 0o002], ids=lambda u: f"umask{u:03o}")
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


# --- modes ----------------------------------------------------------------------------------------


def test_files_and_folders_get_ordinary_modes_for_the_umask(tmp_path, umask):
    file_mode, folder_mode = 0o666 & ~umask, 0o777 & ~umask
    atomic_save({"w": torch.zeros(3)}, tmp_path / "run" / "ckpt.pt")
    write_html(tmp_path / "maps.html", [SENTENCE])
    cached = pronouns_path(tmp_path / "cache")
    (tmp_path / "text.txt").write_text("the owl hooted\nit was hungry\n" * 20)
    prepared = prepare(str(tmp_path / "text.txt"), "char", cache_dir=tmp_path / "cache")
    files = [tmp_path / "run" / "ckpt.pt", tmp_path / "maps.html", cached, *prepared.dir.iterdir()]
    assert {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {
        str(p): oct(file_mode) for p in files
    }
    assert stat.S_IMODE(prepared.dir.stat().st_mode) == folder_mode


# --- what may be replaced -------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["write_atomic", "checkpoint", "html"])
def test_a_fifo_is_refused_and_left_a_fifo(tmp_path, writer):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    with pytest.raises(ValueError) as excinfo:
        WRITERS[writer](path)
    assert "not a regular file" in one_line(excinfo) and str(path) in one_line(excinfo)
    assert stat.S_ISFIFO(os.lstat(path).st_mode) and names(tmp_path) == ["pipe"]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_folder_is_refused_and_left_as_it_was(tmp_path, writer):
    path = tmp_path / "out"
    path.mkdir()
    (path / "inside.txt").write_text("kept")
    with pytest.raises(ValueError) as excinfo:
        WRITERS[writer](path)
    assert "is a folder" in one_line(excinfo)
    assert path.is_dir() and names(path) == ["inside.txt"] and names(tmp_path) == ["out"]


def test_a_device_is_refused():
    with pytest.raises(ValueError) as excinfo:
        write_atomic("/dev/null", b"x")
    one_line(excinfo, "/dev/null", "not a regular file")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_is_written_through(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "ckpt.pt"
    atomic_save({"i": 1}, target)
    link = tmp_path / "ckpt.pt"
    link.symlink_to(target)
    atomic_save({"i": 2}, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert load_checkpoint(target) == {"i": 2}
    assert names(tmp_path) == ["ckpt.pt", "real"] and names(tmp_path / "real") == ["ckpt.pt"]


def test_missing_folders_are_created_but_a_file_in_the_way_is_an_error(tmp_path):
    assert write_atomic(tmp_path / "a" / "b" / "x.txt", "é") == tmp_path / "a" / "b" / "x.txt"
    assert (tmp_path / "a" / "b" / "x.txt").read_bytes() == "é".encode("utf-8")
    (tmp_path / "file").write_text("in the way")
    with pytest.raises(ValueError) as excinfo:
        write_atomic(tmp_path / "file" / "sub" / "x.txt", b"x")
    one_line(excinfo, f"{tmp_path / 'file'} is a file")
    assert (tmp_path / "file").read_text() == "in the way"


@pytest.mark.parametrize("error", [ValueError("the writer's own"), KeyboardInterrupt()])
def test_a_callables_own_error_propagates_unchanged_and_the_temp_goes(tmp_path, error):
    path = tmp_path / "x.bin"
    path.write_bytes(b"old")

    def write_then_fail(f):
        f.write(b"half")
        raise error

    with pytest.raises(type(error)) as excinfo:
        write_atomic(path, write_then_fail)
    assert excinfo.value is error
    assert path.read_bytes() == b"old" and names(tmp_path) == ["x.bin"]


# --- failed writes --------------------------------------------------------------------------------

FULL_DISK_WRITER = """
import resource, signal, sys, torch
sys.path.insert(0, sys.argv[1])
from model.checkpoint import atomic_save
from storage.atomic import write_atomic
path, what, limit = sys.argv[2], sys.argv[3], int(sys.argv[4])
if limit:  # no tmpfs: a file size limit makes writes past it fail (EFBIG), as a full disk would
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    if what == "bytes":
        write_atomic(path, bytes(1_000_000))
    else:
        atomic_save({"w": torch.zeros(250_000)}, path)
except ValueError as e:
    print(e)
"""


@pytest.mark.slow
@pytest.mark.parametrize("what", ["bytes", "checkpoint"])
def test_a_full_disk_is_one_line_and_keeps_the_previous_file(tmp_path, what):
    with contextlib.ExitStack() as stack:
        folder = tmp_path / "disk"
        limit = 0 if mount_tmpfs(stack, folder, "64k") else 64 * 1024
        path = folder / ("data.bin" if what == "bytes" else "ckpt.pt")
        if what == "bytes":
            path.write_bytes(b"previous")
        else:
            atomic_save({"w": torch.ones(4)}, path)
        before = path.read_bytes()
        result = subprocess.run(
            [sys.executable, "-c", FULL_DISK_WRITER, str(ROOT), str(path), what, str(limit)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        message = result.stdout.strip()
        assert result.returncode == 0 and "\n" not in message, result.stderr
        reason = "File too large" if limit else "No space left on device"
        assert str(path) in message and reason in message and "untouched" in message, message
        assert path.read_bytes() == before and names(folder) == [path.name]


def test_a_read_only_folder_is_one_line_and_keeps_the_previous_file(tmp_path):
    folder = tmp_path / "ro"
    with contextlib.ExitStack() as stack:
        if not read_only_folder(stack, folder, {"maps.html": "previous"}):
            pytest.skip("running as root without permission to mount a tmpfs to remount read-only")
        path = folder / "maps.html"
        with pytest.raises(ValueError) as excinfo:
            write_html(path, [SENTENCE])
        message = one_line(excinfo)
        assert "Read-only file system" in message or "Permission denied" in message
        assert "untouched" in message
        assert path.read_text() == "previous" and names(folder) == ["maps.html"]


# --- temps left by killed writers -----------------------------------------------------------------

SLOW_WRITER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from storage.atomic import write_atomic

def write_slowly(f):
    f.write(bytes(100_000))
    f.flush()
    print("writing", flush=True)
    time.sleep(60)

write_atomic(sys.argv[2], write_slowly)
"""

SLOW_PREPARE = """
import sys, time
sys.path.insert(0, sys.argv[1])
import data.prepare as prepare_module

encode = prepare_module.encode_splits

def encode_then_wait(*args):
    counts = encode(*args)
    print("writing", flush=True)
    time.sleep(60)
    return counts

prepare_module.encode_splits = encode_then_wait
prepare_module.prepare(sys.argv[2], "char", cache_dir=sys.argv[3])
"""


def kill_9_while_writing(script, *args) -> int:
    """Run `script` until it prints "writing", kill -9 it, reap it; return its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(ROOT), *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # a zombie still counts as alive
        proc.stdout.close()
    return proc.pid


@pytest.mark.slow
def test_temps_of_killed_writers_are_cleaned_and_live_ones_kept(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"previous")
    pid = kill_9_while_writing(SLOW_WRITER, path)
    (stale,) = [n for n in names(tmp_path) if n.endswith(".tmp")]
    assert stale.startswith(f".big.bin.{pid}.") and (tmp_path / stale).stat().st_size == 100_000
    live = tmp_path / f".other.bin.{os.getpid()}.0a1b2c3d.tmp"
    live.write_bytes(b"being written")
    (tmp_path / ".hidden").write_text("not a temp")
    assert clean_stale_temps(tmp_path) == 1
    assert names(tmp_path) == [".hidden", live.name, "big.bin"]
    assert path.read_bytes() == b"previous" and clean_stale_temps(tmp_path / "nope") == 0


@pytest.mark.slow
def test_a_killed_prepare_leaves_a_temp_folder_that_the_next_prepare_removes(tmp_path):
    source, cache = tmp_path / "text.txt", tmp_path / "cache"
    source.write_text("the owl hooted\nit was hungry\n" * 20)
    pid = kill_9_while_writing(SLOW_PREPARE, source, cache)
    prepared = cache / "prepared"
    (stale,) = names(prepared)
    assert stale.startswith(".char-auto-") and f".{pid}." in stale
    assert "train.bin" in names(prepared / stale)
    live = make_temp_folder(prepared / "char-other")  # this process's build: alive, kept
    done = prepare(str(source), "char", cache_dir=cache)
    assert names(prepared) == sorted([live.name, done.dir.name])
    assert done.meta["train_tokens"] + done.meta["val_tokens"] == len(source.read_text())


@pytest.mark.parametrize("renameat2", [True, False])
def test_exchange_folders_swaps_two_whole_folders(tmp_path, monkeypatch, renameat2):
    import types

    from storage import atomic

    if not renameat2:  # another kernel, or a file system without RENAME_EXCHANGE: three renames
        monkeypatch.setattr(atomic.ctypes, "CDLL", lambda *a, **k: types.SimpleNamespace())
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "new.txt").write_text("new")
    (b / "old.txt").write_text("old")
    atomic.exchange_folders(a, b)
    assert [p.name for p in b.iterdir()] == ["new.txt"] and [p.name for p in a.iterdir()] == [
        "old.txt"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # nothing left aside


def test_check_writable_says_now_what_a_write_would_say_and_leaves_nothing(tmp_path):
    from storage.atomic import check_writable

    check_writable(tmp_path / "page.html")  # a new file in a folder that takes one
    (tmp_path / "mine.txt").write_text("mine")
    check_writable(tmp_path / "mine.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]  # no trial file left
    assert (tmp_path / "mine.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="it is a folder"):
        check_writable(tmp_path)
    with pytest.raises(ValueError, match=r"could not write /proc/tinygpt\.html"):
        check_writable("/proc/tinygpt.html")  # /proc takes no new file, even from root


def test_a_fallback_swap_whose_second_rename_fails_puts_the_first_folder_back(
    tmp_path, monkeypatch
):
    import types

    from storage import atomic

    monkeypatch.setattr(atomic.ctypes, "CDLL", lambda *a, **k: types.SimpleNamespace())
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "old.txt").write_text("old")
    rename = os.rename

    def second_fails(src, dst):
        if os.fsdecode(src) == str(a):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", second_fails)
    with pytest.raises(OSError):
        atomic.exchange_folders(a, b)
    assert (b / "old.txt").read_text() == "old" and a.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]

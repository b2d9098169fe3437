"""A forced restart over a run (`train.py --force` where out_dir holds a checkpoint): the new run
is written aside, in a folder beside out_dir, and replaces out_dir whole at its first
checkpoint, in one atomic step (storage.atomic.exchange_folders). Until then out_dir holds the
old run as it was: a new run that fails before its first checkpoint removes its aside folder,
and one killed (kill -9) leaves it to the next run on out_dir, which removes it.

Where the system cannot swap two folders in one step (storage.atomic.exchange_folders falls back
to three renames), a kill between the first two renames leaves out_dir missing and both runs
under temp names. The new run's folder carries a marker (REPLACING) from just before the swap to
just after it, so the next run on out_dir finishes the swap (recover_exchange): the new run
becomes out_dir, as the completed swap would have made it, and the old one is then cleared as
after any swap. A stale aside folder is never removed while out_dir holds no checkpoint and it
holds one: it may be the only copy of a run.

Files in the old folder that are not a run's (notes, a page written there) move into the new
one; the old run's own files go.
"""

import contextlib
import os
import re
import shutil
from pathlib import Path

from model.checkpoint import CKPT_NAME
from runs.folder import (
    CONFIG_FILE,
    LOSS_PLOT,
    META_FILE,
    METRICS_FILE,
    PROBE_FILE,
    PROBE_PLOT,
    REPORT_FILE,
)
from storage.atomic import exchange_folders, is_stale_temp, is_temp, make_temp_folder
from storage.json_read import read_json
from storage.lock import LOCK_NAME, folder_lock

# In a forced restart's folder from just before the swap until just after it: this folder is the
# new run, which replaces out_dir (see recover_exchange).
REPLACING = ".replacing"

# What a run leaves in its folder: its files, the trackers' folders and the tokenizer files
# data/prepare.py names (a run's own may be named in its meta.json).
RUN_ENTRIES = frozenset(
    {
        CKPT_NAME,
        CONFIG_FILE,
        META_FILE,
        METRICS_FILE,
        LOSS_PLOT,
        PROBE_PLOT,
        PROBE_FILE,
        REPORT_FILE,
        LOCK_NAME,
        REPLACING,
        "tensorboard",
        "wandb",
        "tokenizer.json",
        "tokenizer.bpe",
    }
)


class Aside:
    """Where a forced restart writes until its first checkpoint: `folder`, beside out_dir (the
    folder a symlinked out_dir points to); after publish(), out_dir itself."""

    def __init__(self, out_dir):
        self.out_dir = Path(out_dir)
        self.real = Path(os.path.realpath(out_dir))
        check_swappable(out_dir)
        self.folder = make_temp_folder(self.real)
        self.published = False

    def publish(self) -> list[str]:
        """Swap the aside folder in for the old run; the names kept from the old folder."""
        _mark(self.folder / REPLACING)
        exchange_folders(self.folder, self.real)
        with contextlib.suppress(OSError):
            os.unlink(self.real / REPLACING)
        old, self.folder, self.published = self.folder, self.out_dir, True
        return discard_run(old, into=self.real)


def check_swappable(out_dir, is_mount=None) -> None:
    """ValueError, one line, where a new run cannot be swapped in for out_dir's folder (before
    it trains, so no work is lost at its first checkpoint): a folder that holds the working
    folder, or a mount point, which no rename can move (EBUSY). `is_mount(path)`: whether a
    path is a mount point (os.path.ismount by default)."""
    real = Path(os.path.realpath(out_dir))
    cwd = Path.cwd().resolve()
    if cwd == real or real in cwd.parents:
        raise ValueError(
            f"out_dir={out_dir} holds the working folder {cwd}; a forced restart "
            "replaces a run folder whole, so give the run a folder of its own"
        )
    if (is_mount or os.path.ismount)(real):
        raise ValueError(
            f"out_dir={out_dir} is a mount point, which a forced restart cannot replace (it "
            f"swaps a new folder in by a rename); give the run a folder inside it, "
            f"out_dir={real / 'run'}, or remove the old run's files yourself"
        )


@contextlib.contextmanager
def written_aside(out_dir):
    """An Aside, locked while the run works in it, removed at the end unless published."""
    aside = Aside(out_dir)
    try:
        with folder_lock(aside.folder, "training run"):
            yield aside
    finally:
        if not aside.published:
            discard_run(aside.folder)


def discard_run(folder, into=None) -> list[str]:
    """Remove a run's entries from `folder`, move the others into the folder `into` (where their
    name is free), and remove `folder` if that leaves it empty; the names moved."""
    folder, kept = Path(folder), []
    own = set(RUN_ENTRIES)
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        own.add(read_json(folder / META_FILE)["tokenizer_file"])
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            if entry.name in own or is_temp(entry.name):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path)
                else:
                    path.unlink()
            elif into is not None and not os.path.lexists(Path(into) / entry.name):
                os.rename(path, Path(into) / entry.name)
                kept.append(entry.name)
    with contextlib.suppress(OSError):
        folder.rmdir()
    return kept


def stale_asides(out_dir) -> list[Path]:
    """The aside folders beside out_dir whose process is no longer alive (killed restarts)."""
    real = Path(os.path.realpath(out_dir))
    if not real.parent.is_dir():
        return []
    found = []
    for entry in os.scandir(real.parent):
        rest = entry.name.removeprefix(f".{real.name}")
        if (
            rest != entry.name
            and re.fullmatch(r"\.\d+\.[0-9a-f]+\.tmp", rest)  # this folder's own
            and is_stale_temp(entry.name)
            and entry.is_dir(follow_symlinks=False)
        ):
            found.append(Path(entry.path))
    return sorted(found)


def recover_exchange(out_dir) -> Path | None:
    """Finish a swap that a kill cut in half: where out_dir is missing (or an empty folder) and a
    stale aside folder holds the REPLACING marker, that folder (the new run) becomes out_dir.
    The folder it came from, or None when there was nothing to finish. Call it before the lock
    on out_dir is taken (the lock's file would make out_dir non-empty); a rename is one atomic
    step, so two runs finishing the same swap cannot both move a folder."""
    real = Path(os.path.realpath(out_dir))
    with contextlib.suppress(OSError), os.scandir(real) as entries:
        if next(entries, None) is not None:
            return None  # out_dir holds a run (or anything): nothing was cut in half
    marked = [p for p in stale_asides(out_dir) if (p / REPLACING).is_file()]
    for folder in sorted(marked, key=_marked_at, reverse=True):  # the latest swap first
        try:
            os.rename(folder, real)  # onto a missing or empty out_dir
        except OSError:
            continue  # another run finished it first, or out_dir is not empty now
        with contextlib.suppress(OSError):
            os.unlink(real / REPLACING)
        return folder
    return None


def finish_cut_swap(out_dir) -> str | None:
    """recover_exchange, and the note that says what it did (None: nothing to finish)."""
    cut = recover_exchange(out_dir)
    if cut is None:
        return None
    return (
        f"note: {out_dir} was missing, a forced restart killed mid-swap; its new run "
        f"({cut.name}) is put in its place"
    )


def leftover_note(out_dir: str | Path) -> str | None:
    """A note on the aside folders beside out_dir that killed forced restarts left
    (stale_asides): what each holds and whether it can be removed; None where there are none.
    They stay until the next training run on out_dir tidies them (finish_cut_swap,
    clean_stale_asides), so whoever meets out_dir before that is told what they are."""
    try:
        asides = stale_asides(out_dir)
    except OSError:  # a parent folder that cannot be listed: nothing to say
        return None
    has_run = (Path(os.path.realpath(out_dir)) / CKPT_NAME).is_file()
    swapping = any((folder / REPLACING).is_file() for folder in asides)
    said = []
    for folder in asides:
        if has_run:
            what = f"{out_dir} holds its run, so it can be removed"
        elif (folder / REPLACING).is_file():
            what = (
                f"it holds the new run, which the next training run on {out_dir} puts in place "
                f"(or rename it to {out_dir})"
            )
        elif swapping:
            what = f"it holds the old run, and can be removed once {out_dir} holds the new one"
        elif (folder / CKPT_NAME).is_file():
            what = f"it holds a checkpoint and {out_dir} none: keep it, or rename it to {out_dir}"
        else:
            what = "it holds no checkpoint and can be removed"
        said.append(f"{folder} is left by a forced restart on {out_dir} that was killed; {what}")
    return f"note: {'; '.join(said)}" if said else None


def clean_stale_asides(out_dir) -> None:
    """The aside folders beside out_dir of forced restarts that were killed: their run is
    removed, anything else in them (an old folder's notes, if killed mid-swap) moved into
    out_dir. One that holds a checkpoint is kept while out_dir holds none."""
    real = Path(os.path.realpath(out_dir))
    with contextlib.suppress(OSError):
        os.unlink(real / REPLACING)  # a swap killed just after its last rename
    has_run = (real / CKPT_NAME).is_file()
    for folder in stale_asides(out_dir):
        if has_run or not (folder / CKPT_NAME).exists():
            discard_run(folder, into=real if real.is_dir() else None)


def _marked_at(folder: Path) -> int:
    """When `folder` was marked as a swap's new run (0 if the mark is gone)."""
    try:
        return (folder / REPLACING).stat().st_mtime_ns
    except OSError:
        return 0


def _mark(path: Path) -> None:
    """Create the empty file `path`, durably (it must be on disk before the swap starts)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

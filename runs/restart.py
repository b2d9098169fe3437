"""A forced restart over a run (`train.py --force` where out_dir holds a checkpoint): the new run
is written aside, in a folder beside out_dir, and replaces out_dir whole at its first
checkpoint, in one atomic step (storage.atomic.exchange_folders). Until then out_dir holds the
old run as it was: a new run that fails before its first checkpoint removes its aside folder,
and one killed (kill -9) leaves it to the next run on out_dir, which removes it.

Files in the old folder that are not a run's (notes, a page written there) move into the new
one; the old run's own files go.
"""

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

from model.checkpoint import CKPT_NAME
from runs.folder import CONFIG_FILE, LOSS_PLOT, META_FILE, METRICS_FILE, PROBE_FILE, PROBE_PLOT
from storage.atomic import exchange_folders, is_stale_temp, is_temp, make_temp_folder
from storage.lock import LOCK_NAME, folder_lock

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
        LOCK_NAME,
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
        cwd = Path.cwd().resolve()
        if cwd == self.real or self.real in cwd.parents:
            raise ValueError(
                f"out_dir={out_dir} holds the working folder {cwd}; a forced restart "
                "replaces a run folder whole, so give the run a folder of its own"
            )
        self.folder = make_temp_folder(self.real)
        self.published = False

    def publish(self) -> list[str]:
        """Swap the aside folder in for the old run; the names kept from the old folder."""
        exchange_folders(self.folder, self.real)
        old, self.folder, self.published = self.folder, self.out_dir, True
        return discard_run(old, into=self.real)


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
        own.add(json.loads((folder / META_FILE).read_text())["tokenizer_file"])
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


def clean_stale_asides(out_dir) -> None:
    """The aside folders beside out_dir of forced restarts that were killed: their run is
    removed, anything else in them (an old folder's notes, if killed mid-swap) moved back."""
    real = Path(os.path.realpath(out_dir))
    if not real.parent.is_dir():
        return
    for entry in os.scandir(real.parent):
        rest = entry.name.removeprefix(f".{real.name}")
        if (
            rest != entry.name
            and re.fullmatch(r"\.\d+\.[0-9a-f]+\.tmp", rest)  # this folder's own
            and is_stale_temp(entry.name)
            and entry.is_dir(follow_symlinks=False)
        ):
            discard_run(entry.path, into=real if real.is_dir() else None)

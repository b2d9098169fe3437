"""An exclusive lock on a folder, held for as long as one process works in it.

The lock is an flock(2) on `<folder>/.lock`: the kernel releases it when the holder's process
ends, however it ends (kill -9 included), so a crash never leaves a stale lock behind. The
holder writes its PID into the file so that a refused second process can name it.
"""

import contextlib
import errno
import fcntl
import os
from pathlib import Path

LOCK_NAME = ".lock"


def _folder_error(folder, e):
    reason = e.strerror or type(e).__name__
    return ValueError(f"cannot use {folder} as a run folder ({reason}); choose another out_dir")


@contextlib.contextmanager
def folder_lock(folder, what="run"):
    """Hold the lock on `folder` (created if missing) inside the `with`; ValueError, one line,
    if another process holds it, or if the folder cannot be made or written."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise _folder_error(folder, e) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _folder_error(folder, e) from None
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ValueError(f"{folder} is in use by another {what} (PID {holder}); wait for it to "
                             "finish, or choose another out_dir") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            raise _folder_error(folder, e) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock

"""An exclusive lock on a folder, held for as long as one process works in it.

The lock is an flock(2) on `<folder>/.lock`: the kernel releases it when the holder's process
ends, however it ends (kill -9 included), so a crash never leaves a stale lock behind. The
holder writes its PID into the file so that a refused second process can name it.

A holder that leaves with an error before writing anything else in the folder (a refused run)
leaves the folder as it found it: the lock file's old bytes and times are put back, and a lock
file or folders it made are removed again.
"""

import contextlib
import errno
import fcntl
import os
from pathlib import Path

LOCK_NAME = ".lock"


def _folder_error(folder, e):
    reason = _in_the_way(Path(folder)) or e.strerror or type(e).__name__
    return ValueError(f"cannot use {folder} as a run folder ({reason}); choose another out_dir")


def _in_the_way(folder):
    """What stands where `folder` or a folder above it should be: a file, a symlink to a file,
    or a symlink to nothing; None if nothing does."""
    for path in (folder, *folder.parents):
        if path.is_dir() or not os.path.lexists(path):
            continue
        if not path.is_symlink():
            return f"{path} is a file"
        target = os.readlink(path)
        if not path.exists():
            return f"{path} is a symlink to {target}, which does not exist"
        return f"{path} is a symlink to {target}, a file"
    return None


@contextlib.contextmanager
def folder_lock(folder, what: str = "run"):
    """Hold the lock on `folder` (created if missing) inside the `with`; ValueError, one line,
    if another process holds it, or if the folder cannot be made or written."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]  # deepest first
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file in the way, a read-only parent, ...
            raise _folder_error(folder, e) from None
        fd, before = _open_locked(folder / LOCK_NAME, folder, what)
    except BaseException:
        _remove_folders(made)
        raise
    listing = _listing(folder)
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            raise _folder_error(folder, e) from None
        yield
    except BaseException:
        if _listing(folder) == listing:  # nothing written: leave no trace of this process
            _restore(folder / LOCK_NAME, fd, before, made)
        raise
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _open_locked(path, folder, what):
    """(fd, what the lock file was before: None if new, else (bytes, stat)), the lock held."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR)
            before = os.fstat(fd)
        except FileNotFoundError:
            try:
                fd, before = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666), None
            except FileExistsError:  # another process made it first: open that one
                continue
            except OSError as e:
                raise _folder_error(folder, e) from None
        except OSError as e:
            raise _folder_error(folder, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _folder_error(folder, e) from None
            raise ValueError(
                f"{folder} is in use by another {what} (PID {holder}); wait for it to "
                "finish, or choose another out_dir"
            ) from None
        # A refused holder may have removed the file it made (see _restore) after this process
        # opened it: a lock on a file no longer at `path` locks nothing, so take the new one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd, None if before is None else (os.pread(fd, before.st_size, 0), before)
        os.close(fd)


def _listing(folder):
    """What is in `folder` besides the lock: names, sizes and modification times."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    stats = {e.name: e.stat(follow_symlinks=False) for e in entries if e.name != LOCK_NAME}
    return {name: (stat.st_size, stat.st_mtime_ns) for name, stat in stats.items()}


def _restore(path, fd, before, made):
    """Put the lock file back as it was, or remove it and the folders made for it."""
    with contextlib.suppress(OSError):
        if before is None:
            os.unlink(path)
            _remove_folders(made)
        else:
            content, stat = before
            os.ftruncate(fd, 0)
            os.pwrite(fd, content, 0)
            os.utime(fd, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _remove_folders(made):
    for folder in made:  # deepest first; one that is not empty now is someone else's
        try:
            os.rmdir(folder)
        except OSError:
            return

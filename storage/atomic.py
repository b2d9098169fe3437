"""One writer for every file: temp file beside it, write, fsync, rename.

A reader (or a crash, even kill -9) sees the old file or the new one, never part of one: the
rename is the only step that changes what the path names. New files get the ordinary mode for
the user's umask. Only regular files or new paths are replaced, never a device, FIFO or folder;
a symlink is written through (its target is replaced, the link stays).

Temps are named `.{name}.{pid}.{random}.tmp` (files, and the folders of make_temp_folder), so a
later run can tell whose they are: clean_stale_temps removes those of writers no longer alive.
"""

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

_TEMP_NAME = re.compile(r"\A\..+\.(\d+)\.[0-9a-f]+\.tmp\Z")
_ADVICE = {
    errno.ENOSPC: "free some space or choose another folder",
    errno.EDQUOT: "free some space or choose another folder",
    errno.EFBIG: "raise the file size limit (ulimit -f) or choose another folder",
}
# Where torch.save meets a failed write with no OSError to chain, this is all its text says.
_TORCH_WRITE_FAILED = ("unexpected pos", "PytorchStreamWriter failed")


def write_atomic(path, content) -> Path:
    """Replace the file at `path` with `content`, atomically; return `path`.

    content: bytes, str (written as UTF-8), or a callable fn(f) that writes into a binary file
    object. An OSError while writing (disk full, read-only, permission denied...; also inside
    the RuntimeError that torch.save raises for one) is reported as a one-line ValueError, so a
    callable should raise OSError only for writes to f; any other
    exception it raises (a ValueError of its own, say) propagates unchanged. Either way the temp
    file is deleted and the previous file, if any, is untouched. Missing parent folders are
    created. ValueError, too, if `path` (or its symlink's target) is not a regular file.
    """
    path = Path(path)
    target = _target(path)
    tmp = _temp_name(target)
    existed = False
    try:
        existed = _check_replaceable(path, target)
        target.parent.mkdir(parents=True, exist_ok=True)
        # The kernel applies the umask to 0o666, as for any new file: ordinary modes, without
        # reading the process-wide umask (os.umask can only read it by changing it).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        if existed:  # a rewrite keeps the file's mode (a user's chmod 600 stays)
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        with os.fdopen(fd, "wb") as f:
            _write_content(f, content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        cause = _write_error(e)
        if cause is None:
            raise
        raise _failed(path, cause, existed) from None
    _fsync_folder(target.parent)
    return path


def make_temp_folder(path) -> Path:
    """Create an empty folder beside `path`, under a temp name, for building `path` in.

    Build it, then publish_folder(tmp, path); if this process dies first, clean_stale_temps
    removes it. Its mode is the ordinary one for the umask, like the files written in it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    tmp.mkdir(mode=0o777)  # the umask applies, as for write_atomic's files
    return tmp


def publish_folder(tmp, path) -> None:
    """fsync the files in `tmp` and `tmp` itself, then rename it to `path`.

    The rename is the one atomic step: a folder named `path` is always whole. OSError if `path`
    is already a non-empty folder (another process finished it first).
    """
    tmp = Path(tmp)
    for file in tmp.iterdir():
        if file.is_file():
            _fsync(file)
    _fsync(tmp)
    os.rename(tmp, path)
    _fsync_folder(Path(path).parent)


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100  # linux/fs.h, fcntl.h


def exchange_folders(a, b) -> None:
    """Swap what the paths `a` and `b` name, two folders on one file system, in one atomic step
    (Linux's renameat2 RENAME_EXCHANGE): each path names a whole folder at every moment.

    Where the system cannot (another kernel, a file system without it), three renames: a crash
    between them leaves `b`'s folder under a temp name beside it (runs/restart.py finishes such
    a swap); a failed second rename puts `b` back and raises.
    """
    a, b = os.fsencode(a), os.fsencode(b)
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE) == 0:
            _fsync_folder(Path(os.fsdecode(b)).parent)
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), os.fsdecode(b))
    aside = _temp_name(Path(os.fsdecode(b)))
    os.rename(b, aside)
    try:
        os.rename(a, b)
    except OSError:  # `b` goes back where it was, and the swap did not happen
        os.rename(aside, b)
        raise
    os.rename(aside, a)
    _fsync_folder(Path(os.fsdecode(b)).parent)


def clean_stale_temps(folder) -> int:
    """Remove the temp files and folders in `folder` whose writer process is no longer alive.

    Temps of live processes are never touched. Return how many were removed (0 if `folder`
    does not exist). The PIDs are this machine's: in a folder shared between machines, a temp
    whose writer runs elsewhere looks stale here.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    for entry in folder.iterdir():
        match = _TEMP_NAME.match(entry.name)
        if match is None or _alive(int(match[1])):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:  # another run cleaned it first, or it is not ours to delete
            continue
        removed += 1
    return removed


def is_temp(name: str) -> bool:
    """Whether `name` is a temp's name (a file or folder of this module's writers)."""
    return _TEMP_NAME.match(name) is not None


def is_stale_temp(name: str) -> bool:
    """Whether `name` is a temp's name whose writer process is no longer alive."""
    match = _TEMP_NAME.match(name)
    return match is not None and not _alive(int(match[1]))


def check_writable(path: str | Path) -> None:
    """The ValueError write_atomic(path, ...) would raise for a path that is no regular file (a
    folder, a device, a file where a parent folder should be) or in a folder that takes no new
    file (read-only, full, /proc), raised now: for a caller that does long work before it
    writes. A trial file is made beside the target and removed; nothing else is touched."""
    path = Path(path)
    target = _target(path)
    existed = _check_replaceable(path, target)
    if not target.parent.is_dir():
        return  # write_atomic makes the missing folders; mkdir's own error is clear
    trial = _temp_name(target)
    try:
        os.close(os.open(trial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        os.unlink(trial)
    except OSError as e:
        raise _failed(path, e, existed) from None


def _failed(path: Path, cause: OSError, existed: bool) -> ValueError:
    """write_atomic's one-line error for a write to `path` that failed with `cause`."""
    kept = "the previous file is untouched" if existed else "nothing was written"
    advice = _ADVICE.get(cause.errno, "choose a folder you can write to")
    return ValueError(f"could not write {path}: {cause.strerror or cause}; {kept} — {advice}")


def _target(path: Path) -> Path:
    """The file a write to `path` replaces: a symlink is written through."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _temp_name(path: Path) -> Path:
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _check_replaceable(path: Path, target: Path) -> bool:
    """Whether `target` exists; ValueError unless it is a regular file or can be created."""
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise ValueError(f"cannot write to {path}: it is {what}; give a file path")
    # "/" always exists, so some ancestor does; a file there would make mkdir fail obscurely.
    ancestor = next(p for p in target.parents if p.exists())
    if not ancestor.is_dir():
        raise ValueError(
            f"cannot write to {path}: {ancestor} is a file, not a folder; "
            f"give a path inside a folder"
        )
    return mode is not None


def _write_content(f, content) -> None:
    if isinstance(content, str):
        content = content.encode("utf-8")
    if isinstance(content, (bytes, bytearray, memoryview)):
        f.write(content)
    elif callable(content):
        content(f)
    else:
        raise TypeError(
            f"content must be bytes, str or a callable fn(f), got {type(content).__name__}"
        )


def _write_error(e: BaseException) -> OSError | None:
    """The OSError that made a write fail, or None if `e` is not a failed write."""
    if isinstance(e, OSError):
        return e
    if isinstance(e, RuntimeError):  # torch.save turns the file's OSError into one
        if isinstance(e.__context__, OSError):
            return e.__context__
        if any(text in str(e) for text in _TORCH_WRITE_FAILED):
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # someone else's process, or not a pid: keep it
        return True
    return True


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Make a finished rename durable; best effort, as some file systems refuse to fsync a
    folder."""
    with contextlib.suppress(OSError):
        _fsync(folder)

"""Reading JSON that a person may have written or edited (a probe file, a pairs file, probe.json,
metrics.jsonl, meta.json, a tokenizer file): the standard library's json, with what it lets
through refused as a one-line ValueError: a key written twice in one object (json keeps the last
without a word) and nesting deeper than Python's stack (json raises RecursionError). A file is
read only if it is a regular file, so that a FIFO in its place never blocks the reader."""

import json
import os
import stat
from pathlib import Path


class DuplicateKey(ValueError):
    """A JSON object that gives `key` twice."""

    def __init__(self, key: str):
        super().__init__(f"the key {key!r} is written twice in one object; keep one")
        self.key = key


def parse_json(text: str | bytes) -> object:
    """The JSON value of `text`. ValueError, one line without the place (the caller names the
    file and line): json.JSONDecodeError for text that is not JSON, DuplicateKey for a key
    written twice, a ValueError for nesting too deep to read."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError(
            "nested too deeply to read (arrays or objects inside one another, more levels than "
            "Python's stack holds)"
        ) from None


def regular_text(path: str | Path) -> str:
    """The UTF-8 text of the regular file at `path` (a symlink is followed). ValueError for a
    FIFO, a device or a folder, which is never opened for reading (a FIFO would block until a
    writer came); OSError as open() raises it; UnicodeDecodeError for text that is not UTF-8."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path} is not a regular file")
    # O_NONBLOCK: should a FIFO take the file's place after the stat, opening it does not wait.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return f.read().decode("utf-8")


def read_json(path: str | Path) -> object:
    """parse_json of regular_text(path); the same errors."""
    return parse_json(regular_text(path))


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out

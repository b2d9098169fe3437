"""A text file the user names on generate.py's command line (a prompt, sentences), read whole."""

from pathlib import Path

from data.sources import Source


def read_user_text(path, flag):
    """The text of the UTF-8 file the user named with `flag`; ValueError (one line) for a missing
    file, a folder, text that is not UTF-8 (with the offset of the first bad byte), or no text."""
    path = Path(path)
    if not path.exists() or path.is_dir():  # a pipe or /dev/stdin is read as it comes
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ValueError(f"{flag} {path}: the file {what}; give a UTF-8 text file")
    text = Source(str(path), (path,)).read_text()
    if not text:
        raise ValueError(f"{flag} {path}: the file is empty; write some text into it")
    return text

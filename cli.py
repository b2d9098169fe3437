"""The scripts' argument parser: argparse, but every error is one `error: ...` line on stderr with
exit code 2 (argparse prints its usage first), and an option we do not have gets what to type
instead; Ctrl-C held back while torch starts; and the one terminal width every printed table and
line is fitted to, with fit_width and wrap_for, which wrap a report or a note to it. The ground
floor beside checks.py: it imports only checks.py, and the scripts, training's console,
generation and reports all use it."""

import argparse
import contextlib
import os
import signal
import textwrap
import threading
from collections.abc import Callable, Iterator

from checks import did_you_mean

UNRECOGNIZED = "unrecognized arguments:"


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse.ArgumentParser with one-line errors. For an unknown option the line says what to
    type instead, the first of: the script's own `hint(option)` (another tool's spelling, say),
    the closest option of ours (`--num_samples=3` -> --num-samples), and `fallback`."""

    def __init__(
        self, *args, hint: Callable[[str], str | None] | None = None, fallback: str = "", **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.hint, self.fallback = hint, fallback

    def error(self, message: str) -> None:
        advice = ""
        if message.startswith(UNRECOGNIZED):
            advice = self.instead(message.removeprefix(UNRECOGNIZED).split()[0])
        self.exit(2, f"error: {message}{f'; {advice}' if advice else ''} (see --help)\n")

    def instead(self, option: str) -> str:
        """What to type instead of the unknown `option` (as typed, with its dashes and value)."""
        said = self.hint(option) if self.hint else None
        return said or self.closest_option(option) or self.fallback

    def closest_option(self, option: str) -> str | None:
        """ "did you mean --x?" for the option of ours `option` is most likely a typo of, if any
        (underscores read as dashes), else None."""
        name = "--" + option.lstrip("-").split("=", 1)[0].replace("_", "-")
        ours = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        return did_you_mean(name, ours, cutoff=0.75) or None


@contextlib.contextmanager
def interrupt_after() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back until the block ends, then raise it as KeyboardInterrupt. For
    importing torch: an interrupt raised inside its C++ start-up aborts the process ("terminate
    called after throwing ... KeyboardInterrupt", no exit code 130) where the script would say
    one line. Nothing changes where SIGINT is not Python's usual handler (ignored, as under
    nohup) or off the main thread, where no signal arrives."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    asked = []
    signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if asked:
        raise KeyboardInterrupt


# What is written anywhere but a terminal (a pipe, a file, a StringIO) is fitted to 80 columns,
# the width xterm, GNOME Terminal and macOS Terminal open at: a pipe, a log or a test sees what
# such a terminal shows before anyone resizes it, and a report kept in a file reads whole in any
# editor. COLUMNS is not read: the width is asked of the stream's own file descriptor (not of
# stdout's, as shutil.get_terminal_size does, which is wrong for stderr).
PIPED_WIDTH = 80


def terminal_width(stream: object) -> int:
    """The columns of the terminal `stream` writes to, or PIPED_WIDTH when it is no terminal or
    says no width (a pseudo-terminal nobody sized reports 0)."""
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty and isatty():
            return os.get_terminal_size(stream.fileno()).columns or PIPED_WIDTH
    except (AttributeError, OSError, ValueError):  # no fileno, a closed stream
        pass
    return PIPED_WIDTH


def wrap_for(message: str, stream: object) -> str:
    """`message` as it is for a pipe or a file (grep and tail read whole lines); on a terminal,
    fitted to its width (fit_width)."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return message
    return fit_width(message, terminal_width(stream))


def fit_width(text: str, width: int) -> str:
    """`text` with every prose line longer than `width` wrapped, the continuation indented under
    the line's own indent plus two spaces; lines that fit, and table rows (columns set apart by
    runs of spaces), are left as they are. A word longer than the line (a path) stays whole, so
    that it can still be copied."""
    out = []
    for line in text.splitlines():
        if len(line) <= width or "   " in line.strip():
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_on_hyphens=False,
            break_long_words=False,
        ) or [""]
    return "\n".join(out)

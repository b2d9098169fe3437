"""How many columns the text written to a stream may use: one answer for the probe's report, the
attention maps and the training console alike.

On a terminal, its width. Anywhere else (a pipe, a file, a StringIO) PIPED_WIDTH: 80, the width
xterm, GNOME Terminal and macOS Terminal open at, so that what a pipe, a log or a test sees is
what such a terminal shows before anyone resizes it, and a report kept in a file reads whole in
any editor or e-mail. The probe's reports and tables were made to fit it (tests/test_probe_cli.py
holds the report to it); the attention maps' widest tables go on in a second block of columns.
COLUMNS is not read: the width is the terminal's own, asked of the stream's file descriptor (not
of stdout's, as shutil.get_terminal_size does, which is wrong for stderr)."""

import os

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

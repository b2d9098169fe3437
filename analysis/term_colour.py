"""Which colour mode the terminal maps are drawn in: "truecolor", "256" or None (plain text),
with "-light" (LIGHT) for a terminal with a light background.

`choice` is the user's `--color`: "never", "always" (colour even into a pipe or a pager, as
`less -R` shows it) or "auto", the default, where the environment decides, in this order:
NO_COLOR set to a non-empty value turns colour off (no-color.org: an empty one leaves it on);
FORCE_COLOR set to a non-empty value turns it on even when output is piped (force-color.org);
else colour reaches a terminal only, never a pipe or TERM=dumb. 24-bit colour only where
COLORTERM says the terminal has it (`truecolor`, `24bit`), else the 256-colour palette.
COLORFGBG ("fg;bg", set by rxvt, Konsole and others) says whether the background is light.
"""

COLOR_CHOICES = ("auto", "always", "never")
LIGHT = "-light"  # the suffix of a colour mode for a terminal with a light background


def colour_mode(stream, environ, choice: str = "auto") -> str | None:
    """ "truecolor", "256" (either with LIGHT) or None for writing to `stream` (see the module
    docstring); ValueError for a `choice` not in COLOR_CHOICES."""
    if choice not in COLOR_CHOICES:
        raise ValueError(f"colour choice {choice!r}: give one of {', '.join(COLOR_CHOICES)}")
    if choice == "never":
        return None
    if choice == "auto":
        if environ.get("NO_COLOR"):
            return None
        if not environ.get("FORCE_COLOR"):
            if environ.get("TERM") == "dumb":
                return None
            isatty = getattr(stream, "isatty", None)
            if isatty is None or not isatty():
                return None
    mode = "truecolor" if environ.get("COLORTERM", "").lower() in ("truecolor", "24bit") else "256"
    return mode + LIGHT if light_background(environ) else mode


def light_background(environ) -> bool:
    """Whether COLORFGBG names a light background: as vim reads it, a background colour of 7 or
    9-15 is light, 0-6 and 8 dark. Unset or unreadable: dark, the common terminal."""
    bg = environ.get("COLORFGBG", "").split(";")[-1]
    return bg.isdigit() and (bg == "7" or 9 <= int(bg) <= 15)

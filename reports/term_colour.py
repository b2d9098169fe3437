"""Which colour mode the terminal maps are drawn in: "truecolor", "256" or None (plain text),
with "-light" (LIGHT) for a terminal with a light background.

`choice` is the user's `--color`: "never", "always" (colour even into a pipe or a pager, as
`less -R` shows it) or "auto", the default, where the environment decides, in this order:
NO_COLOR set to a non-empty value turns colour off (no-color.org: an empty one leaves it on);
FORCE_COLOR set to a non-empty value turns it on even when output is piped (force-color.org);
else colour reaches a terminal only, never a pipe or TERM=dumb. 24-bit colour only where
COLORTERM says the terminal has it (`truecolor`, `24bit`), else the 256-colour palette.
COLORFGBG ("fg;bg", set by rxvt, Konsole and others) says whether the background is light.

A cell's colours in each mode (sgr_colours): the viridis ramp in 24-bit colour, 22 greys of the
256-colour palette, both brighter for more weight, and on a light background the other way.
"""

COLOR_CHOICES = ("auto", "always", "never")
LIGHT = "-light"  # the suffix of a colour mode for a terminal with a light background
# The 24-bit ramp: viridis (matplotlib's default map), perceptually uniform and brighter at each
# step, so equal steps of weight look like equal steps, and it tells the story the 256-colour
# greys tell (more weight, more light). A straight line from navy to yellow in RGB made .25 and .5
# two similar browns. Nine of its colours, at weights 0, 1/8, ..., 1; in between, linear.
VIRIDIS = (
    (68, 1, 84),
    (71, 44, 122),
    (59, 82, 139),
    (44, 113, 142),
    (33, 145, 140),
    (39, 173, 129),
    (92, 200, 99),
    (170, 220, 50),
    (253, 231, 37),
)
# The 256-colour palette's greys, #1c1c1c (234) to #eeeeee (255) in even steps; its two darker
# greys are left out so that weight 0 stays visible on a black background. Quantising the heat
# ramp to the 6x6x6 colour cube instead gave an uneven ramp (.04 and .21 were one grey).
GREY_FIRST, GREY_LAST = 234, 255


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


def heat(w):
    """(r, g, b) of weight w on the VIRIDIS ramp (0: dark violet, 1: yellow)."""
    x = min(max(w, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    lo, hi = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(a + (b - a) * (x - i)) for a, b in zip(lo, hi))


def grey_index(w):
    """The 256-colour palette index drawing weight w: one of the 22 greys, brighter for more."""
    w = min(max(w, 0.0), 1.0)
    return GREY_FIRST + round(w * (GREY_LAST - GREY_FIRST))


def light_heat(w):
    """(r, g, b) of weight w on a light terminal: white (0) to dark blue (1), the page's ramp."""
    w = min(max(w, 0.0), 1.0)
    return round(255 - 247 * w), round(255 - 207 * w), round(255 - 148 * w)


def sgr_colours(w, colour):
    """ANSI escape setting the background to weight w's colour and a foreground readable on it."""
    if colour.endswith(LIGHT):  # light to dark: dark text on the light end
        dark_text = w < 0.5
        if colour == "truecolor" + LIGHT:
            fg = (0, 0, 0) if dark_text else (255, 255, 255)
            return "\x1b[48;2;{};{};{}m\x1b[38;2;{};{};{}m".format(*light_heat(w), *fg)
        index = GREY_LAST - (grey_index(w) - GREY_FIRST)
        return f"\x1b[48;5;{index}m\x1b[38;5;{16 if dark_text else 231}m"
    dark_text = w >= 0.5
    if colour == "truecolor":
        dark_text = w >= 0.6  # viridis is light enough for black text from about there
        fg = (0, 0, 0) if dark_text else (255, 255, 255)
        return "\x1b[48;2;{};{};{}m\x1b[38;2;{};{};{}m".format(*heat(w), *fg)
    return f"\x1b[48;5;{grey_index(w)}m\x1b[38;5;{16 if dark_text else 231}m"

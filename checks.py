"""The checks every layer makes of what it is given: a count, a number read from a file, and a
name that must be one of a list (with the "did you mean" that names the nearest). The ground
floor, importing nothing of the project, so that model/, data/, analysis/, configs/ and the
scripts can all use it."""

import difflib
import math
import reprlib
from collections.abc import Iterable
from numbers import Real


def int_at_least(name: str, value: object, minimum: int, note: str = "") -> int:
    """`value`, if it is an int (a bool is not) of at least `minimum`; else a ValueError that
    names it: "NAME must be an integer >= MINIMUM (NOTE), got VALUE" ("a positive integer" for
    a minimum of 1). `note` says what else is allowed or why the minimum."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}{f' ({note})' if note else ''}, got {value!r}")
    return value


def positive_int(name: str, value: object, note: str = "") -> int:
    """`value`, if it is an int of at least 1: int_at_least(name, value, 1, note)."""
    return int_at_least(name, value, 1, note)


def finite_number(value: object) -> bool:
    """Whether `value` is a finite real number (a bool is not): what a value read back from a
    file (metrics.jsonl, a saved result) must be before it is drawn or compared."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def did_you_mean(name: str, choices: Iterable[str], n: int = 1, cutoff: float = 0.6) -> str:
    """ "did you mean X?" (or "X or Y", up to n of them) for the choices nearest to a name that is
    none of them; "" when none is near. The one place every "unknown name" message asks it."""
    close = difflib.get_close_matches(str(name), list(choices), n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(close)}?" if close else ""


def shown(value: object) -> str:
    """`value` as an error quotes it: a repr cut short, however long or deep the value, and on
    one line (a newline in a key or a string shows as \\n)."""
    cut = reprlib.Repr()
    cut.maxlevel, cut.maxstring, cut.maxother, cut.maxlist, cut.maxdict = 3, 60, 60, 6, 6
    return cut.repr(value)

"""The check every layer makes of a count it is given: the ground floor, importing nothing of the
project, so that model/, data/, analysis/, configs/ and the scripts can all use it."""


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

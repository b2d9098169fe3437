"""Does a JSON value have a result's type (analysis/results.py)? The few forms those types use,
checked the way JSON carries them: a TypedDict is an object with its required keys and no
others, a list or a tuple is an array (a tuple of its length), a float may be written as an
integer, and a bool is not a number."""

import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict


def mismatches(value: Any, tp: Any, where: str = "result") -> list[str]:
    """Each place where `value` is not of type `tp`, as "where: what"; [] when it conforms."""
    if is_typeddict(tp):
        return _object(value, tp, where)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if any(not mismatches(value, arm, where) for arm in args):
            return []
        return [f"{where}: {_short(value)} is none of {_name(tp)}"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {_short(value)} is not one of {list(args)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {_short(value)} is not a list"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[0], f"{where}[{i}]")]
    if origin is tuple:
        if not isinstance(value, list | tuple) or len(value) != len(args):
            return [f"{where}: {_short(value)} is not an array of {len(args)}"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[i], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return [f"{where}: {_short(value)} is not an object"]
        return [m for k, v in value.items() for m in mismatches(v, args[1], f"{where}.{k}")]
    return [] if _scalar(value, tp) else [f"{where}: {_short(value)} is not {_name(tp)}"]


def _object(value, tp, where):
    if not isinstance(value, dict):
        return [f"{where}: {_short(value)} is not an object ({tp.__name__})"]
    hints = get_type_hints(tp)
    out = [f"{where}: no {key!r}" for key in sorted(tp.__required_keys__ - value.keys())]
    out += [f"{where}: {key!r} is no key of {tp.__name__}" for key in value if key not in hints]
    for key in value.keys() & hints.keys():
        out += mismatches(value[key], hints[key], f"{where}.{key}")
    return out


def _scalar(value, tp) -> bool:
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (bool, str):
        return isinstance(value, tp)
    raise TypeError(f"conform: a result's type uses {tp!r}, which mismatches() does not read")


def _name(tp) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

"""Does a JSON value have a result's type (analysis/results.py)? The few forms those types use,
checked the way JSON carries them: a TypedDict is an object with its required keys and no
others, a list or a tuple is an array (a tuple of its length), a float may be written as an
integer, a bool is not a number, a number annotated with a range (Share, Count) lies in it: a
share of 7.5 or a p-value of 5 is not a measurement, and a list or an object annotated with
AtLeast(n) has at least n items: a result's counts always name a split."""

import math
import types
from typing import (
    Annotated,
    Any,
    Literal,
    NamedTuple,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)


class Between(NamedTuple):
    """The range [lo, hi] of a number (Annotated[float, Between(0, 1)]); NaN is in none."""

    lo: float
    hi: float


class AtLeast(NamedTuple):
    """The fewest items of a list or an object (Annotated[dict[str, Counts], AtLeast(1)])."""

    n: int


Share = Annotated[float, Between(0.0, 1.0)]  # a share or a probability: cand@1, p, accuracy
Count = Annotated[int, Between(0, math.inf)]  # how many (examples, steps), or an index (a head)


def mismatches(value: Any, tp: Any, where: str = "result") -> list[str]:
    """Each place where `value` is not of type `tp`, as "where: what"; [] when it conforms."""
    if is_typeddict(tp):
        return _object(value, tp, where)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        found, metadata = mismatches(value, args[0], where), tp.__metadata__
        return found or _in_range(value, metadata, where) + _too_few(value, metadata, where)
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
    hints = get_type_hints(tp, include_extras=True)  # the ranges too
    out = [f"{where}: no {key!r}" for key in sorted(tp.__required_keys__ - value.keys())]
    out += [f"{where}: {key!r} is no key of {tp.__name__}" for key in value if key not in hints]
    for key in value.keys() & hints.keys():
        out += mismatches(value[key], hints[key], f"{where}.{key}")
    return out


# A sum of float32 probabilities (a head's attention on a span) may pass 1 by a rounding.
ROUNDING = 1e-6


def _in_range(value, metadata, where) -> list[str]:
    ranges = [m for m in metadata if isinstance(m, Between)]
    return [
        f"{where}: {value!r} is outside [{r.lo}, {r.hi}]"
        for r in ranges
        if not r.lo - ROUNDING <= value <= r.hi + ROUNDING  # False for NaN
    ]


def _too_few(value, metadata, where) -> list[str]:
    fewest = [m.n for m in metadata if isinstance(m, AtLeast)]
    return [f"{where}: {len(value)} items, fewer than {n}" for n in fewest if len(value) < n]


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
    if get_origin(tp) is Annotated:  # a range is said where a value falls outside it
        return _name(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return " | ".join(_name(arm) for arm in get_args(tp))
    if tp is type(None):
        return "None"
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Keys whose value is one index, a [layer, head] pair, or a grid: [layer][head], or per layer.
_INDEX = {"layer": 0, "head": 1}
_PAIRS = ("best_head", "kind_best_head")
_GRIDS = ("heads", "flip_share")
_PER_LAYER = ("layers", "mlps")
_PER_POINT = ("points", "mean_probability", "median_rank", "top1_share", "top")  # the lens's


def outside_model(value: Any, n_layer: int, n_head: int) -> list[str]:
    """Each place where a result names a layer or a head that a model of `n_layer` layers of
    `n_head` heads does not have (an index past it, a grid of another size): a result of
    another model, where []: every index in it is one of this model's."""
    sizes, found, todo = (n_layer, n_head), [], [("result", value)]
    lengths = {  # a list of one item per layer, or per point of the lens (each layer's, the end)
        **dict.fromkeys(_PER_LAYER, (n_layer, "layers")),
        **dict.fromkeys(_PER_POINT, (n_layer + 1, "points")),
    }
    while todo:  # a list, not the stack: however deep the value
        where, node = todo.pop()
        if isinstance(node, list):
            todo.extend((f"{where}[{i}]", v) for i, v in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        for key, v in node.items():
            at = f"{where}.{key}"
            if key in _INDEX and isinstance(v, int) and not 0 <= v < sizes[_INDEX[key]]:
                found.append(f"{at}: {v} is past the model's {sizes[_INDEX[key]]}")
            elif key in _PAIRS and isinstance(v, list) and len(v) == 2:
                if not all(isinstance(i, int) and 0 <= i < s for i, s in zip(v, sizes)):
                    found.append(f"{at}: {_short(v)} is no head of the model")
            elif key in _GRIDS and v and all(isinstance(row, list) for row in v):
                if len(v) != n_layer or any(len(row) != n_head for row in v):
                    found.append(f"{at}: a grid of another model's layers or heads")
            elif key == "heads" and isinstance(v, list) and len(v) not in (0, n_layer * n_head):
                found.append(f"{at}: {len(v)} heads where the model has {n_layer * n_head}")
            elif key in lengths and isinstance(v, list) and len(v) != lengths[key][0]:
                n, what = lengths[key]
                found.append(f"{at}: {len(v)} {what} where the model has {n}")
            todo.append((at, v))
    return found

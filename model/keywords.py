"""Keyword arguments checked by name: a misspelt one is a one-line TypeError that names the
nearest ones the function takes, where Python's own error names none. For the methods that
TransformerLens users call with its keywords (model.hooked, model.text)."""

import functools
import inspect
from collections.abc import Callable, Iterable

from checks import did_you_mean

NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def unknown_keyword(function: str, key: str, takes: Iterable[str]) -> str:
    """The message for keyword `key`, which `function` does not take: the nearest of `takes`,
    or all of them where none is near."""
    takes = list(takes)
    hint = did_you_mean(key, takes, n=3) or f"it takes {', '.join(takes)}"
    return f"{function}() got an unknown keyword argument {key!r}; {hint}"


def keywords_checked(fn: Callable) -> Callable:
    """`fn`, with an unknown keyword argument refused by unknown_keyword's message."""
    takes = [k for k, p in inspect.signature(fn).parameters.items() if p.kind in NAMED]
    takes = [k for k in takes if k != "self"]

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for key in kwargs:
            if key not in takes:
                raise TypeError(unknown_keyword(fn.__name__, key, takes))
        return fn(*args, **kwargs)

    return checked

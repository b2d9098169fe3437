"""A config value converted by its field's type: a YAML file's values and the text of
`key.path=value` overrides alike ("1e-3" a float, "yes" a bool, "none" for an optional field),
or a ConfigError saying what the field expected. configs/load.py builds the dataclasses with it.
"""

import types
import typing

from checks import shown
from configs.schema import ConfigError


def optional_of(tp: object) -> type | None:
    """X for a field typed `X | None` or `typing.Optional[X]`, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        rest = [t for t in args if t is not type(None)]
        if len(args) == 2 and len(rest) == 1:
            return rest[0]
    return None


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ValueError


def _to_int(value):
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError
    return int(value) if not isinstance(value, str) else int(value.replace("_", ""))


def _to_float(value):
    if isinstance(value, bool):
        raise ValueError
    return float(value)


def _to_str(value):
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError
    return str(value)


_CONVERTERS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def convert_value(
    value: object,
    tp: type,
    choices: tuple | None,
    where: str,
    parse: typing.Callable[[object], list] | None = None,
) -> object:
    """A YAML value (or an override's text) converted to the field type `tp`, or a ConfigError
    naming `where` and saying why; `choices`, where the field has them, are the values it may
    take, and `parse` reads a list field (data.mix)."""
    inner = optional_of(tp)
    if inner is not None:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        tp = inner
    if tp is list:
        try:
            return parse(value)
        except ValueError as e:
            raise ConfigError(f"{where}: {str(e).removeprefix('data.mix: ')}") from None
    convert = _CONVERTERS.get(tp)
    assert convert is not None, f"unsupported field type {tp}"
    try:
        converted = convert(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {shown(value)}") from None
    if choices and converted not in choices:
        raise ConfigError(f"{where}: {converted!r} is not one of {', '.join(choices)}")
    return converted

"""Reading a config: a YAML file (a key written twice refused) and `key.path=value` overrides,
built strictly into configs.schema's dataclasses, each value converted by its field's type
(configs/convert.py); and writing one back (to_yaml), every key path with its help (describe)
and a nested dict's keys flattened. Every error names the file, the key path and the reason.
"""

import copy
import typing
from dataclasses import MISSING, fields
from pathlib import Path

import yaml

from checks import did_you_mean, shown
from configs.convert import convert_value, optional_of
from configs.paths import DEFAULT_CONFIG, config_candidates, config_file, is_default_config
from configs.ranges import check
from configs.run_dir import Origin
from configs.schema import Config, ConfigError, DataConfig, config_dict, key_fields


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, refusing a key written twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.YAMLError(
                    f"the key {key!r} is written twice at line {key_node.start_mark.line + 1}; "
                    "keep one"
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


MAX_DEPTH = 16  # mappings and lists within each other: far past any config's (a mix entry is 3)


def _check_depth(text: str, where: str) -> None:
    """ConfigError where the YAML `text` nests mappings and lists more than MAX_DEPTH deep: read
    as events (the parser keeps a list, not the stack), before the loader would recurse."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ConfigError(
                        f"{where}: nested more than {MAX_DEPTH} deep at line "
                        f"{event.start_mark.line + 1}; a config is a few levels of mappings and "
                        "lists, so flatten it"
                    )
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        return  # not valid YAML: the loader says where


def _is_section(tp):
    return isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")


def _unknown(key, valid, where):
    hint = did_you_mean(repr(key), [repr(v) for v in valid])
    hint = f"; {hint}" if hint else ""
    return ConfigError(f"{where}: unknown key {key!r}{hint} Valid keys: {', '.join(valid)}")


def _build(cls, raw, origin, prefix="", overridden=None):
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{origin}: {prefix.rstrip('.') or 'top level'} must be a mapping, got {shown(raw)}"
        )
    hints = typing.get_type_hints(cls)
    valid = [f.name for f in key_fields(cls)]
    overridden = overridden or {}
    kwargs = {}
    for key, value in raw.items():
        path = f"{prefix}{key}"
        if key not in valid:
            raise _unknown(str(key), valid, f"{origin}: {path}")
        f = next(f for f in fields(cls) if f.name == key)
        if _is_section(hints[key]):
            section = {} if value is None else value  # `train:` written empty: the defaults
            kwargs[key] = _build(hints[key], section, origin, path + ".", overridden)
        else:
            # A value from the command line is blamed on the override that gave it, not the file.
            where = f"override {overridden[path]}" if path in overridden else f"{origin}: {path}"
            kwargs[key] = convert_value(
                value, hints[key], f.metadata.get("choices"), where, f.metadata.get("parse")
            )
    return cls(**kwargs)


def _set_override(raw, override, origin="defaults"):
    """Apply one `key.path=value` to the raw nested dict (the value parsed as YAML); a section
    that the file `origin` gives as a value (`train: 5`) is an error, not replaced."""
    if "=" not in override:
        raise ConfigError(f"override {override!r}: expected key.path=value, e.g. train.lr=1e-3")
    path, text = override.split("=", 1)
    keys = path.strip().split(".")
    cls, node = Config, raw
    for i, key in enumerate(keys):
        valid = [f.name for f in key_fields(cls)]
        where = f"override {path}"
        if key not in valid:
            meant = full_key(path) if i == 0 else None
            if meant:
                raise ConfigError(
                    f"{where}: {path!r} is not a top-level key; did you mean {meant}={text}?"
                )
            raise _unknown(key, valid, where)
        tp = typing.get_type_hints(cls)[key]
        last = i == len(keys) - 1
        if _is_section(tp):
            if last:
                raise ConfigError(
                    f"{where}: {key!r} is a section; set one of its keys, e.g. "
                    f"{key}.{fields(tp)[0].name}=..."
                )
            if node.get(key) is None:  # not in the file, or written empty (`train:`)
                node[key] = {}
            elif not isinstance(node[key], dict):
                section = ".".join(keys[: i + 1])
                raise ConfigError(
                    f"{origin}: {section} must be a mapping, got {shown(node[key])}, so override "
                    f"{path} has no section to go in; write the keys of {section} below it"
                )
            node, cls = node[key], tp
        elif not last:
            raise ConfigError(f"{where}: {key!r} is not a section")
        elif tp is list:  # a YAML list, or the field's own written form (a string)
            _check_depth(text, where)
            try:
                node[key] = yaml.safe_load(text) if text.strip() else ""
            except yaml.YAMLError as e:
                raise ConfigError(
                    f"{where}: {shown(text)} is not valid YAML ({getattr(e, 'problem', e)})"
                ) from None
        else:
            # The text as typed: the field's type converts it (convert_value), as a config file's
            # value is; YAML would read out_dir=0123 as the number 83 and `on` as True.
            node[key] = text


def load_config(path: str | Path | None = DEFAULT_CONFIG, overrides=()) -> Config:
    """Read a YAML config and apply `key.path=value` overrides. With no path, configs/default.yaml,
    as `python train.py` reads it; None: the schema's built-in defaults alone (a config built from
    scratch, as the tests build theirs). A relative path is read against the current folder, else
    as the project's built-in config of that name (configs/paths.py). The Config remembers what
    was read (its origin), from which Config.run_dir decides where the run goes."""
    raw, origin, found = {}, "defaults", None
    if path is not None:
        origin = "configs/default.yaml" if path == DEFAULT_CONFIG else str(path)
        found = config_file(path)
        if found is None:
            looked = " or ".join(str(p) for p in config_candidates(path))
            raise ConfigError(f"{origin}: no such config file (looked for {looked})")
        try:
            text = found.read_text(encoding="utf-8")
            _check_depth(text, origin)
            raw = yaml.load(text, Loader=_UniqueKeyLoader) or {}
        except UnicodeDecodeError as e:
            raise ConfigError(
                f"{origin}: not UTF-8 text (byte {e.start} is "
                f"{e.object[e.start]:#04x}); save the config file as UTF-8"
            ) from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise ConfigError(
                f"{origin}: not valid YAML{where}: {getattr(e, 'problem', e)}"
            ) from None
    if overrides and not isinstance(raw, dict):  # else _build says so, naming the file
        raise ConfigError(f"{origin}: top level must be a mapping, got {shown(raw)}")
    own = copy.deepcopy(raw)  # the file's own values, before the overrides
    overridden = {}  # key path -> the override as typed (the last, where one is given twice)
    for override in overrides:
        _set_override(raw, override, origin)
        overridden[override.split("=", 1)[0].strip()] = override.strip()
    config = _build(Config, raw, origin, overridden=overridden)
    check(config, origin, overridden)
    given = set(overridden)
    chosen = "out_dir" in given or (
        found is not None
        and not is_default_config(found)
        and isinstance(own, dict)
        and "out_dir" in own
    )
    config.origin = Origin(found, _own_data(own, origin), config.out_dir, chosen)
    return config


def _own_data(raw, origin):
    """(data.source, data.mix) as a config file sets them alone, or None where they do not build
    without the overrides."""
    try:
        data = _build(DataConfig, raw.get("data") or {}, origin, "data.")
    except (ConfigError, AttributeError):  # AttributeError: a top level that is not a mapping
        return None
    return data.source, data.mix


def to_yaml(config) -> str:
    """The config as YAML, out_dir as the run's folder (Config.run_dir)."""
    return yaml.safe_dump({**config_dict(config), "out_dir": config.run_dir}, sort_keys=False)


def key_paths(cls=None, prefix=""):
    """Every settable key as "section.name" (or "name" at the top level), with its field."""
    cls = cls or Config
    hints = typing.get_type_hints(cls)
    out = []
    for f in key_fields(cls):
        if _is_section(hints[f.name]):
            out += key_paths(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", f, hints[f.name]))
    return out


def full_key(name):
    """The key path a bare or dashed name most likely means ("max_iters", "max-iters" ->
    "train.max_iters"), or None."""
    name = name.strip().replace("-", "_")
    paths = [path for path, _, _ in key_paths()]
    if name in paths:
        return name
    return next((path for path in paths if path.rsplit(".", 1)[-1] == name), None)


def describe(shipped=None, shipped_name="configs/default.yaml"):
    """Every key with its type, built-in default and description, for --help; where the config
    `shipped` (the one train.py uses when none is given) sets another value, that too."""
    flat = {}
    if shipped is not None:
        flat = flatten(config_dict(shipped))
    lines = []
    for path, f, tp in key_paths():
        name = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
        if optional_of(tp) is not None:
            name = optional_of(tp).__name__ + " or null"
        default = f.default if f.default is not MISSING else f.default_factory()  # a list: []
        choices = f.metadata.get("choices")
        kind = "|".join(choices) if choices else name
        note = ""
        if path in flat and flat[path] != default:
            note = f" [{shipped_name}: {flat[path]!r}]"
        lines.append(f"  {path:<24} {kind:<22} default {default!r:<14} {f.metadata['help']}{note}")
    return "\n".join(lines)


def flatten(tree, prefix=""):
    """A nested dict as {"section.key": value}."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out

"""data.mix as it is written: a list of {source, weight[, start_weight]} in YAML, or
SOURCE:WEIGHT,SOURCE:WEIGHT on the command line, parsed into checked MixEntry values; and the
short name each source goes by. data/mix.py prepares the mixture these entries describe."""

import math
from dataclasses import dataclass
from pathlib import Path

from data.sources import NAMED_CORPORA

MIX_FORM = (
    "SOURCE:WEIGHT,SOURCE:WEIGHT (e.g. tinyshakespeare:0.8,pronouns:0.2; a curriculum: "
    "tinyshakespeare:0..0.8,pronouns:1..0.2)"
)


@dataclass(frozen=True)
class MixEntry:
    source: str
    weight: float  # as given, at the last step; Mixture normalises
    start_weight: float | None = None  # at the first step; None: the same as weight


def parse_mix(value: object) -> list[MixEntry]:
    """data.mix as YAML gives it (a list of {source, weight} mappings) or as the command line
    writes it (MIX_FORM), checked: weights finite and > 0, sources named apart (source_name).
    An empty value is an empty list (no mix: data.source is the data)."""
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        entries = [_parse_item(item.strip()) for item in value.split(",")]
    elif isinstance(value, list):
        entries = [_entry_of(item) for item in value]
    else:
        raise ValueError(
            f"data.mix: expected a list of {{source, weight}} or {MIX_FORM}, got {value!r}"
        )
    if all(e.start_weight == 0 for e in entries):
        raise ValueError(
            "data.mix: every start weight is 0; give at least one source a start weight above 0"
        )
    names = {}
    for entry in entries:
        name = source_name(entry.source)
        if name in names:
            raise ValueError(
                f"data.mix: {names[name]} and {entry.source} are both named {name!r}; "
                "give each source once, with distinct file names"
            )
        names[name] = entry.source
    return entries


def mix_entries(mix: object, source: str) -> list[MixEntry]:
    """A run's sources: data.mix, or else data.source as a mix of one."""
    return parse_mix(mix) or [MixEntry(source, 1.0)]


def _parse_item(item: str) -> MixEntry:
    source, colon, weight = item.rpartition(":")
    if not colon:
        raise ValueError(f"data.mix: {item!r} has no weight; write {MIX_FORM}")
    if not source.strip():
        raise ValueError(f"data.mix: {item!r} has no source before its weight; write {MIX_FORM}")
    start, dots, end = weight.rpartition("..")
    try:
        numbers = [float(end)] + ([float(start)] if dots else [])
    except ValueError:
        raise ValueError(
            f"data.mix: {item!r} has no weight after its last colon; write {MIX_FORM}"
        ) from None
    return _checked(source.strip(), *numbers)


def _entry_of(item) -> MixEntry:
    if not isinstance(item, dict) or not {"source", "weight"} <= set(item) <= {
        "source",
        "weight",
        "start_weight",
    }:
        raise ValueError(
            f"data.mix: each entry is a mapping with the keys source and weight (and maybe "
            f"start_weight), got {item!r}"
        )
    numbers = [item["weight"]] + ([item["start_weight"]] if "start_weight" in item else [])
    for number in numbers:
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ValueError(
                f"data.mix: the weights of {item['source']} must be numbers, got {number!r}"
            )
    return _checked(str(item["source"]), *map(float, numbers))


def _checked(source: str, weight: float, start_weight: float | None = None) -> MixEntry:
    if not math.isfinite(weight) or weight <= 0:
        raise ValueError(
            f"data.mix: the weight of {source} is {weight}; every weight must be a "
            "number above 0 (drop a source to leave it out)"
        )
    if start_weight is not None and (not math.isfinite(start_weight) or start_weight < 0):
        raise ValueError(
            f"data.mix: the start weight of {source} is {start_weight}; it must be a "
            "number of 0 or more"
        )
    return MixEntry(source, weight, start_weight)


def source_name(source: str) -> str:
    """The short name of a source on eval lines and in metrics.jsonl: a named corpus as it is,
    else the file's stem or the folder's name (`hf:` sources: the file's stem)."""
    if source in NAMED_CORPORA:
        return source
    return Path(source.removeprefix("hf:").rstrip("/\\")).stem or source

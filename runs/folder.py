"""The files of a run folder besides the checkpoint that more than one program reads:
metrics.jsonl, which training writes and the page draws, and probe.json, the probe's result that
`generate.py --probe` saves for the page of the same checkpoint, with report.txt beside it: the
same result in words, the full report that `--probe --summary` leaves out of the terminal.

A saved result is never silently made poorer: a run that measures fewer parts than probe.json
holds (`--probe --no-causal` after `--probe --patch --circuit`) merges into it (save_probe)."""

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from analysis.conform import mismatches, outside_model
from analysis.results import PARTS, CheckpointId, SavedStudy, Study, study_parts
from data import pronouns
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix
from model.checkpoint import CKPT_NAME
from model.hooked import HookedGPT
from storage.atomic import write_atomic
from storage.json_read import parse_json, read_json, regular_text

METRICS_FILE = "metrics.jsonl"  # one JSON object per line, each with "step"
PROBE_FILE = "probe.json"
# The layout of a saved probe result (analysis.results.SavedStudy). A file of another version,
# or of none (saved before versions), is not read: the result is measured again, never
# half-read. Raise it with any change of the result's types.
PROBE_FORMAT = 2
REPORT_FILE = "report.txt"  # probe.json's full text report, written with it
META_FILE = "meta.json"  # the data and the tokenizer's file name
CONFIG_FILE = "config.yaml"  # the resolved training config
LOSS_PLOT, PROBE_PLOT = "loss.png", "probe.png"


@dataclass
class Run:
    """What runs.loading.load_run returns: everything that sampling and the analyses read."""

    model: HookedGPT  # a GPT with TransformerLens's calls on top (model.hooked)
    tokenizer: object
    meta: dict
    ckpt: dict


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a metrics.jsonl file, a line torn by a kill (or any line that is not one
    JSON object: nested past reading, a key written twice) left out; [] when there is no such
    regular file (a Hugging Face model has none; a FIFO is not waited on)."""
    try:
        lines = regular_text(path).splitlines()
    except (OSError, ValueError):  # ValueError: not a regular file, not UTF-8
        return []
    records = []
    for line in lines:
        try:
            record = parse_json(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def probe_path(folder: str | Path | None) -> Path | None:
    """Where the run folder `folder` keeps its probe result; None for a model that is not a
    train.py run folder (a Hugging Face download or a nanoGPT run is not ours to write into)."""
    folder = Path(folder) if folder else None
    ours = folder and (folder / CKPT_NAME).is_file() and (folder / META_FILE).is_file()
    return folder / PROBE_FILE if ours else None


def checkpoint_id(run: "Run") -> CheckpointId:
    """What tells one checkpoint of a run folder from the next: a saved probe result is this
    checkpoint's only if these match."""
    return {"step": run.ckpt.get("step"), "best_val_loss": run.ckpt.get("best_val_loss")}


def story_mix(run: "Run") -> StoryMix:
    """The pronoun language `run` was trained in, whose dev and test sets the probe scores: its
    config's data.pronouns (the config the checkpoint records, as config.yaml); the default
    language where the config has no such section (a run from before the setting, a GPT-2, a
    nanoGPT run). ValueError (one line) for settings this version does not know."""
    config = run.ckpt.get("config")
    data = config.get("data") if isinstance(config, dict) else None
    settings = data.get("pronouns") if isinstance(data, dict) else None
    if not isinstance(settings, dict):
        return DEFAULT_MIX
    try:
        return StoryMix(**settings)
    except TypeError:  # a key of a newer version: scoring the default would be wrong
        raise ValueError(
            f"the checkpoint's data.pronouns holds settings this version does not know "
            f"({', '.join(sorted(settings))}); update the project to read its language"
        ) from None


@functools.cache
def examples_id(mix: StoryMix = DEFAULT_MIX) -> str:
    """What tells the examples of a saved result from others: a hash of the dev and test sets of
    the language `mix` (the run's, story_mix) and the natural sentences (the sets
    probe.json is of), which a change of the generator or the lexicon changes. Made once a
    process (drawing the sets takes a fifth of a second, and a save reads the file it merges
    into, then writes)."""
    splits = [pronouns.examples(split, mix=mix) for split in ("dev", "test")]
    sets = [*splits, pronouns.natural()]
    return hashlib.sha256(repr(sets).encode()).hexdigest()[:16]  # strs, ints and tuples


class Kept(NamedTuple):
    """What save_probe wrote, and what it kept or let go of."""

    study: SavedStudy  # probe.json now
    # The parts (analysis.results.PARTS, "natural") of the study saved (the natural sentences'
    # where it was theirs) kept from the file before, not measured this time.
    kept: list[str]
    dropped: list[str]  # parts of a file of another checkpoint, examples or format, now gone


def save_probe(
    run: "Run", folder: str | Path | None, result: Study, natural: bool = False
) -> Kept | None:
    """Save `result` of the run loaded from `folder` there: the built-in sets' study, or with
    `natural` the natural sentences' (kept beside the built-in sets': None, nothing written,
    where there are none for this checkpoint); None for a folder that is not a run folder.
    ValueError (one line) if it cannot be written.

    Where probe.json holds this checkpoint's study of the same examples (saved_probe), the
    result merges into it: its parts replace the same parts, and those it did not measure stay
    (the natural sentences' too, merged the same way), each with the time it was measured
    ("measured"). Merged rather than written beside it: the page and report.txt read one file,
    and every part kept is of this checkpoint and these examples, as measured. The causal tests
    stay only while the best head they single out is the new probe's. A file of another
    checkpoint, examples or format is replaced (Kept.dropped names its parts that are gone)."""
    path = probe_path(folder)
    if path is None:
        return None
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    before = saved_probe(run, folder)
    if natural and before is None:
        return None
    if natural:
        level = merged(before.get("natural"), result, now)
        study = {**before, "natural": level}
    else:
        study = level = merged(before, result, now)
    ours = examples_id(story_mix(run))
    study.update(checkpoint=checkpoint_id(run), format_version=PROBE_FORMAT, examples=ours)
    gone = [] if before is not None else _parts(_raw(path))  # a file it could not merge into
    dropped = [p for p in gone if p not in _parts(study)]
    write_atomic(path, json.dumps(study) + "\n")
    kept = [p for p in _parts(level) if p not in study_parts(result)]
    return Kept(study, kept, dropped)


def merged(saved: Study | None, new: Study, now: str) -> Study:
    """`new` with the parts of `saved` it did not measure (see save_probe), "measured" telling
    when each was."""
    out = dict(new)
    was = dict(saved.get("measured", {})) if saved else {}
    measured = study_parts(new)
    for part, keys in PARTS.items() if saved else ():
        if part in measured or (part == "causal" and not _same_head(saved, new)):
            continue
        out.update({k: saved[k] for k in keys if k in saved})
    if saved and "natural" in saved and "natural" not in new:
        out["natural"] = saved["natural"]
    if saved and "patching" not in measured and "patching" in saved.get("choice", {}):
        if "choice" in new:  # the choice twins' patching, measured with --patch: kept
            out["choice"] = {**new["choice"], "patching": saved["choice"]["patching"]}
    out["measured"] = {
        **{p: was[p] for p in study_parts(out) if p in was},
        **dict.fromkeys(measured, now),
    }
    return out


def _same_head(saved: Study, new: Study) -> bool:
    """Whether the causal tests saved single out the new probe's best head."""
    head = saved.get("causal", {}).get("best_head", {})
    best = new["best_head"]
    return (head.get("layer"), head.get("head")) == (best["layer"], best["head"])


def _parts(study: dict) -> list[str]:
    """The parts a saved file holds (the natural sentences' as one, "natural"); [] for none."""
    if not isinstance(study, dict):
        return []
    own = study_parts(study) if "best_head" in study else []
    return own + (["natural"] if "natural" in study else [])


def _raw(path: Path) -> object:
    """probe.json as JSON, whatever its checkpoint or layout; None where it cannot be read."""
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def save_report(folder: str | Path | None, text: str) -> Path | None:
    """Write `text`, the full report of the probe result just saved, beside it in the run folder
    `folder`; its path, or None for a folder that is not a run folder (nothing is written).
    ValueError (one line) if it cannot be written."""
    path = probe_path(folder)
    if path is None:
        return None
    return write_atomic(path.with_name(REPORT_FILE), text if text.endswith("\n") else text + "\n")


def saved_probe(run: "Run", folder: str | Path | None) -> SavedStudy | None:
    """The probe result saved in the run folder for this very checkpoint and these examples
    (examples_id) in this PROBE_FORMAT, of its type to the last key and every number in its
    range, or None (then it is measured again)."""
    path = probe_path(folder)
    if path is None:
        return None  # no run folder
    try:
        saved = read_json(path)
    except (OSError, ValueError):  # no file, not a regular file (a FIFO), not JSON
        return None
    if not isinstance(saved, dict) or saved.get("checkpoint") != checkpoint_id(run):
        return None  # a probe of an earlier checkpoint: this one may have other heads
    if saved.get("format_version") != PROBE_FORMAT:
        return None  # another layout: measured again rather than half-read
    ours = examples_id(story_mix(run))
    if saved.setdefault("examples", ours) != ours:  # none: saved before ids
        return None  # of other examples: the generator or the lexicon has changed since
    if mismatches(saved, SavedStudy):
        return None  # e.g. edited by hand
    sizes = run.ckpt.get("model_config") or {}  # load_run always gives it
    if "n_layer" in sizes and outside_model(saved, sizes["n_layer"], sizes["n_head"]):
        return None  # another model's
    return saved

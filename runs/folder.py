"""The files of a run folder besides the checkpoint that more than one program reads:
metrics.jsonl, which training writes and the page draws, and probe.json, the probe's result that
`generate.py --probe` saves for the page of the same checkpoint, with report.txt beside it: the
same result in words, the full report that `--probe --summary` leaves out of the terminal."""

import json
from dataclasses import dataclass
from pathlib import Path

from analysis.conform import mismatches
from analysis.results import CheckpointId, SavedStudy, Study
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


def save_probe(run: "Run", folder: str | Path | None, result: Study) -> None:
    """Save a probe result of the run loaded from `folder` there, with its checkpoint_id;
    nothing for a folder that is not a run folder. ValueError (one line) if it cannot be written."""
    path = probe_path(folder)
    if path is not None:
        saved = {**result, "checkpoint": checkpoint_id(run), "format_version": PROBE_FORMAT}
        write_atomic(path, json.dumps(saved) + "\n")


def save_report(folder: str | Path | None, text: str) -> Path | None:
    """Write `text`, the full report of the probe result just saved, beside it in the run folder
    `folder`; its path, or None for a folder that is not a run folder (nothing is written).
    ValueError (one line) if it cannot be written."""
    path = probe_path(folder)
    if path is None:
        return None
    return write_atomic(path.with_name(REPORT_FILE), text if text.endswith("\n") else text + "\n")


def saved_probe(run: "Run", folder: str | Path | None) -> SavedStudy | None:
    """The probe result saved in the run folder for this very checkpoint in this PROBE_FORMAT,
    of its type to the last key and every number in its range, or None (then it is measured
    again)."""
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
    return None if mismatches(saved, SavedStudy) else saved  # e.g. edited by hand

"""`bench.py resolve`: how long a config's training takes until the live probe finds every kind
resolved (analysis.acquisition.first_resolved: each kind's choice accuracy and flip at their
targets at one probe). The run trains in this process with the lab's watchers, as train.py
does, and stops at that probe (lab/resolve_stop.py); its time is the probe record's `seconds`,
the training's own (data preparation and the model's building left out), and the whole call's
beside it."""

import argparse
import contextlib
import math
import sys
import tempfile
import time
from pathlib import Path

from analysis.acquisition import choice_at, first_resolved, kind_courses
from configs.load import load_config
from lab.resolve_stop import StopWhenResolved
from lab.run import train
from runs.folder import METRICS_FILE, read_metrics

RESOLVE_CONFIG = "configs/default.yaml"


def bench_resolve(args):
    """Train args.config (with the overrides of args.set) until resolved at args.accuracy and
    args.flip, in a folder of its own that is removed after, its lines on stderr; resolve_rows'
    rows."""
    with tempfile.TemporaryDirectory(prefix="bench-resolve-") as out:
        try:
            config = load_config(args.config, [*args.set, f"out_dir={out}"])
        except ValueError as e:
            sys.exit(f"error: {e}")
        started = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the table's, or the JSON's
            stop = StopWhenResolved(args.accuracy, args.flip)
            train(config, force=True, watchers=[stop], temporary=True)
        wall = time.perf_counter() - started
        records = read_metrics(Path(out) / METRICS_FILE)
    return resolve_rows(args.config, records, args.accuracy, args.flip) | {
        "resolve wall s (whole call: data, model, training)": wall
    }


def share(text: str) -> float:
    """An argparse type: a target share, a finite number in [0, 1] (--accuracy, --flip)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # nan fails both
        raise argparse.ArgumentTypeError(f"{text!r} is not a share; give a number from 0 to 1")
    return value


def resolve_rows(config, records, accuracy, flip):
    """The rows of one run's metrics.jsonl records: where it resolved, after how many training
    seconds, and each kind's accuracy and flip there; or "not resolved in N steps" and each
    kind's best probe (the nearest to both targets)."""
    found = first_resolved(records, accuracy, flip)
    name = f"resolve ({config}, accuracy >= {accuracy:.2f}, flip >= {flip:.2f})"
    if found is not None:
        row = {name: f"resolved at step {found['step']:,}"}
        if found.get("seconds") is not None:
            row["resolve wall s (training, until resolved)"] = found["seconds"]
        for kind in found["probe_by_kind"]:
            point = choice_at(found, kind)
            said = "no choice twins" if point is None else _pair(point)
            row[f"resolve {kind}: accuracy, flip"] = said
        return row
    steps = max((r["step"] for r in records if isinstance(r.get("step"), int)), default=0)
    row = {name: f"not resolved in {steps:,} steps"}
    for kind, course in kind_courses(records, accuracy, flip).items():
        said = "no choice twins" if course is None else f"best {_pair(course.best)}"
        row[f"resolve {kind}: accuracy, flip"] = said
    return row


def _pair(point):
    return f"{point.accuracy:.2f}, {point.flip:.2f} at step {point.step:,}"

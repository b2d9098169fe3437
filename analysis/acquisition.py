"""When each kind of sentence is learned during training, from the live probe's records in
metrics.jsonl (lab/live_probe.py).

Each probe record's `probe_by_kind` holds, for each kind (agreement, role, meaning), the best
head's cand@1 on its items and the model's choice accuracy and flip on its choice twins
(analysis/choice.py). A kind is resolved at a probe where its accuracy is at least ACCURACY and
its flip at least FLIP; a run is resolved at the first probe where every kind it measures is.
A kind without choice twins (accuracy None) has no choice to measure: it is left out rather than
left unresolved, so that a set whose role sentences found no twin can still resolve. Records of
runs trained before probe_by_kind have none of this: every function here returns nothing for
them. Numbers only: reports/kind_curve.py says them in words.
"""

from typing import NamedTuple

from checks import finite_number
from data.pronouns import DECIDED_BY

ACCURACY = 0.90  # the choice accuracy a learned kind reaches
FLIP = 0.70  # and its flip (right on the example and on its twin; chance is 0.25)


class Point(NamedTuple):
    """One kind's choice at one probe."""

    step: int
    accuracy: float
    flip: float


class Course(NamedTuple):
    """One kind's choice over a run's probes: when it was first resolved and what became of
    it, or, never resolved, the probe nearest to it."""

    kind: str
    first: Point | None  # the first probe at both targets; None: never resolved
    dropped: int | None  # the first step after `first` below a target; None: held throughout
    last: Point  # the last probe that measured the kind
    best: Point  # the probe nearest both targets (the largest of accuracy/ACCURACY, flip/FLIP's
    # smaller one; the earliest of equals)
    best_accuracy: Point  # the probe of the highest accuracy (the earliest of equals)
    best_flip: Point  # the probe of the highest flip (the earliest of equals), on its own step


def kind_probes(records: list) -> list[dict]:
    """The probe records that carry a probe_by_kind and a step, in their order."""
    return [
        r
        for r in records
        if isinstance(r, dict)
        and isinstance(r.get("probe_by_kind"), dict)
        and finite_number(r.get("step"))
    ]


def kinds_of(probes: list[dict]) -> list[str]:
    """The kinds the records name, in DECIDED_BY's order."""
    named = {kind for r in probes for kind in r["probe_by_kind"]}
    return [kind for kind in DECIDED_BY if kind in named]


def choice_at(record: dict, kind: str) -> Point | None:
    """The kind's accuracy and flip at this probe, or None where it has none (no twin, or a
    record of another shape)."""
    row = record["probe_by_kind"].get(kind)
    if not isinstance(row, dict) or not (
        finite_number(row.get("accuracy")) and finite_number(row.get("flip"))
    ):
        return None
    return Point(record["step"], row["accuracy"], row["flip"])


def reaches(point: Point, accuracy: float = ACCURACY, flip: float = FLIP) -> bool:
    """Whether a kind's choice at a probe reaches both targets."""
    return point.accuracy >= accuracy and point.flip >= flip


def kind_course(
    probes: list[dict], kind: str, accuracy: float = ACCURACY, flip: float = FLIP
) -> Course | None:
    """The kind's Course over kind_probes' records; None where no probe measured its choice."""
    points = [p for p in (choice_at(r, kind) for r in probes) if p is not None]
    if not points:
        return None
    at = next((i for i, p in enumerate(points) if reaches(p, accuracy, flip)), None)
    first = points[at] if at is not None else None
    below = [p for p in points[at:] if not reaches(p, accuracy, flip)] if first else []
    best = max(points, key=lambda p: min(p.accuracy / accuracy, p.flip / flip))
    dropped = below[0].step if below else None
    best_accuracy = max(points, key=lambda p: p.accuracy)
    best_flip = max(points, key=lambda p: p.flip)
    return Course(kind, first, dropped, points[-1], best, best_accuracy, best_flip)


def kind_courses(records: list, accuracy: float = ACCURACY, flip: float = FLIP) -> dict:
    """{kind: its Course, or None where the kind has no choice twin} for each kind the records'
    probes name; {} for records without probe_by_kind."""
    probes = kind_probes(records)
    return {kind: kind_course(probes, kind, accuracy, flip) for kind in kinds_of(probes)}


def first_resolved(records: list, accuracy: float = ACCURACY, flip: float = FLIP) -> dict | None:
    """The first probe record at which every kind it measures (accuracy not None) has choice
    accuracy >= `accuracy` and flip >= `flip`: its "step", and its "seconds" (the training's
    seconds so far) where the run logged them. None if no probe is resolved, or none measures
    any kind."""
    for record in kind_probes(records):
        points = [choice_at(record, kind) for kind in record["probe_by_kind"]]
        measured = [p for p in points if p is not None]
        if measured and all(reaches(p, accuracy, flip) for p in measured):
            return record
    return None

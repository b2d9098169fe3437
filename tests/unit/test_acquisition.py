"""When each kind is learned, from hand-written probe records: first_resolved, each kind's course
in words, and the curve of a run logged before probe_by_kind drawn as it always was."""

import pytest

from analysis.acquisition import first_resolved, kind_courses
from lab import plots
from reports.curve import curve_panels, curve_section
from reports.kind_curve import kind_lines, kind_words

BASELINES = {"random": 0.4, "first": 0.5, "nearest": 0.4}


def probe(step, seconds=None, **kinds):
    """A probe record as the live probe logs it; each kind given as (accuracy, flip), or None
    for a kind without twins."""
    by_kind = {
        kind: {"examples": 10, "cand_at_1": 0.5, "twins": 0 if got is None else 8}
        | (
            {"accuracy": None, "flip": None}
            if got is None
            else dict(zip(("accuracy", "flip"), got))
        )
        for kind, got in kinds.items()
    }
    record = {
        "step": step,
        "probe_best": 0.6,
        "probe_best_head": [0, 1],
        "probe_heads": [[0.5, 0.6]],
        "probe_baselines": BASELINES,
        "probe_by_kind": by_kind,
    }
    return record | ({"seconds": seconds} if seconds is not None else {})


def test_first_resolved_is_the_first_probe_where_every_measured_kind_reaches_both():
    never = [probe(100, agreement=(0.95, 0.9), meaning=(0.95, 0.69))]
    assert first_resolved(never) is None  # meaning's flip is short by 0.01
    records = [
        {"step": 50, "loss": 3.0},
        probe(100, 12.5, agreement=(0.95, 0.9), meaning=(0.8, 0.5)),
        probe(200, 30.0, agreement=(0.9, 0.7), meaning=(0.91, 0.72)),  # at the targets: counts
        probe(300, 45.0, agreement=(0.6, 0.3), meaning=(0.95, 0.9)),  # lost after: still 200
    ]
    found = first_resolved(records)
    assert (found["step"], found["seconds"]) == (200, 30.0)
    assert first_resolved(records, accuracy=0.95, flip=0.9) is None
    assert first_resolved(records, accuracy=0.8, flip=0.5)["step"] == 100


def test_a_kind_without_twins_is_left_out_and_a_probe_measuring_none_never_resolves():
    records = [
        probe(100, role=None, meaning=(0.5, 0.2)),
        probe(200, role=None, meaning=(0.92, 0.8)),
    ]
    assert first_resolved(records)["step"] == 200 and "seconds" not in first_resolved(records)
    assert first_resolved([probe(100, role=None)]) is None
    assert kind_courses(records)["role"] is None


def test_old_records_without_probe_by_kind_never_resolve_and_draw_as_before(monkeypatch, tmp_path):
    old = [{k: v for k, v in probe(s).items() if k != "probe_by_kind"} for s in (10, 100)]
    assert first_resolved(old) is None and kind_courses(old) == {} and kind_words(old) == []
    assert kind_lines(old) == [] and len(curve_panels(old)) == 1
    section = curve_section(old)
    assert section.count("<svg class=") == 1 and "acquired" not in section
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    plots.plot_probe(old, tmp_path / "probe.png")
    [fig] = drawn
    assert len(fig.axes) == 1 and len(fig.legends) == 1  # one axes, its legend below: as before


def course_records():
    """Four kinds of course over five probes: held, lost, dipped and back, never reached."""
    steps = (100, 1_200, 2_400, 4_000, 6_000)
    courses = {
        "agreement": [(0.5, 0.3), (0.95, 0.8), (0.96, 0.85), (0.8, 0.5), (0.71, 0.4)],
        "role": [(0.5, 0.2), (0.62, 0.42), (0.6, 0.4), (0.55, 0.3), (0.5, 0.3)],
        "meaning": [(0.5, 0.2), (0.6, 0.3), (0.93, 0.78), (0.94, 0.8), (0.95, 0.81)],
    }
    return [
        probe(step, **{kind: values[i] for kind, values in courses.items()})
        for i, step in enumerate(steps)
    ]


def test_each_kinds_course_in_one_line():
    agreement, role, meaning = kind_words(course_records())
    targets = "(targets: accuracy 90%, flip 70%)"
    assert meaning == (
        f"meaning: accuracy 93% and flip 78% {targets} reached first at step 2,400; held to "
        "the end (95%, 81%)"
    )
    assert agreement == (
        f"agreement: accuracy 95% and flip 80% {targets} reached at step 1,200, lost by the "
        "end: 71% and 40% at step 6,000"
    )
    assert role.startswith(f"role: not reached {targets}")
    assert "best accuracy 62% at step 1,200, best flip 42% at step 1,200" in role


def test_the_closing_words_best_values_are_the_records_maxima_each_at_its_own_step():
    # role's best accuracy (0.67, step 200) and best flip (0.38, step 800) come at different
    # probes; the line names each at its own step, as metrics.jsonl holds them.
    values = [(0.5, 0.1), (0.67, 0.2), (0.6, 0.3), (0.39, 0.38), (0.45, 0.3)]
    records = [probe(step, role=v) for step, v in zip((0, 200, 400, 800, 1200), values)]
    [line] = kind_words(records)
    rows = [r["probe_by_kind"]["role"] for r in records]
    best_acc = max(rows, key=lambda r: r["accuracy"])
    best_flip = max(rows, key=lambda r: r["flip"])
    assert f"best accuracy {best_acc['accuracy']:.0%} at step 200" in line
    assert f"best flip {best_flip['flip']:.0%} at step 800" in line


@pytest.mark.parametrize(
    "values, said",
    [
        ([(0.95, 0.8), (0.5, 0.2), (0.92, 0.75)], "first at step 1; below at step 2, back by"),
        ([(0.5, 0.2), (0.5, 0.2), (0.92, 0.75)], "first at the last probe, step 3"),
        ([None, None, None], "role: no choice twins"),
    ],
)
def test_a_kind_dipped_and_back_reached_at_the_end_or_without_twins_says_so(values, said):
    records = [probe(step, role=v) for step, v in zip((1, 2, 3), values)]
    [line] = kind_words(records)
    assert said in line

"""Each reason's acquisition curve during training, and the same in words: for each reason a
sentence gives for its antecedent (agreement, role, meaning: a colour each) the best head's
cand@1 on its items, the model's choice accuracy and its flip on the reason's choice twins (a
line style each), against step, with the targets (analysis/acquisition.py's ACCURACY and FLIP)
as flat marks, so that a reader sees when each reason is learned and whether it is lost later.

From the live probe's records in metrics.jsonl (their `probe_by_kind`); records of runs trained
before it have none, and then there is no panel and no words. The panel is drawn below the
heads' in probe.png and as a second SVG in the page's training section
(reports/curve_draw.py's drawing, both).
"""

import html

from analysis.acquisition import (
    ACCURACY,
    FLIP,
    Course,
    kind_courses,
    kind_probes,
    kinds_of,
    reaches,
)
from checks import finite_number
from reports.curve_draw import Line, Panel, curve_legend, curve_svg
from reports.glossary import term

KIND_COLOURS = {"agreement": "#1b9e77", "role": "#7570b3", "meaning": "#e7298a"}  # no orange
OTHER_KIND = "#666"
TARGET = "#777"
# (the key in probe_by_kind, the measure's name and SVG class, its line style and width)
MEASURES = (
    ("cand_at_1", "cand@1", "cand", "-", 1.5),
    ("accuracy", "accuracy", "accuracy", "--", 2),
    ("flip", "flip", "flip", ":", 2),
)
KINDS_SAID = "each reason's best-head cand@1, choice accuracy and flip against step"


def _value(row, key):
    """row[key] where row is a dict and that a finite number, else None."""
    x = row.get(key) if isinstance(row, dict) else None
    return x if finite_number(x) else None


def _measure_line(probes, kind, key, name, css, ls, lw):
    """One kind's line of one measure, over the probes where it is a number; None where none."""
    points = [(r["step"], _value(r["probe_by_kind"].get(kind), key)) for r in probes]
    points = [(step, v) for step, v in points if v is not None]
    if not points:
        return None
    x, y = [s for s, _ in points], [v for _, v in points]
    style = {"color": KIND_COLOURS.get(kind, OTHER_KIND), "lw": lw, "ls": ls}
    return Line(
        f"kind {css}",
        f"{kind}-{css}",
        f"{kind}, {name}: {y[-1]:.1%} at step {x[-1]:,}",
        x,
        y,
        {**style, "label": f"{kind} {name}"},
    )


def kind_lines(records: list) -> list[Line]:
    """The panel's lines, in legend order: each kind's cand@1, accuracy and flip, then the two
    targets; [] where no record holds probe_by_kind."""
    probes = kind_probes(records)
    lines = [
        _measure_line(probes, kind, *measure) for kind in kinds_of(probes) for measure in MEASURES
    ]
    lines = [line for line in lines if line is not None]
    if not lines:
        return []
    for measure, value, ls in (("accuracy", ACCURACY, "--"), ("flip", FLIP, ":")):
        said = f"target: {measure} {value:.0%}"
        style = {"color": TARGET, "lw": 1, "ls": ls, "label": said}
        lines.append(Line("target", f"target-{measure}", said, [], [value], style))
    return lines


def kind_panel(records: list) -> Panel | None:
    """The kinds' panel of probe.png and of the page; None where no record holds probe_by_kind."""
    lines = kind_lines(records)
    if not lines:
        return None
    return Panel(lines, "share of the reason's sentences", 3, KINDS_SAID, prefix="kinds-")


def _targets(accuracy: float, flip: float) -> str:
    return f"targets: accuracy {accuracy:.0%}, flip {flip:.0%}"


def course_words(
    reason: str, course: Course | None, accuracy: float = ACCURACY, flip: float = FLIP
) -> str:
    """One reason's course (analysis.acquisition.Course, or None: no twins) in one short line,
    the targets named; never reached, its best accuracy and its best flip, each at its own
    step."""
    if course is None:
        return f"{reason}: no choice twins, so no choice to learn"
    first, last = course.first, course.last
    if first is None:
        acc, fl = course.best_accuracy, course.best_flip
        return (
            f"{reason}: not reached ({_targets(accuracy, flip)}); best accuracy "
            f"{acc.accuracy:.0%} at step {acc.step:,}, best flip {fl.flip:.0%} at step {fl.step:,}"
        )
    said = f"{reason}: accuracy {first.accuracy:.0%} and flip {first.flip:.0%}"
    said_at = f"({_targets(accuracy, flip)}) reached"
    if not reaches(last, accuracy, flip):
        return (
            f"{said} {said_at} at step {first.step:,}, lost by the end: "
            f"{last.accuracy:.0%} and {last.flip:.0%} at step {last.step:,}"
        )
    if first.step == last.step:
        return f"{said} {said_at} first at the last probe, step {last.step:,}"
    end = f"({last.accuracy:.0%}, {last.flip:.0%})"
    if course.dropped is not None:
        return (
            f"{said} {said_at} first at step {first.step:,}; below at step {course.dropped:,}, "
            f"back by the end {end}"
        )
    return f"{said} {said_at} first at step {first.step:,}; held to the end {end}"


def kind_words(records: list, accuracy: float = ACCURACY, flip: float = FLIP) -> list[str]:
    """A line for each reason the records' probes name: when its choice first reached both
    targets and whether it held to the last probe, or its best accuracy and best flip; [] for
    records without probe_by_kind."""
    courses = kind_courses(records, accuracy, flip)
    return [course_words(kind, course, accuracy, flip) for kind, course in courses.items()]


def kind_part(records: list, panel: Panel) -> str:
    """The page's part on the kinds, under the heads' curve: what the panel shows, its SVG and
    legend, and kind_words' lines."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in kind_words(records))
    return (
        f'<h3>Each reason</h3><p class="help">A colour for each {term("reason")} a sentence '
        f"gives for its antecedent ({term('agreement')}, {term('role')}, {term('meaning')}): "
        f"the best head's {term('cand@1')} on its sentences (solid), and the model's own "
        f"choice on its choice {term('twin', 'twins')}: accuracy (dashed), the share where it "
        f"prefers the antecedent, and {term('flip')} (dotted), where it does so on the sentence "
        f"and the other way on its twin. A reason counts as learned at accuracy {ACCURACY:.0%} "
        f"and flip {FLIP:.0%} (the grey lines).</p>"
        f"{curve_svg(panel, 'curve kinds')}{curve_legend(panel.lines)}"
        f'<ul class="acquired">{items}</ul>'
    )

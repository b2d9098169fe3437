"""How the reports and the page write a number: one home for the terminal's text and the HTML
tables alike, so that both say +0.98 [+0.97, +0.99] or 91.0% the same way."""

from analysis.circuit_results import Cell
from analysis.probe import MIN_FOR_STATS


def signed(x: float) -> str:
    """A delta as the reports and the page show it: +0.12, -0.05, and 0.00 (no sign) for
    anything that rounds to zero, so that no "-0.00" or "+0.00" claims a direction."""
    text = f"{x:+.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text


def with_ci(deltas: dict, name: str, n: int) -> str:
    """deltas[name] and its interval deltas[name + "_ci"]: +0.12 [+0.08, +0.16]; the value
    alone when the mean is over fewer than MIN_FOR_STATS examples (n)."""
    if n < MIN_FOR_STATS:
        return signed(deltas[name])
    lo, hi = deltas[f"{name}_ci"]
    return f"{signed(deltas[name])} [{signed(lo)}, {signed(hi)}]"


def recovered_text(cell: Cell) -> str:
    """A cell as the report and the page show it: "+0.98 [+0.98, +0.99]", or "+0.98" alone
    where the set was too small for an interval."""
    text = signed(cell["recovered"])
    if "recovered_ci" in cell:
        lo, hi = cell["recovered_ci"]
        text += f" [{signed(lo)}, {signed(hi)}]"
    return text


def pct(x: float | None, ci: list | None = None, sep: str = ", ") -> str:
    """A share as a percentage with one decimal, "-" for None, its interval after it where
    given ("91.0% [89.9, 96.1]"; `sep` between the interval's ends)."""
    text = "-" if x is None else f"{100 * x:.1f}%"
    return text if ci is None else f"{text} [{100 * ci[0]:.1f}{sep}{100 * ci[1]:.1f}]"


def counted(n: int, noun: str) -> str:
    """n and its noun, plural but for one: "1 pair", "3 pairs" (nouns that add an s)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

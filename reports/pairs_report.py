"""The plain-text report of your own clean/corrupt pairs (`generate.py --pairs FILE`), from
analysis/user_pairs.py's result: activation patching and the circuit, each said in the pairs'
own terms (the last token, where the metric is read; the changed tokens; your answer and other)
rather than the built-in twins' (the pronoun, the antecedent)."""

from analysis.circuit import MIN_GAP
from analysis.circuit_results import PairsResult
from reports.circuit_report import columns_said, set_lines
from reports.formatting import counted
from reports.text_reports import PatchingWords, format_patching

PAIRS = PatchingWords(
    "Activation patching at the last token: each clean prompt's run patched into its corrupt "
    "prompt's,",
    "LD = logit(answer) - logit(other)",
    "the last token",
    "1 = the clean prompt's preference for your answer over your other is back, 0 = as "
    "corrupt. Where the changed tokens' column fades and the last token's rises is the block "
    "that carries the change to the last token.",
    "where in your prompts: the tokens that differ, those between, the last",
)


def format_pairs(result: PairsResult, source: str) -> str:
    """The report of pairs_study's result on the pairs read from `source` (a file's name)."""
    parts = [_heading(result, source)]
    if "patching" in result:
        parts.append(format_patching(result["patching"], PAIRS))
    if "circuit" in result:
        parts.append(_circuit(result["circuit"]))
    elif "circuit_skipped" in result:
        needs = result["circuit_skipped"]["needs"]
        parts.append(
            f"No circuit: {counted(result['pairs'], 'pair')} cannot pass the bar the built-in "
            f"sets pass (at least {needs} pairs, so that the gap has a 95% interval; a gap of "
            f"at least {MIN_GAP} with its interval above 0); edges ranked on fewer are noise"
        )
    return "\n\n".join(parts)


def _heading(result: PairsResult, source: str) -> str:
    n, last = result["pairs"], result["last_changed"]
    lines = [
        f"{counted(n, 'pair')} from {source}: your clean and corrupt prompts, the metric read at "
        "each prompt's last token, LD = logit(answer) - logit(other) (the first token of each). "
        "Positions: changed, the tokens where clean and corrupt differ before the last token; "
        "between, those after them up to the last; last, the last token."
    ]
    if last:
        which = f"In {last} of {n} pairs the" if last < n else f"In all {n} pairs the"
        which = "The" if n == 1 else which
        said = ["the last column patches a changed token"] if "patching" in result else []
        said += ["the circuit's embed:changed includes it"] if "circuit" in result else []
        lines.append(
            f"{which} last token differs too" + (f": {', and '.join(said)}." if said else ".")
        )
    return " ".join(lines)


def _circuit(circuit) -> str:
    heading = (
        "Circuit at the last token: the edges that carry the change between your clean and "
        "corrupt prompts to LD (edge attribution patching on your pairs; embed:changed: the "
        "embedding at the tokens where they differ; "
        f"{columns_said(circuit['checked'], 'the gap between clean and corrupt LD')})"
    )
    lines = set_lines(f"all {counted(circuit['n'], 'pair')}", circuit, circuit)
    return "\n".join([heading, *lines])

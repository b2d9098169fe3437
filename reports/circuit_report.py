"""The circuit's plain-text report, as `generate.py --probe --circuit` prints it, from the
JSON-ready result of analysis/circuit.py: per set (all examples, then each kind), the ranked
edges with attribution's estimate of their share of the gap and its interval beside the share
measured by patching the edge alone, then the circuit's faithfulness and size."""

from analysis.circuit_results import CircuitResult, CircuitSet, Edge, PairsCircuit
from reports.formatting import counted

LISTED = 12  # edges listed per set at most (the circuit's first, then the next by |score|)
AT_LEAST = 5  # edges listed per set even where the circuit is smaller


def _percent(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def with_interval(x, ci, fmt):
    """x and its interval, each in `fmt`: 3.36 [3.10, 3.61]; x alone without one."""
    return fmt.format(x) + ("" if ci is None else f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]")


def _ci(ci):
    return "" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


COLUMNS_SAID = (
    "est. share: edge attribution's first-order estimate of the part of {gap} that patching "
    "the edge alone takes away; patched alone: that part measured, the edge patched for real "
    "(the {checked} edges ranked first)"
)
LD_GAP = "the clean-vs-corrupt logit difference"


def format_circuit(result: CircuitResult) -> str:
    """The whole set's circuit, then each kind's."""
    lines = [
        "Circuit at the pronoun: the edges that carry the antecedent to the prediction (edge "
        f"attribution patching on the corrupted twins; {columns_said(result['checked'])})"
    ]
    lines += set_lines(f"all {counted(result['n'], 'example')}", result, result)
    for kind, part in result["by_kind"].items():
        lines += [""] + set_lines(f"{kind} ({counted(part['n'], 'example')})", part, result)
    if result.get("skipped"):
        lines.append(f"({result['skipped']} examples have no twin and are left out.)")
    return "\n".join(lines)


def columns_said(checked: int, gap: str = LD_GAP) -> str:
    """What edge_lines' two share columns are: shares of `gap`, `checked` edges patched for
    real."""
    return COLUMNS_SAID.format(checked=checked, gap=gap)


def edge_lines(edges: list[Edge]) -> list[str]:
    """The ranked edges' table: a header, then each edge (marked * in the circuit) with its
    estimated share and interval, and its share patched alone where it was patched for real."""
    lines = [
        f"  {'rank':>4}  {'edge':<28} {'est. share':>10}  {'95% interval':<16} "
        f"{'patched alone':>13}"
    ]
    for rank, e in enumerate(edges, 1):
        mark = "*" if e["in_circuit"] else " "
        real = _percent(e.get("patched_share")) if "patched_share" in e else ""
        lines.append(
            f"  {rank:>3}{mark}  {e['from'] + ' -> ' + e['to']:<28} "
            f"{_percent(e['share']):>10}  {_ci(e.get('share_ci')):<16} {real:>13}"
        )
    return lines


def set_lines(name: str, part: CircuitSet, top: PairsCircuit) -> list[str]:
    """One set's lines: its logit differences and gap, then its ranked edges (the circuit's
    marked *), its faithfulness and attribution's agreement with real patching; or the line
    that says why it has no circuit. `top`: the whole result, for the graph's facts."""
    gap = with_interval(part["gap"], part["gap_ci"], "{:.2f}")
    lines = [
        f"{name}: LD clean {part['clean_ld']:.2f}, corrupt {part['corrupt_ld']:.2f}, gap {gap}"
    ]
    if not part["preference"]:
        lines.append(
            f"  no preference: the gap is under {top['min_gap']} or its interval "
            "reaches 0, so there is no circuit to find (it would be noise)"
        )
        return lines
    shown = part["edges"][: max(AT_LEAST, min(part["size"], LISTED))]
    lines += edge_lines(shown)
    if part["size"] > len(shown):
        lines.append(f"  ... and {part['size'] - len(shown)} more edges in the circuit")
    faith = f"{_percent(part['faithfulness'])} {_ci(part['faithfulness_ci'])}".strip()
    lines.append(
        f"  * the circuit: {part['size']} of {top['n_edges']} edges keep {faith} of "
        f"the gap with every other edge patched (faithfulness; the target is "
        f"{100 * top['threshold']:.0f}%)"
    )
    a = part["agreement"]
    if a.get("spearman") is not None:
        ratio = "-" if a["median_ratio"] is None else f"{a['median_ratio']:.2f}"
        lines.append(
            f"  attribution against real patching, top {a['edges']} edges: Spearman "
            f"{a['spearman']:.2f}, signs agree {a['sign_agreement'] * a['edges']:.0f}"
            f"/{a['edges']}, median ratio {ratio}"
        )
    return lines

"""One set's circuit (analysis/circuit.py) drawn as an SVG graph for the page to inline.

Components are nodes, laid out by depth from the embeddings at the bottom to the logits at the
top (each layer's heads, then its MLP above them); each edge of the circuit is a line from its
sender to its receiver (bowed where it skips rows), which meets a head at its query (left), key
(middle) or value (right).
A line's width is its estimated share of the logit difference (edge attribution's first-order
estimate of patching the edge alone; the widest edge full width), and the share is written on
it, with the port (q, k, v), so the numbers read without hovering. Blue edges carry the model's
preference; orange ones work against it. A set without a circuit gets no drawing: its caption
says why (no_circuit_said).
"""

from html import escape

from analysis.circuit_results import ChoiceCircuit, CircuitSet
from reports.formatting import counted
from reports.glossary import term

ROW, NODE_H, MARGIN, GAP = 80, 26, 24, 24  # a row's height, a node's, the edges around, between
CHAR_W = 7.5  # a label character's width at font-size 13, at most (digits, "%", "q k v")
NODE_CHAR_W = 7  # a node name's character at font-size 12
LABEL_SIZE = 13  # the edge labels' font size: about 13 px where the graph is drawn at its size
PORTS = {"q": -0.3, "k": 0.0, "v": 0.3}  # where on a head's lower side an edge meets it
BOW = 62  # how far right an edge bows for each row it skips
CARRIES, AGAINST = "#1f5fa8", "#d9822b"


def _component(name):
    """The node of a sender or receiver: L1H0.v -> L1H0."""
    return name.split(".")[0]


def _depth(node):
    """Where a node sits, bottom to top: embeddings, L{l} heads, MLP{l}, ..., logits."""
    if node.startswith("embed"):
        return 0
    if node == "logits":
        return 1 << 20
    if node.startswith("MLP"):
        return 2 * int(node[3:]) + 2
    return 2 * int(node[1 : node.index("H")]) + 1


def _place(edges):
    """(nodes, at, node_w, widest, height): the circuit's nodes in rows by depth, the embedding's
    at the bottom and the logits at the top, each row centred under the widest (of `widest`
    nodes); `at` maps a node to its box's (centre x, top y), every box `node_w` wide."""
    nodes = sorted(
        {_component(e["from"]) for e in edges} | {_component(e["to"]) for e in edges} | {"logits"},
        key=lambda n: (_depth(n), n),
    )
    rows = sorted({_depth(n) for n in nodes})
    node_w = max(104, NODE_CHAR_W * max(map(len, nodes)) + 12)
    slot = node_w + GAP
    widest = max(sum(_depth(n) == depth for n in nodes) for depth in rows)
    height = 2 * MARGIN + (len(rows) - 1) * ROW + NODE_H
    at = {}
    for depth in rows:
        here = [n for n in nodes if _depth(n) == depth]
        left = MARGIN + (widest - len(here)) * slot / 2  # each row centred under the widest
        y = MARGIN + (len(rows) - 1 - rows.index(depth)) * ROW
        for i, n in enumerate(here):
            at[n] = (left + (i + 0.5) * slot, y)
    return nodes, at, node_w, widest, height


def circuit_svg(part: CircuitSet | ChoiceCircuit, name: str = "the circuit") -> str:
    """An SVG of `part`'s circuit edges (one set of circuit results: the whole set or a
    reason), an image to a screen reader with `name` and its edges' count in its label and
    title (edges_said lists them in words); "" where the set has no circuit (the caller says
    why).

    The drawing is as narrow as its widest row of nodes allows, so that on a phone's page it is
    scaled down little or not at all; the edge labels are drawn last, over every line and node,
    on a white outline, so that no thick edge covers a number."""
    edges = [e for e in part.get("edges", []) if e.get("in_circuit")]
    if not edges:
        return ""
    nodes, at, node_w, widest, height = _place(edges)
    top = max(abs(e["share"]) for e in edges) or 1.0
    lines, labels = [], []
    right = MARGIN + widest * (node_w + GAP) + MARGIN  # the labels of bowed edges may reach further
    for e in edges:
        (x1, y1), (x2, y2) = at[_component(e["from"])], at[_component(e["to"])]
        port = e["to"].split(".")[1] if "." in e["to"] else ""
        x2, y2 = x2 + PORTS.get(port, 0.0) * node_w, y2 + NODE_H
        # An edge that skips rows bows to the right, clear of the nodes it passes.
        skipped = round((y1 - y2) / ROW)
        cx, cy = (x1 + x2) / 2 + BOW * skipped, (y1 + y2) / 2
        colour = CARRIES if e["share"] >= 0 else AGAINST
        width = 1 + 7 * abs(e["share"]) / top
        lines.append(
            f'<path d="M {x1:.1f} {y1:.1f} Q {cx:.1f} {cy:.1f} {x2:.1f} {y2:.1f}" '
            f'fill="none" stroke="{colour}" stroke-width="{width:.1f}" '
            'stroke-opacity="0.7"/>'
        )
        label = f"{port + ' ' if port else ''}{100 * e['share']:.0f}%"
        mx, my = (x1 + 2 * cx + x2) / 4, (y1 + 2 * cy + y2) / 4  # the curve's midpoint
        x = mx + width / 2 + 4  # clear of the line's own stroke
        labels.append(
            f'<text class="share" x="{x:.1f}" y="{my + 4:.1f}" fill="{colour}" '
            f'font-size="{LABEL_SIZE}" stroke="#fff" stroke-width="4" paint-order="stroke" '
            f'stroke-linejoin="round">{escape(label)}</text>'
        )
        right = max(right, x + CHAR_W * len(label) + MARGIN / 2)
    boxes = []
    for n in nodes:
        x, y = at[n]
        boxes.append(
            f'<rect x="{x - node_w / 2:.1f}" y="{y:.1f}" width="{node_w}" '
            f'height="{NODE_H}" rx="4" fill="#f4f4f4" stroke="#555"/>'
        )
        boxes.append(f'<text x="{x:.1f}" y="{y + 17:.1f}" text-anchor="middle">{escape(n)}</text>')
    # Drawn at its own size where there is room, scaled down to the page's width where not
    # (the page's CSS: max-width 100%, height auto), never cut: the viewBox holds every label.
    said = escape(
        f"{name}: a graph of {counted(len(edges), 'edge')} from the embedding to the logits, "
        "each line's width its estimated share (listed below it in words)"
    )
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{right:.0f}" height="{height}" '
        f'viewBox="0 0 {right:.0f} {height}" font-family="sans-serif" font-size="12" '
        f'role="img" aria-label="{said}"><title>{said}</title>'
    )
    return "\n".join([head, *lines, *boxes, *labels, "</svg>"])


def edges_said(part: CircuitSet | ChoiceCircuit) -> str:
    """The circuit's edges in words, a list item each ("embed:antecedent → L0H2.v: 46%"),
    in the order of their estimated share; "" where the set has no circuit."""
    edges = sorted(
        (e for e in part.get("edges", []) if e.get("in_circuit")), key=lambda e: -abs(e["share"])
    )
    items = "".join(
        f"<li>{escape(e['from'])} → {escape(e['to'])}: {100 * e['share']:.0f}%</li>" for e in edges
    )
    return f'<ul class="edges" aria-label="the edges in words">{items}</ul>' if items else ""


def figure_id(prefix: str, name: str) -> str:
    """The id of a set's figure: circuit-all, circuit-agreement, choice-meaning, ..."""
    return f"{prefix}-{name.split()[0]}"


def no_circuit_said(part: CircuitSet, min_gap: float | None) -> str:
    """Why a set of analysis/circuit.py's has no circuit, in its own numbers: its twins move
    the logit difference too little, or too unsteadily, for a circuit to explain."""
    gap, ci = part.get("gap"), part.get("gap_ci")
    if gap is None:  # a result saved without its gap
        return "no circuit: the twins move the logit difference too little to explain"
    moved = f"the twins move the logit difference by {gap:.2f} on average"
    if ci is None or (min_gap is not None and gap < min_gap):
        return f"no circuit: {moved}, under the {min_gap or 0:g} a circuit needs"
    return f"no circuit: {moved}, but its interval [{ci[0]:.2f}, {ci[1]:.2f}] reaches 0"


def circuit_section(circuit):
    """The page's section of the circuit: one graph for the whole set and one for each kind,
    with its size and faithfulness above it, or why it has none; "" without a circuit."""
    if not circuit:
        return ""
    parts = [("all sentences", circuit), *circuit.get("by_kind", {}).items()]
    figures = []
    for name, part in parts:
        if part.get("faithfulness") is None:
            said = no_circuit_said(part, circuit.get("min_gap"))
        else:
            said = (
                f"{part['size']} of {circuit['n_edges']} edges "
                f"keep {part['faithfulness']:.1%} of the logit difference"
            )
        figures.append(
            f'<figure id="{figure_id("circuit", name)}"><figcaption>{escape(name)}: '
            f"{escape(said)}</figcaption>{circuit_svg(part, name)}{edges_said(part)}</figure>"
        )
    return (
        '<section class="circuit"><h2>The circuit that carries the antecedent</h2>'
        '<p class="help">Edge attribution patching on the corrupted '
        f"{term('twin', 'twins')}, checked by real patching: the fewest edges that, kept while "
        "every other edge is patched from the twin, keep at least 90% of the clean run's "
        f"preference for its own next word (the circuit's {term('faithfulness')}). A line's "
        f"width and number are its {term('share (estimated)', 'estimated share')} of that "
        f"preference; {term('.q, .k, .v on an edge', 'q, k, v')} say which input of a head it "
        "reaches.</p>" + "".join(figures) + "</section>"
    )

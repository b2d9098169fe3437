"""One set's circuit (analysis/circuit.py) drawn as an SVG graph for the page to inline.

Components are nodes, laid out by depth from the embeddings at the bottom to the logits at the
top (each layer's heads, then its MLP above them); each edge of the circuit is a line from its
sender to its receiver (bowed where it skips rows), which meets a head at its query (left), key
(middle) or value (right).
A line's width is its share of the logit difference (the widest edge full width), and the share
is written on it, with the port (q, k, v), so the numbers read without hovering. Blue edges
carry the model's preference; orange ones work against it.
"""

from html import escape

from analysis.circuit_results import ChoiceCircuit, CircuitSet

WIDTH, ROW, NODE_W, NODE_H, MARGIN = 640, 80, 104, 26, 24
LABEL_W = 7  # a label character's width at font-size 12, at most (digits, "%", "q k v")
PORTS = {"q": -0.3, "k": 0.0, "v": 0.3}  # where on a head's lower side an edge meets it
BOW = 0.6 * NODE_W  # how far right an edge bows for each row it skips
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


def circuit_svg(part: CircuitSet | ChoiceCircuit) -> str:
    """An SVG of `part`'s circuit edges (one set of circuit results: the whole set or a kind);
    a short SVG that says so where the set has no circuit."""
    edges = [e for e in part.get("edges", []) if e.get("in_circuit")]
    if not edges:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40">'
            f'<text x="{MARGIN}" y="24">no circuit: the model shows no preference here'
            "</text></svg>"
        )
    nodes = sorted(
        {_component(e["from"]) for e in edges} | {_component(e["to"]) for e in edges} | {"logits"},
        key=lambda n: (_depth(n), n),
    )
    rows = sorted({_depth(n) for n in nodes})
    height = 2 * MARGIN + (len(rows) - 1) * ROW + NODE_H
    at = {}
    for depth in rows:
        here = [n for n in nodes if _depth(n) == depth]
        y = MARGIN + (len(rows) - 1 - rows.index(depth)) * ROW
        for i, n in enumerate(here):
            at[n] = ((i + 1) * WIDTH / (len(here) + 1), y)
    widest = max(abs(e["share"]) for e in edges) or 1.0
    out = []
    right = WIDTH  # the drawing's right edge: the bowed edges' labels may reach past WIDTH
    for e in edges:
        (x1, y1), (x2, y2) = at[_component(e["from"])], at[_component(e["to"])]
        port = e["to"].split(".")[1] if "." in e["to"] else ""
        x2, y2 = x2 + PORTS.get(port, 0.0) * NODE_W, y2 + NODE_H
        # An edge that skips rows bows to the right, clear of the nodes it passes.
        skipped = round((y1 - y2) / ROW)
        cx, cy = (x1 + x2) / 2 + BOW * skipped, (y1 + y2) / 2
        colour = CARRIES if e["share"] >= 0 else AGAINST
        width = 1 + 7 * abs(e["share"]) / widest
        out.append(
            f'<path d="M {x1:.1f} {y1:.1f} Q {cx:.1f} {cy:.1f} {x2:.1f} {y2:.1f}" '
            f'fill="none" stroke="{colour}" stroke-width="{width:.1f}" '
            'stroke-opacity="0.7"/>'
        )
        label = f"{port + ' ' if port else ''}{100 * e['share']:.0f}%"
        mx, my = (x1 + 2 * cx + x2) / 4, (y1 + 2 * cy + y2) / 4  # the curve's midpoint
        out.append(
            f'<text x="{mx + 5:.1f}" y="{my + 4:.1f}" fill="{colour}">{escape(label)}</text>'
        )
        right = max(right, mx + 5 + LABEL_W * len(label) + MARGIN / 2)
    for n in nodes:
        x, y = at[n]
        out.append(
            f'<rect x="{x - NODE_W / 2:.1f}" y="{y:.1f}" width="{NODE_W}" '
            f'height="{NODE_H}" rx="4" fill="#f4f4f4" stroke="#555"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{y + 17:.1f}" text-anchor="middle">{escape(n)}</text>')
    # Drawn at its own size where there is room, scaled down to the page's width where not
    # (the page's CSS: max-width 100%, height auto), never cut: the viewBox holds every label.
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{right:.0f}" height="{height}" '
        f'viewBox="0 0 {right:.0f} {height}" font-family="sans-serif" font-size="12">'
    )
    return "\n".join([head, *out, "</svg>"])


def circuit_section(circuit):
    """The page's section of the circuit: one graph for the whole set and one for each kind,
    with its size and faithfulness above it; "" without a circuit."""
    if not circuit:
        return ""
    parts = [("all sentences", circuit), *circuit.get("by_kind", {}).items()]
    figures = []
    for name, part in parts:
        said = "no preference: no circuit"
        if part.get("faithfulness") is not None:
            said = (
                f"{part['size']} of {circuit['n_edges']} edges "
                f"keep {part['faithfulness']:.1%} of the logit difference"
            )
        figures.append(
            f"<figure><figcaption>{escape(name)}: {escape(said)}</figcaption>"
            f"{circuit_svg(part)}</figure>"
        )
    return (
        '<section class="circuit"><h2>The circuit that carries the antecedent</h2>'
        '<p class="help">Edge attribution patching on the corrupted twins, checked by real '
        "patching: the fewest edges that, kept while every other edge is patched from the "
        "twin, keep at least 90% of the clean run's preference for its own next word. A "
        "line's width and number are its share of that preference; q, k, v say which "
        "input of a head it reaches.</p>" + "".join(figures) + "</section>"
    )

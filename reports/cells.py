"""The page's one tinted cell: every table of numbers on the page (attention, cand@1, patching,
the lens, the causal deltas) shades a cell the same way, only the colour and the share differ."""

BLUE = "33,102,172"  # attention, cand@1, a loss that went down
ORANGE = "217,95,2"  # recovered fractions, the lens, a loss that went up
DEEPEST = 0.6  # the alpha of a full share: the text stays readable on the deepest tint


def tinted_cell(
    content: str, share: float, colour: str = BLUE, cls: str = "", tag: str = "td"
) -> str:
    """A <td> (or another `tag`) holding `content` (HTML, escaped by the caller), its background
    `colour` at an alpha in proportion to `share` (clipped to 0..1); cls: its class ("best",
    "top", ...)."""
    alpha = min(1.0, max(0.0, share)) * DEEPEST
    return f'<{tag} class="{cls}" style="background:rgba({colour},{alpha:.2f})">{content}</{tag}>'

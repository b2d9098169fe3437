"""--test-prompt's report: analysis/answer_rank.py's result as TransformerLens's
`utils.test_prompt` prints it."""

from reports.terminal import display_token


def _shown(token: str) -> str:
    return f"|{display_token(token, spaces=False)}|"


def listed(label: str, items: list, width: int | None) -> list[str]:
    """`label` and the Python list of `items`, as TransformerLens prints it, in lines of at most
    `width` columns broken only between items (never inside a token; None: one line); the
    later lines indented under the list's first item."""
    parts = [repr(item) for item in items]
    head, indent = f"{label}[", " " * (len(label) + 1)
    if width is None or len(head) + len(", ".join(parts)) + 1 <= width:
        return [f"{head}{', '.join(parts)}]"]
    lines, line = [], head
    for i, part in enumerate(parts):
        piece = part + ("]" if i == len(parts) - 1 else ",")
        if line.strip() not in ("", head.strip()) and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = indent + piece
        else:
            line += ("" if line in (head, indent) else " ") + piece
    return [*lines, line]


def format_test_prompt(result: dict, width: int | None = None) -> str:
    """test_prompt's result as TransformerLens prints it: the tokens, each answer token's rank,
    logit and probability with the top tokens there, and the ranks; the lists broken between
    their items to fit `width` columns (a terminal's; None: each list on one line)."""
    lines = [
        *listed("Tokenized prompt: ", result["prompt_tokens"], width),
        *listed("Tokenized answer: ", result["answer_tokens"], width),
    ]
    for row in result["answer"]:
        lines += [
            "",
            f"Performance on answer token {_shown(row['token'])}:",
            f"Rank: {row['rank']:<8} Logit: {row['logit']:6.2f} Prob: {row['prob']:6.2%} "
            f"Token: {_shown(row['token'])}",
        ]
        lines += [
            f"Top {k}th token. Logit: {t['logit']:6.2f} Prob: {t['prob']:6.2%} "
            f"Token: {_shown(t['token'])}"
            for k, t in enumerate(row["top"])
        ]
    ranks = [(row["token"], row["rank"]) for row in result["answer"]]
    return "\n".join([*lines, "", *listed("Ranks of the answer tokens: ", ranks, width)])

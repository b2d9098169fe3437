"""--test-prompt's report: analysis/answer_rank.py's result as TransformerLens's
`utils.test_prompt` prints it."""

from reports.terminal import display_token


def _shown(token: str) -> str:
    return f"|{display_token(token, spaces=False)}|"


def format_test_prompt(result: dict) -> str:
    """test_prompt's result as TransformerLens prints it: the tokens, each answer token's rank,
    logit and probability with the top tokens there, and the ranks in one line."""
    lines = [
        f"Tokenized prompt: {[t for t in result['prompt_tokens']]}",
        f"Tokenized answer: {[t for t in result['answer_tokens']]}",
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
    return "\n".join([*lines, "", f"Ranks of the answer tokens: {ranks}"])

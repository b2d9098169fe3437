"""The model's own answer (analysis/answer.py) as plain text, as `generate.py --probe` prints it
after the probe's report: both methods' cand@1 beside the best head's, the baselines, and how
often each method agrees with the head."""

from analysis.answer import METHODS
from analysis.probe import MIN_FOR_STATS
from analysis.results import AnswerResult, Study
from reports.probe_report import QUERY_WORDS

# What the model's-answer methods mean, as the report and the page say it.
ANSWER_METHODS = (
    'substitution: each candidate ("the dog") in the pronoun\'s place, the rest of the text '
    "scored (its log-probability); closeness: the candidate whose phrase gives the next-token "
    "distribution closest to the pronoun's (smallest KL)"
)


def _cand_cell(row, name):
    """cand@1 of `name` in a row of model_answer's result: "71.0% [65%, 76%]", or the value
    alone where the row's items were too few for an interval."""
    text = f"{row['cand_at_1'][name]:.1%}"
    if "cand_at_1_ci" in row:
        lo, hi = row["cand_at_1_ci"][name]
        text += f" [{lo:.0%}, {hi:.0%}]"
    return text


def format_answer(answer: AnswerResult, query: str = "pronoun") -> str:
    """The model's own answer (analysis/answer.py) as plain text: both methods' cand@1 beside
    the head's, on the whole set and on each kind of item; then the baselines and how often
    each method's answer is the head's pick, on the same items. `query`: where the head was
    read (the probe's query position)."""
    head = f"L{answer['head']['layer']} H{answer['head']['head']}"
    methods = answer["methods"]
    rows = [("all", answer["all"]), *answer["decided_by"].items()]
    said = (
        f"95% bootstrap intervals ({answer['resamples']} resamples)"
        if "cand_at_1_ci" in answer["all"]
        else f"no intervals: {answer['n']} examples are too few, at least {MIN_FOR_STATS} "
        "are needed"
    )
    lines = [
        "The model's own answer: which candidate its prediction puts in the pronoun's place "
        f"({answer['n']} examples, {answer['skipped']} skipped: the tokenizer cannot encode "
        f"them with a candidate there); cand@1, {said}:",
        *_cand_table(rows, methods, head),
    ]
    lines += [
        "",
        f"Baselines (cand@1) and how often the answer is {head}'s pick, the same items:",
        f"  {'items':<10} {'random':>7} {'first':>7} {'nearest':>7}   agrees: "
        + " ".join(f"{m:>12}" for m in methods),
    ]
    for name, row in rows:
        b = row["baselines"]
        lines.append(
            f"  {name:<10} {b['random']:>7.1%} {b['first']:>7.1%} {b['nearest']:>7.1%}"
            "           " + " ".join(f"{row['agreement'][m]:>12.1%}" for m in methods)
        )
    missing = ", ".join(f"{m} {answer['all']['no_answer'][m]}" for m in methods)
    where = "" if query == "pronoun" else f"; {head}'s pick is read at {QUERY_WORDS[query]}"
    lines += [
        "",
        f"No answer (the top candidates tie, or no text follows the pronoun): {missing}.",
        ANSWER_METHODS + where + ".",
    ]
    return "\n".join(lines)


def _cand_table(rows, methods, head) -> list[str]:
    """The lines of a table of cand@1: a row per (name, row of model_answer's result), a column
    per method and the head's."""
    top = f"  {'items':<10} {'n':>4}  " + "".join(f"{name:<20}" for name in (*methods, head))
    return [top.rstrip()] + [
        f"  {name:<10} {row['examples']:>4}  "
        + "".join(f"{_cand_cell(row, m):<20}" for m in (*methods, "head")).rstrip()
        for name, row in rows
    ]


def format_by_lexicon(result: Study) -> str:
    """The natural sentences split by the training lexicon (the study's "by_lexicon",
    analysis/lexicon_split.py) as plain text: each group's count, both methods' cand@1 and the
    best head's, as the model's own answer gives them on the whole set."""
    best = result["best_head"]
    return "\n".join(
        [
            "By the training lexicon: the sentences whose candidates are all nouns of the "
            "generated language's lexicon (lexicon), and those with a noun it does not have "
            "(unseen); cand@1:",
            *_cand_table(
                result["by_lexicon"].items(), METHODS, f"L{best['layer']} H{best['head']}"
            ),
        ]
    )

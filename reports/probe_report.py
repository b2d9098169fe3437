"""The probe's plain-text report, as `generate.py --probe` prints it first: run_probe's result
(analysis/probe.py) as the table of every head's cand@1, the best heads ranked, the baselines, the
p-value and the caveats. The page's tables (reports/probe_tables.py) say the p-value as this
report does."""

from analysis.probe import ALPHA, MIN_FOR_STATS, ONE_SET, beats_chance
from analysis.results import ProbeResult

# Where the probe read attention (analysis.words.QUERY_POSITIONS), as the report says it.
QUERY_WORDS = {
    "pronoun": "the pronoun",
    "next": "the token after the pronoun",
    "last": "the last token",
}


def language_lines(result: dict) -> list[str]:
    """The generated language the study's dev and test sets were drawn in, a sentence, where it
    is not the default (the study's "language"); [] for the default."""
    if "language" not in result:
        return []
    return [
        "The generated sets are drawn in the run's pronoun language (its data.pronouns), "
        f"{result['language']}."
    ]


NOTE_WORDS = 3  # query words quoted in the note about non-pronouns


def query_word_notes(result: ProbeResult) -> list[str]:
    """The note on query words that are not pronouns, if some are (run_probe's query_words)."""
    q = result["query_words"]
    if not q["not_pronouns"]:
        return []
    quoted = ", ".join(repr(w) for w in q["words"][:NOTE_WORDS])
    quoted += ", ..." if len(q["words"]) > NOTE_WORDS else ""
    return [
        f"the query words of {q['not_pronouns']} of {q['examples']} examples are not pronouns "
        f"({quoted}); for those the probe measures where that word looks, not how a pronoun "
        "finds its antecedent"
    ]


NO_HEAD = (
    f"No head beats chance here (p >= {ALPHA}, or too few examples for a p-value): the best head "
    "is only the top of its ranking, so it is not starred or outlined."
)


def significance(result: ProbeResult) -> str:
    """The permutation test's sentence, or, on fewer than MIN_FOR_STATS scored examples (where
    the result has no p-value), why there is none."""
    used = list(result["counts"].values())[-1]["used"]  # the examples the head is scored on
    if result["p_value"] is None or used < MIN_FOR_STATS:
        return (
            f"with {used} examples the set is too small for a p-value (at least {MIN_FOR_STATS} "
            "are needed): the scores above are point values only."
        )
    return (
        f"permutation test p = {result['p_value']:.4f} ({result['permutations']} shuffles of "
        "the antecedent among each item's candidates, the best head chosen again each time)."
    )


def format_report(result: ProbeResult, top: int = 5) -> str:
    """A plain-text report of run_probe's result: table, ranking, baselines, p-value, caveats."""
    same = result["selection"] == "same data"
    dev, test = ONE_SET * 2 if same else ("dev", "test")  # the keys of the per-split values
    test_name = result["test_set"]
    score = "cand@1" if same else f"{test_name} cand@1"
    heads, b, best = result["heads"], result["baselines"], result["best_head"]
    n_head = max(h["head"] for h in heads) + 1
    where = QUERY_WORDS[result["query"]]
    lines = [f"Pronoun probe: read at {where}, does a head's attention pick its antecedent?"]
    lines += _count_lines(result, same, test_name)
    lines += [f"Note: {note}." for note in query_word_notes(result)]
    lines += [
        "",
        f"{score} by layer (rows) and head (columns):",
        "     " + "".join(f"{'H' + str(h):>7}" for h in range(n_head)),
    ]
    for at in range(0, len(heads), n_head):
        row = "".join(f"{h[test]:>7.1%}" for h in heads[at : at + n_head])
        lines.append(f"L{heads[at]['layer']:<3} {row}")
    ranked = sorted(heads, key=lambda h: (-h[dev], h["layer"], h["head"]))[:top]
    columns = "cand@1" if same else f"   dev {test_name:>6}"
    lines += [
        "",
        f"Best {len(ranked)} heads, ranked by {'cand@1' if same else 'dev cand@1'}; "
        f"attention mass at {where}, mean over the {'' if same else test_name + ' '}examples:",
        f"  head    {columns}   antecedent  distractors  first token",
    ]
    for h in ranked:
        scores = f"{h[test]:>6.1%}" if same else f"{h[dev]:>6.1%} {h[test]:>6.1%}"
        lines.append(
            f"  L{h['layer']} H{h['head']:<3} {scores} {h['mass_antecedent']:>12.3f} "
            f"{h['mass_distractors']:>12.3f} {h['mass_first_token']:>12.3f}"
        )
    lines += [
        "",
        f"Baselines ({score}): random {b['random'][test]:.1%}, first "
        f"{b['first'][test]:.1%}, nearest before the pronoun {b['nearest'][test]:.1%}, "
        f'best position-only rule "{b["position"]["rule"]}" {b["position"][test]:.1%}',
        f"Best head L{best['layer']} H{best['head']}: {best[test]:.1%} {score}; "
        + significance(result),
    ]
    if not beats_chance(result):
        lines.append(NO_HEAD)
    if same:
        paid = " (the p-value pays for the choice)" if result["p_value"] is not None else ""
        lines.append(
            "Note: no held-out split, so the head and the position rule were chosen and "
            f"scored on the same data: their scores are optimistic{paid}."
        )
    else:
        lines.append(
            "Note: the head and the position rule were chosen on dev and are reported "
            f"on {test_name}; choosing them there would inflate the numbers."
        )
    kinds = result["decided_by"]
    lines += _by_deciding_lines(kinds, best, score, same, test)
    return "\n".join(lines)


def _count_lines(result: dict, same: bool, test_name: str) -> list[str]:
    """format_report's lines on each split's examples: how many were used, skipped, windowed."""
    lines = []
    for split, c in list(result["counts"].items())[: 1 if same else 2]:
        name = "examples" if same else test_name if split == "test" else split
        lines.append(
            f"{name}: {c['used']} of {c['examples']} used "
            f"(skipped: {c['skipped_unencodable']} the tokenizer cannot encode)"
        )
        if c["windowed"]:
            lines += [
                f"  {c['windowed']} read in the model's window, the last "
                f"{result['block_size']} tokens up to the pronoun (block_size);",
                "  the candidates before it get attention 0, the antecedent among them in "
                f"{c['antecedent_unseen']}",
            ]
    return lines


def _by_deciding_lines(kinds: dict, best: dict, score: str, same: bool, test: str) -> list[str]:
    """format_report's table of the items by what tells their antecedent apart, if they say."""
    if not kinds:
        return []
    name = f"L{best['layer']} H{best['head']}"
    where = "the same items" if same else "dev's items of that reason"
    lines = [
        "",
        f"By reason, what tells the antecedent apart ({score}; the last column's head is chosen "
        f"on {where}):",
        f"  {'reason':<11} {'items':>5} {name:>7} {'random':>7}   best head for the reason",
    ]
    for kind, k in kinds.items():
        top = k["kind_best"]
        chosen = f"L{top['layer']} H{top['head']:<3} {top[test]:>6.1%}" if top else "none on dev"
        lines.append(
            f"  {kind:<11} {k['examples']:>5} {k['best_head']:>7.1%} {k['random']:>7.1%}   {chosen}"
        )
    return lines

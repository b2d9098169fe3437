"""The coreference study's plain-text reports, as `generate.py --probe` prints them: the probe
(analysis/probe.py), the logit lens (analysis/lens.py), the causal tests (analysis/causal.py) and
activation patching (analysis/patching.py), each from the JSON-ready result its module computes.
The page's tables (analysis/causal_tables.py, analysis/depth_tables.py) say a number as these
reports do, through the helpers here."""

from analysis.circuit_report import format_circuit
from analysis.probe import MIN_FOR_STATS

PUBLISHED = (
    'Published context (other models and data): Clark et al. 2019, "What Does BERT Look At?": '
    "BERT-base head 5-4 selects the antecedent 65% of the time on CoNLL-2012, against 27% for "
    "the nearest mention."
)

READING = ("Positive: the prediction needed what was taken away. The control should stay near 0.",
           "A head can attend to the antecedent and still not help the prediction.")


def study_report(result):
    """The probe's plain-text report, then the logit lens', the causal tests', activation
    patching's and the circuit's when the result has them."""
    parts = [format_report(result)]
    if "logit_lens" in result:
        parts.append(format_lens(result["logit_lens"]))
    if "causal" in result:
        parts.append(format_causal(result["causal"]))
    if "patching" in result:
        parts.append(format_patching(result["patching"]))
    if "circuit" in result:
        parts.append(format_circuit(result["circuit"]))
    return "\n\n".join(parts)


def significance(result: dict) -> str:
    """The permutation test's sentence, or, on fewer than MIN_FOR_STATS scored examples, why
    there is none."""
    used = list(result["counts"].values())[-1]["used"]  # the examples the head is scored on
    if used < MIN_FOR_STATS:
        return (f"with {used} examples the set is too small for a p-value (at least {MIN_FOR_STATS} are "
                "needed): the scores above are point values only.")
    return (f"permutation test p = {result['p_value']:.4f} ({result['permutations']} shuffles of "
            "the antecedent among each item's candidates, the best head chosen again each time).")


def format_report(result: dict, top: int = 5) -> str:
    """A plain-text report of run_probe's result: table, ranking, baselines, p-value, caveats."""
    same = result["selection"] == "same data"
    test_name = result.get("test_set", "test")  # results saved before sets had names: "test"
    score = "cand@1" if same else f"{test_name} cand@1"
    heads, b, best = result["heads"], result["baselines"], result["best_head"]
    n_head = max(h["head"] for h in heads) + 1
    lines = ["Pronoun probe: read at the pronoun, does a head's attention pick its antecedent?"]
    for split, c in list(result["counts"].items())[: 1 if same else 2]:
        name = "examples" if same else test_name if split == "test" else split
        lines.append(f"{name}: {c['used']} of {c['examples']} used "
                     f"(skipped: {c['skipped_unencodable']} the tokenizer cannot encode)")
        if c["windowed"]:
            lines += [f"  {c['windowed']} read in the model's window, the last "
                      f"{result['block_size']} tokens up to the pronoun (block_size);",
                      "  the candidates before it get attention 0, the antecedent among them in "
                      f"{c['antecedent_unseen']}"]
    lines += [f"Note: {note}." for note in result["notes"]]
    lines += ["", f"{score} by layer (rows) and head (columns):",
              "     " + "".join(f"{'H' + str(h):>7}" for h in range(n_head))]
    for at in range(0, len(heads), n_head):
        row = "".join(f"{h['test']:>7.1%}" for h in heads[at : at + n_head])
        lines.append(f"L{heads[at]['layer']:<3} {row}")
    ranked = sorted(heads, key=lambda h: (-h["dev"], h["layer"], h["head"]))[:top]
    columns = "cand@1" if same else f"   dev {test_name:>6}"
    lines += ["", f"Best {len(ranked)} heads, ranked by {'cand@1' if same else 'dev cand@1'}; "
              f"attention mass at the pronoun, mean over the {'' if same else test_name + ' '}examples:",
              f"  head    {columns}   antecedent  distractors  first token"]
    for h in ranked:
        scores = f"{h['test']:>6.1%}" if same else f"{h['dev']:>6.1%} {h['test']:>6.1%}"
        lines.append(f"  L{h['layer']} H{h['head']:<3} {scores} {h['mass_antecedent']:>12.3f} "
                     f"{h['mass_distractors']:>12.3f} {h['mass_first_token']:>12.3f}")
    lines += ["", f"Baselines ({score}): random {b['random']['test']:.1%}, first "
              f"{b['first']['test']:.1%}, nearest before the pronoun {b['nearest']['test']:.1%}, "
              f"best position-only rule \"{b['position']['rule']}\" {b['position']['test']:.1%}",
              f"Best head L{best['layer']} H{best['head']}: {best['test']:.1%} {score}; " + significance(result)]
    if same:
        lines.append("Note: no held-out split, so the head and the position rule were chosen and "
                     "scored on the same data: their scores are optimistic (the p-value pays for "
                     "the choice).")
    else:
        lines.append("Note: the head and the position rule were chosen on dev and are reported "
                     f"on {test_name}; choosing them there would inflate the numbers.")
    lines += _by_deciding_lines(result.get("decided_by", {}), best, score, same)  # older results lack it
    return "\n".join(lines + ["", PUBLISHED])


def _by_deciding_lines(kinds: dict, best: dict, score: str, same: bool) -> list[str]:
    """format_report's table of the items by what tells their antecedent apart, if they say."""
    if not kinds:
        return []
    name = f"L{best['layer']} H{best['head']}"
    where = "the same items" if same else "dev's items of that kind"
    lines = ["", f"By what tells the antecedent apart ({score}; the last column's head is chosen "
             f"on {where}):",
             f"  {'decided by':<11} {'items':>5} {name:>7} {'random':>7}   best head for the kind"]
    for kind, k in kinds.items():
        top = k["kind_best"]
        chosen = f"L{top['layer']} H{top['head']:<3} {top['test']:>6.1%}" if top else "none on dev"
        lines.append(f"  {kind:<11} {k['examples']:>5} {k['best_head']:>7.1%} {k['random']:>7.1%}   {chosen}")
    return lines


def format_lens(lens: dict) -> str:
    """The logit lens as plain text: one row per point in depth."""
    ex = lens["example"]
    lines = ["Logit lens at the pronoun: the residual stream read through the final LayerNorm and the "
             f"unembedding ({lens['n']} examples, {lens['skipped']} skipped: no token after the pronoun); "
             f"the top tokens are those of {ex['text'][-40:]!r} -> {ex['next']!r}:",
             f"  {'point':<10} {'p(next)':>7} {'median rank':>11} {'rank 1':>6}   top tokens"]
    for i, point in enumerate(lens["points"]):
        top = ""
        for tok, p in ex["top"][i]:  # as many as fit an 80-column row
            more = f"{', ' if top else ''}{tok!r} {p:.2f}"
            if len(top) + len(more) > 38:
                break
            top += more
        lines.append(f"  {point:<10} {lens['mean_probability'][i]:>7.3f} {lens['median_rank'][i]:>11g} "
                     f"{lens['top1_share'][i]:>6.1%}   {top}")
    decided = next((lens["points"][i] for i, r in enumerate(lens["median_rank"]) if r == 1), None)
    lines.append(f"The true next token first ranks 1 (median over examples) at: {decided or 'no point'}; "
                 f"the last row is the model's own prediction.")
    return "\n".join(lines)


def signed(x):
    """A delta as the reports show it: +0.12."""
    return f"{x:+.2f}"


def with_ci(deltas, name, n):
    """deltas[name] and its interval deltas[name + "_ci"]: +0.12 [+0.08, +0.16]; the value
    alone when the mean is over fewer than MIN_FOR_STATS examples (n)."""
    if n < MIN_FOR_STATS:
        return signed(deltas[name])
    lo, hi = deltas[f"{name}_ci"]
    return f"{signed(deltas[name])} [{signed(lo)}, {signed(hi)}]"


def intervals_said(result):
    """How the heads-together rows are given: with 95% bootstrap intervals, or why without."""
    if result["n"] < MIN_FOR_STATS:
        return (f"means only: {result['n']} examples are too few for intervals (at least {MIN_FOR_STATS} "
                "are needed)")
    return f"with 95% bootstrap intervals ({result['resamples']} resamples)"


def together(result):
    """(label, deltas) rows of the heads knocked out together: each layer, all layers, and the
    best head alone when with_best_head added it (its deltas include the ablation)."""
    rows = [(f"layer {l}", deltas) for l, deltas in enumerate(result["layers"])]
    rows.append(("all layers", result["all_heads"]))
    if "best_head" in result:
        b = result["best_head"]
        rows.append((f"L{b['layer']} H{b['head']} alone", b))
    return rows


def _grid(heads, name):
    """Rows 'L<l>' of a name's means for every head, 7 characters a head."""
    return [f"L{l:<3} " + "".join(f"{signed(h[name]):>7}" for h in row) for l, row in enumerate(heads)]


def format_causal(result: dict, width: int = 100) -> str:
    """A plain-text report of causal_tests' result (with_best_head's too): the L x H grid of
    antecedent-knockout deltas with the control beside it (below it when side by side would be
    wider than `width`), the head-ablation grid, and the layer and all-heads rows with CIs."""
    heads = result["heads"]
    H = len(heads[0])
    header = "     " + "".join(f"{'H' + str(h):>7}" for h in range(H))
    ante, control = _grid(heads, "antecedent"), _grid(heads, "distractor")
    lines = ["Causal test at the pronoun: change of the next token's loss, in nats",
             f"(mean over {result['n']} examples, {result['skipped']} skipped; clean loss "
             f"{result['clean_loss']:.3f})", ""]
    if 2 * len(header) + 3 <= width:
        lines += ["antecedent knocked out".ljust(len(header)) + " | control: one distractor out",
                  f"{header} | {header[5:]}"]
        lines += [f"{a} | {c[5:]}" for a, c in zip(ante, control)]
    else:
        lines += ["antecedent knocked out, by layer (rows) and head (columns):", header, *ante, "",
                  "control: one distractor knocked out:", header, *control]
    lines += ["", "head ablated (its output at the query replaced by its mean):", header,
              *_grid(heads, "ablation"), "",
              f"heads together, {intervals_said(result)}:"]
    n = result["n"]
    for label, deltas in together(result):
        lines.append(f"  {label:<13} antecedent {with_ci(deltas, 'antecedent', n)}   control "
                     f"{with_ci(deltas, 'distractor', n)}")
        if "ablation" in deltas:  # the best head: its ablation beneath
            lines.append(f"  {'':<13} ablation   {with_ci(deltas, 'ablation', n)}")
    return "\n".join([*lines, "", *READING])


def recovered_text(cell):
    """A cell as the report and the page show it: "+0.98 [+0.98, +0.99]", or "+0.98" alone
    where the set was too small for an interval."""
    text = f"{cell['recovered']:+.2f}"
    if "recovered_ci" in cell:
        lo, hi = cell["recovered_ci"]
        text += f" [{lo:+.2f}, {hi:+.2f}]"
    return text


def format_patching(result: dict) -> str:
    """The patching results as plain text: the heads' grid, then the stream's map."""
    heads, H = result["heads"], len(result["heads"][0])
    intervals = "recovered fraction [95% bootstrap interval]" if "recovered_ci" in heads[0][0] else \
        f"recovered fraction (no intervals: {result['n']} pairs are too few, at least {MIN_FOR_STATS} are needed)"
    lines = ["Activation patching at the pronoun: clean run -> corrupted twin (the antecedent swapped for "
             "another noun of its kind),",
             f"{result['n']} pairs ({result['skipped']} skipped); logit difference clean next - twin's next: "
             f"clean {result['clean_ld']:+.2f}, corrupted {result['corrupt_ld']:+.2f}; {intervals}:",
             "", "each head's output at the pronoun patched:", "     " + "".join(f"{'H' + str(h):>7}" for h in range(H))]
    lines += [f"L{l:<3} " + "".join(f"{c['recovered']:>+7.2f}" for c in row) for l, row in enumerate(heads)]
    best = max(((l, h) for l in range(len(heads)) for h in range(H)), key=lambda lh: heads[lh[0]][lh[1]]["recovered"])
    lines.append(f"  best: L{best[0]} H{best[1]} {recovered_text(heads[best[0]][best[1]])}")
    lines += ["", "the residual stream patched (rows: after the embedding, after each block; "
              "columns: where in the sentence):",
              f"  {'':<10}" + "".join(f"{c:>21}" for c in result["columns"])]
    lines += [f"  {point:<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
              for point, row in zip(result["points"], result["stream"])]
    if "mlps" in result:  # results saved before MLPs were patched have none
        lines += ["", "each MLP's output patched (rows: the block; columns: where in the sentence):"]
        lines += [f"  {'block ' + str(l):<10}" + "".join(f"{recovered_text(c):>21}" for c in row)
                  for l, row in enumerate(result["mlps"])]
    lines.append("1 = the clean run's preference for its own continuation is back, 0 = as corrupted. Where "
                 "the antecedent's column fades and the pronoun's rises is the block that carries the "
                 "antecedent's identity to the pronoun.")
    return "\n".join(lines)

"""The coreference study of a run, as `generate.py --probe` and the page run it: the probe
(analysis/probe.py: does a head's attention find the antecedent?) and the causal tests
(analysis/causal.py: does the model use it?), on the built-in dev and test sets, on the
hand-written natural set, or on a user's JSONL file. Its plain-text report is
reports/text_reports.py's study_report."""

from collections.abc import Collection

from analysis.answer import model_answer
from analysis.causal import causal_tests, with_best_head
from analysis.choice import with_shared
from analysis.circuit import trace_circuit
from analysis.errors import NothingToMeasure
from analysis.items import encode_item
from analysis.lens import logit_lens
from analysis.lexicon_split import by_lexicon
from analysis.patching import NoTwins, activation_patching
from analysis.probe import run_probe
from analysis.results import PARTS, Study
from data.pronouns import NATURAL, examples, natural, read_examples
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix
from data.tokenizer import Tokenizer
from model.gpt import GPT


def study(
    model: GPT,
    tokenizer: Tokenizer,
    path: str = "",
    permutations: int = 1000,
    parts: Collection[str] = ("causal",),
    query: str = "pronoun",
    mix: StoryMix = DEFAULT_MIX,
) -> Study:
    """run_probe's result for a user's JSONL file at `path` (one set of examples), for the
    built-in dev and test sets when `path` is empty, or, when `path` is "natural", for the
    natural sentences as the test set with the head chosen on the generated dev set, its
    attention read at `query` (analysis.words.QUERY_POSITIONS). The built-in sets are those of
    the generated language `mix`, the one the model was trained in (runs.folder.story_mix):
    with its heldout_cue_pairs, test's cue-and-noun pairs are none the model read; a language
    other than the default is named under "language" (StoryMix.label). The model's own answer
    (analysis/answer.py) on the test set (or the file) beside that head under "model_answer"
    (for the natural sentences also on those whose candidates are all the training lexicon's
    nouns and on the others, analysis/lexicon_split.py, under "by_lexicon"), and the logit lens
    at the pronoun (analysis/lens.py) on the same set under "logit_lens"; then the `parts`
    asked for (analysis.results.PARTS), on the same set: "causal", the causal tests
    (with_best_head) under "causal"; "patching", activation patching (analysis/patching.py)
    under "patching"; "circuit", the circuit (analysis/circuit.py) under "circuit" and the
    choice circuit (analysis/choice.py: which candidate wins, on choice twins; with "patching"
    too, its activation patching) under "choice". ValueError (one line) for a file that cannot
    be read or holds no examples."""
    assert set(parts) <= PARTS.keys(), parts
    dev, test, test_set = _sets(model, tokenizer, path, query, mix)
    result = run_probe(
        model, tokenizer, dev, test, permutations=permutations, test_set=test_set, query=query
    )
    if path in ("", NATURAL) and not mix.is_default:  # a user's file is in no such language
        result["language"] = mix.label
    best = result["best_head"]
    try:
        result["model_answer"] = model_answer(
            model, tokenizer, test or dev, (best["layer"], best["head"]), query
        )
    except NothingToMeasure:  # no example can be read with a candidate in the pronoun's place
        pass
    if path == NATURAL:
        split = by_lexicon(model, tokenizer, test, (best["layer"], best["head"]), query)
        if split:
            result["by_lexicon"] = split
    try:
        result["logit_lens"] = logit_lens(model, tokenizer, test or dev)
    except NothingToMeasure:  # no example has a token after its pronoun: nothing to read
        pass
    _measure_parts(result, model, tokenizer, test or dev, parts)
    return result


def _measure_parts(result, model, tokenizer, examples, parts):
    """The `parts` of study asked for, added to `result` (the probe's) in place."""
    patch = "patching" in parts
    if patch:
        try:
            result["patching"] = activation_patching(model, tokenizer, examples)
        except NoTwins as e:  # the rest of the study stands; the report says why this is missing
            result["patching_skipped"] = {"reason": e.reason, "tokenizer": e.tokenizer}
    if "circuit" in parts:
        try:
            result["circuit"] = trace_circuit(model, tokenizer, examples)
        except NoTwins as e:  # as for patching: the twins are the same
            result["circuit_skipped"] = {"reason": e.reason, "tokenizer": e.tokenizer}
        with_shared(result, model, tokenizer, examples, patch=patch)
    if "causal" in parts:  # NothingToMeasure("causal") where no example can be tested
        tested = causal_tests(model, tokenizer, examples)
        best = result["best_head"]
        result["causal"] = with_best_head(tested, best["layer"], best["head"])


def _sets(model, tokenizer, path, query, mix):
    """(dev, test or None, the test set's name) that study scores (see its docstring)."""
    if path == NATURAL:
        return examples("dev", mix=mix), natural(), NATURAL
    if path:  # a line the query cannot be read on is named before anything runs
        check = (
            (lambda ex: encode_item(tokenizer, ex, model.config.block_size, query))
            if query == "next"
            else None
        )
        return read_examples(path, check=check), None, "test"
    return examples("dev", mix=mix), examples("test", mix=mix), "test"

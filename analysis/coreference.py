"""The coreference study of a run, as `generate.py --probe` and the page run it: the probe
(analysis/probe.py: does a head's attention find the antecedent?) and the causal tests
(analysis/causal.py: does the model use it?), on the built-in dev and test sets, on the
hand-written natural set, or on a user's JSONL file. Its plain-text report is
analysis/reports.py's study_report."""

from analysis.causal import causal_tests, with_best_head
from analysis.circuit import trace_circuit
from analysis.lens import logit_lens
from analysis.patching import activation_patching
from analysis.probe import run_probe
from data.pronouns import NATURAL, examples, natural, read_examples


def study(model, tokenizer, path="", permutations=1000, causal=True, patch=False, circuit=False):
    """run_probe's result for a user's JSONL file at `path` (one set of examples), for the
    built-in dev and test sets when `path` is empty, or, when `path` is "natural", for the
    natural sentences as the test set with the head chosen on the generated dev set; with
    `causal`, also the causal tests (with_best_head) on the test set (or the file) under
    "causal"; the logit lens at the pronoun (analysis/lens.py) on the same set under
    "logit_lens"; with `patch`, activation patching (analysis/patching.py) under "patching"; with
    `circuit`, the circuit (analysis/circuit.py) under "circuit". ValueError (one line) for a
    file that cannot be read or holds no examples."""
    test_set = "test"
    if path == NATURAL:
        dev, test, test_set = examples("dev"), natural(), NATURAL
    elif path:
        dev, test = read_examples(path), None
    else:
        dev, test = examples("dev"), examples("test")
    result = run_probe(model, tokenizer, dev, test, permutations=permutations, test_set=test_set)
    try:
        result["logit_lens"] = logit_lens(model, tokenizer, test or dev)
    except ValueError:  # no example has a token after its pronoun: nothing to read
        pass
    if patch:
        result["patching"] = activation_patching(model, tokenizer, test or dev)
    if circuit:
        result["circuit"] = trace_circuit(model, tokenizer, test or dev)
    if causal:
        try:
            tested = causal_tests(model, tokenizer, test or dev)
        except ValueError as e:
            raise ValueError(f"{e}; --no-causal skips the causal tests") from None
        best = result["best_head"]
        result["causal"] = with_best_head(tested, best["layer"], best["head"])
    return result

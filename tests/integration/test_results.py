"""Every result has a type (analysis/results.py) and holds to it (analysis/conform.py): the study
of a user's file with every part conforms to the last key, in Python and as JSON (the built-in
sets' and the natural set's are checked where tests/e2e/test_probe_cli.py prints them); so do the
choice and the circuit where they find something (a hand-built model whose choice one head
makes); a value that drifts from its type is named where it drifts; and a saved probe.json of
another format version, or not of its type, is measured again, never half-read."""

import copy
import json

import pytest

from analysis.choice import choice_study
from analysis.choice_pairs import Choices
from analysis.circuit import circuit_of_pairs
from analysis.circuit_results import ChoiceResult, PairsCircuit
from analysis.conform import mismatches, outside_model
from analysis.coreference import study
from analysis.probe import head_scores
from analysis.results import HeadScores, Study
from data.pronouns import examples, write_jsonl
from tests.helpers import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(folder, model, tokenizer) of an untrained run."""
    folder = tmp_path_factory.mktemp("run")
    return (folder, *make_run(folder, "bpe", 64))


@pytest.fixture(scope="module")
def full(run, tmp_path_factory):
    """The untrained run's study of a user's file with every part: copy it before changing it."""
    _, model, tokenizer = run
    path = tmp_path_factory.mktemp("mine") / "mine.jsonl"
    write_jsonl(examples("test")[:40], path)
    return study(model, tokenizer, str(path), 20, parts=("causal", "patching", "circuit"))


def conforms(result, tp):
    """The result holds to its type as Python returns it and as JSON carries it."""
    return mismatches(result, tp) == [] and mismatches(json.loads(json.dumps(result)), tp) == []


def test_the_study_of_a_users_file_with_every_part_conforms_to_its_type(full):
    assert "all" in full["best_head"] and full["p_value"] is not None  # one set
    parts = {"model_answer", "logit_lens", "causal", "patching", "circuit", "choice"}
    assert parts <= full.keys() and conforms(full, Study)
    assert "recovered_ci" in full["patching"]["heads"][0][0]  # 40 examples: intervals


def test_a_probe_of_too_few_examples_says_why_it_has_no_p_value_and_conforms(run, tmp_path):
    _, model, tokenizer = run
    path = tmp_path / "few.jsonl"
    write_jsonl(examples("test")[:5], path)
    result = study(model, tokenizer, str(path), permutations=5, parts=())
    assert result["p_value"] is None and result["p_value_reason"] == "too few examples"
    assert conforms(result, Study)


def test_the_choice_and_the_circuit_that_find_something_conform(monkeypatch, choice_model):
    model, pairs = choice_model
    kinds = ["agreement"] * len(pairs)
    made = Choices(pairs, kinds, [None] * len(pairs), {"agreement": 20}, {"agreement": 20}, {})
    monkeypatch.setattr("analysis.choice.choice_pairs", lambda *args: made)  # the known pairs
    choice = choice_study(model, None, [], resamples=50, patch=True)
    assert choice["circuit"]["drawn"] and choice["inputs"]["L0H1"]["q"] == 1.0  # all of it
    assert choice["patching"]["heads"][0][1]["recovered_ci"] is not None
    assert conforms(choice, ChoiceResult)
    circuit = circuit_of_pairs(model, pairs, kinds, resamples=50)
    edge = circuit["edges"][0]
    assert edge["in_circuit"] and "patched_share_ci" in edge and "spearman" in circuit["agreement"]
    assert conforms(circuit, PairsCircuit)


def test_head_scores_conform(run):
    _, model, tokenizer = run
    assert conforms(head_scores(model, tokenizer, examples("dev")[:30]), HeadScores)


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda r: r["best_head"].pop("layer"), "result.best_head: no 'layer'"),
        (lambda r: r.update(hedas=[]), "result: 'hedas' is no key of Study"),
        (lambda r: r["heads"][1].update(layer="0"), "result.heads[1].layer: '0' is not int"),
        (lambda r: r["heads"][0].update(layer=True), "result.heads[0].layer: True is not int"),
        (lambda r: r.update(p_value="0.5"), "result.p_value: '0.5' is none of float | None"),
        (lambda r: r["causal"].update(layers={}), "result.causal.layers: {} is not a list"),
        (
            lambda r: r["logit_lens"]["example"]["top"][0].append(["a"]),
            "is not an array of 2",
        ),
        (lambda r: r.update(counts={}), "result.counts: 0 items, fewer than 1"),
        (lambda r: r["baselines"].update(first={}), "result.baselines.first: 0 items, fewer"),
    ],
)
def test_a_value_that_drifts_from_its_type_is_named_where_it_drifts(full, change, says):
    result = copy.deepcopy(full)
    change(result)
    found = mismatches(result, Study)
    assert len(found) == 1 and says in found[0], found


def test_a_saved_probe_of_another_format_or_type_is_measured_again_not_half_read(run, full):
    from types import SimpleNamespace

    from runs.folder import PROBE_FILE, PROBE_FORMAT, save_probe, saved_probe

    folder = run[0]
    checkpoint = SimpleNamespace(ckpt={"step": 0, "best_val_loss": None})
    save_probe(checkpoint, folder, full)
    saved = json.loads((folder / PROBE_FILE).read_text())
    assert saved["format_version"] == PROBE_FORMAT
    assert saved_probe(checkpoint, folder)["heads"] == full["heads"]
    for version in (None, PROBE_FORMAT - 1, PROBE_FORMAT + 1):  # None: saved before versions
        old = {k: v for k, v in saved.items() if k != "format_version"}
        if version is not None:
            old["format_version"] = version
        (folder / PROBE_FILE).write_text(json.dumps(old))
        assert saved_probe(checkpoint, folder) is None  # the callers measure it again
    edited = copy.deepcopy(saved)
    edited["best_head"]["layer"] = "first"  # edited by hand, or by another program
    (folder / PROBE_FILE).write_text(json.dumps(edited))
    assert saved_probe(checkpoint, folder) is None


def test_a_lens_of_another_depth_is_named_as_another_models(run, full):
    model = run[1]
    L, H = model.config.n_layer, model.config.n_head
    assert outside_model(full, L, H) == [] and len(full["logit_lens"]["points"]) == L + 1
    for depth in (0, L):  # a point per layer and one at the end: L + 1
        lens = copy.deepcopy(full["logit_lens"])
        lens["mean_probability"] = lens["mean_probability"][:depth]
        found = outside_model({**full, "logit_lens": lens}, L, H)
        assert found == [
            f"result.logit_lens.mean_probability: {depth} points where the model has {L + 1}"
        ]

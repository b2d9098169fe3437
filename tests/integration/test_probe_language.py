"""generate.py --probe on a run trained in a pronoun language other than the default: the dev and
test sets it scores are that language's (the run's config's data.pronouns), the report and the
JSON say which, and a run whose config has no such section is scored on the default's."""

import json
from collections import Counter

import pytest

from data.pronouns import examples
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix
from runs.folder import Run, examples_id, story_mix
from tests.helpers import run_generate, tiny_config

# Meaning stories only, their cue-and-noun pairs held out of training: a test split whose kinds
# differ from the default's in every count.
MIX = StoryMix(agreement=0, role=0, meaning=1, heldout_cue_pairs=True)
SETTINGS = [f"data.pronouns.{key}" for key in ("agreement=0", "role=0", "heldout_cue_pairs=1")]


@pytest.fixture(scope="module")
def mixed_run(corpus, tmp_path_factory):
    """A tiny run trained by train.py with MIX as its data.pronouns (on the corpus text: the
    setting is the run's config, whatever its data), its probe file kept apart from others'."""
    from lab.run import train  # training brings in the lab: imported when a test needs it

    folder = tmp_path_factory.mktemp("mixed") / "run"
    train(tiny_config(corpus, folder, "tokenizer.kind=bpe", "tokenizer.vocab_size=300", *SETTINGS))
    return folder


def probe(folder, *flags):
    code, out, err = run_generate("--ckpt", folder, "--permutations", "5", "--no-causal", *flags)
    assert code == 0, err
    return out


def test_the_probe_scores_the_test_split_of_the_runs_own_language(mixed_run):
    result = json.loads(probe(mixed_run, "--probe", "--json"))
    kinds = Counter(e.decided_by for e in examples("test", mix=MIX))
    assert kinds != Counter(e.decided_by for e in examples("test"))  # the default's differ
    assert {kind: row["examples"] for kind, row in result["decided_by"].items()} == kinds
    assert result["counts"]["test"]["examples"] == sum(kinds.values())
    assert result["model_answer"]["decided_by"].keys() == kinds.keys()
    assert result["language"] == MIX.label
    saved = json.loads((mixed_run / "probe.json").read_text())
    assert saved["language"] == MIX.label and saved["examples"] == examples_id(MIX)
    assert examples_id(MIX) != examples_id()  # a saved default-language result is not read
    report = probe(mixed_run, "--probe")
    assert MIX.label in report.split("Pronoun probe:")[0]  # said before the probe's report


def test_the_natural_sets_head_is_chosen_on_the_runs_own_dev_split(mixed_run):
    result = json.loads(probe(mixed_run, "--probe", "natural", "--json"))
    assert result["language"] == MIX.label
    # Its dev split holds no agreement story, so no head is chosen for that kind there; the
    # default dev split has a third of them.
    assert result["decided_by"]["agreement"]["kind_best"] is None
    assert result["decided_by"]["meaning"]["kind_best"] is not None


def test_a_runs_language_is_its_configs_and_the_default_where_it_has_none():
    assert story_mix(Run(None, None, {}, {"step": 0})) == DEFAULT_MIX  # before the setting
    nanogpt = {"config": {"dataset": "shakespeare_char"}}  # a nanoGPT run's flat config
    assert story_mix(Run(None, None, {}, nanogpt)) == DEFAULT_MIX
    settings = {"agreement": 0.0, "role": 0.0, "meaning": 1.0, "heldout_cue_pairs": True}
    assert story_mix(Run(None, None, {}, {"config": {"data": {"pronouns": settings}}})) == MIX
    newer = {"config": {"data": {"pronouns": {**settings, "a_later_setting": 1}}}}
    with pytest.raises(ValueError, match="data.pronouns"):
        story_mix(Run(None, None, {}, newer))


def test_a_default_language_run_says_no_language(tmp_path):
    from tests.helpers import make_run

    make_run(tmp_path / "run", "bpe", 64)  # a checkpoint with no config: the default
    result = json.loads(probe(tmp_path / "run", "--probe", "--json"))
    assert "language" not in result and "data.pronouns" not in probe(tmp_path / "run", "--probe")
    assert {k: r["examples"] for k, r in result["decided_by"].items()} == Counter(
        e.decided_by for e in examples("test")
    )

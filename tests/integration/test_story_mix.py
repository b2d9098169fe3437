"""The pronoun language's mix as a setting (data.pronouns): the default draws byte for byte what
the generator drew before the setting existed; each setting does what it says (a mix of one kind
makes only that kind, role_same_kind gives role stories twins, heldout_cue_pairs keeps test's
cue-and-noun pairs out of the training text); another language is another corpus file, and a run
trained on one is not resumed on another."""

import hashlib
import json
import re
from dataclasses import asdict

import pytest

import data.pronouns
from configs.load import load_config
from configs.schema import ConfigError
from data.pronouns import corpus_text, examples
from data.pronouns.choice_twins import choice_twins
from data.pronouns.lexicon import lexicon
from data.pronouns.story_mix import DEFAULT_MIX, StoryMix, cue_pairs
from data.sources import open_source
from lab.run import train
from tests.helpers import TINY_MODEL
from training.resume import CannotResume

# SHA-256 of what the generator drew before data.pronouns existed (commit 5daf8fb):
# corpus_text(n_bytes=200_000), and examples(split) as JSON of their fields.
BEFORE = {
    "corpus": "b9d5ac5d891b89ea1d9c4c4c8c0b7552c6da10de9ffa4c3e0da468a6d886a2fb",
    "dev": "72266f578866068fa9debdf7a5e86fca2f2f7f0ccd17596360222685163687bb",
    "test": "1e515dde9958c246d990f9b7784153a767f0376009011da377fd592824a66261",
}
MEANING_ONLY = {"agreement": 0, "role": 0}


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def examples_sha(split, mix=DEFAULT_MIX):
    return sha(json.dumps([asdict(e) for e in examples(split, mix=mix)]))


@pytest.mark.parametrize("mix", [DEFAULT_MIX, StoryMix(2, 2, 2)])
def test_the_default_language_draws_exactly_what_it_drew_before(mix):
    assert mix.is_default
    assert sha(corpus_text(n_bytes=200_000, mix=mix)) == BEFORE["corpus"]
    assert examples_sha("dev", mix) == BEFORE["dev"]
    assert examples_sha("test", mix) == BEFORE["test"]


def test_a_mix_of_one_kind_makes_only_that_kind_and_a_weight_moves_the_share():
    assert {e.decided_by for e in examples("dev", mix=StoryMix(**MEANING_ONLY))} == {"meaning"}

    def meaning_share(mix):
        return sum(e.decided_by == "meaning" for e in examples("dev", mix=mix)) / 300

    assert meaning_share(StoryMix(meaning=7)) > 2 * meaning_share(DEFAULT_MIX)
    text = corpus_text(n_bytes=50_000, mix=StoryMix(meaning=7))
    assert text != corpus_text(n_bytes=50_000)


def test_role_same_kind_gives_nearly_every_role_story_a_role_twin():
    def share(mix):
        role = [
            e
            for split in ("dev", "test")
            for e in examples(split, mix=mix)
            if e.decided_by == "role"
        ]
        return sum(bool(choice_twins(e)[0]) for e in role) / len(role), len(role)

    before, _ = share(DEFAULT_MIX)
    after, n = share(StoryMix(role_same_kind=True))
    assert before < 0.8 <= after and n >= 40


def test_heldout_cue_pairs_keeps_tests_cue_and_noun_pairs_out_of_the_training_text():
    def overlap(heldout):
        mix = StoryMix(**MEANING_ONLY, heldout_cue_pairs=heldout)
        test = set().union(*map(cue_pairs, examples("test", mix=mix)))
        train = set().union(*map(cue_pairs, examples("train", n=3000, mix=mix)))
        return test, test & train

    test, seen = overlap(heldout=False)
    assert len(test) > 300 and len(seen) > 5  # by default the training text pairs some of them
    test, seen = overlap(heldout=True)
    assert len(test) > 300 and seen == set()
    text = corpus_text(n_bytes=300_000, mix=StoryMix(heldout_cue_pairs=True))
    lex = {n.word: n for n in lexicon().nouns}
    for cue, noun in test:  # nor as an adjective in front of the noun, in prose or a story
        forms = "|".join(filter(None, (noun, lex[noun].plural)))
        assert not re.search(rf"\b{re.escape(cue)} (?:{forms})\b", text, re.IGNORECASE)


def lines_without_a_pronoun(text):
    lines = text.splitlines()
    return sum(not re.search(r"\b(he|she|it|they)\b", line, re.I) for line in lines) / len(lines)


def test_prose_scales_the_lines_without_a_pronoun_and_the_default_keeps_its_name():
    assert (
        StoryMix(prose=1.0) == DEFAULT_MIX and DEFAULT_MIX.label == "agreement=1,role=1,meaning=1"
    )
    assert StoryMix(prose=0.5).label.endswith("prose=0.5") and not StoryMix(prose=0.5).is_default
    shares = {
        p: lines_without_a_pronoun(corpus_text(n_bytes=100_000, mix=StoryMix(prose=p)))
        for p in (0.0, 1.0, 2.0)
    }
    assert shares[0.0] == 0.0  # every line an example
    assert 0.25 < shares[1.0] < 0.35 and 0.55 < shares[2.0] < 0.65  # 30% and 60% of the lines
    for bad in (-0.1, 2.5, float("nan")):
        with pytest.raises(ValueError, match="data.pronouns.prose"):
            StoryMix(prose=bad)


def test_the_setting_is_a_config_section_checked_like_every_key():
    config = load_config(None, ["data.pronouns.meaning=7", "data.pronouns.role_same_kind=true"])
    assert config.data.pronouns.story_mix == StoryMix(meaning=7, role_same_kind=True)
    assert load_config(None).data.pronouns.story_mix == DEFAULT_MIX
    for bad in ("data.pronouns.role=-1", "data.pronouns.meaning=inf"):
        with pytest.raises(ConfigError, match="data.pronouns"):
            load_config(None, [bad])
    with pytest.raises(ConfigError, match="one above 0"):
        load_config(None, [f"data.pronouns.{kind}=0" for kind in ("agreement", "role", "meaning")])


@pytest.fixture
def small_corpus(monkeypatch):
    """The pronouns corpus written 30 KB long, so that a run on it prepares in a moment."""
    real = data.pronouns.corpus_text

    def small(seed=0, mix=DEFAULT_MIX):
        return real(seed=seed, n_bytes=30_000, mix=mix)

    monkeypatch.setattr(data.pronouns, "corpus_text", small)
    return small


def test_another_language_is_another_corpus_file(tmp_path, small_corpus):
    default = open_source("pronouns", tmp_path)
    other = open_source("pronouns", tmp_path, StoryMix(meaning=7))
    assert default.files[0].name.endswith(data.pronouns.corpus_version() + ".txt")
    assert default.files != other.files and other.files[0].name.startswith("pronouns-seed0-")
    assert other.read_text() == small_corpus(mix=StoryMix(meaning=7)) != default.read_text()
    assert (default.language, other.language) == (DEFAULT_MIX.label, StoryMix(meaning=7).label)
    assert open_source("pronouns", tmp_path, StoryMix(3, 3, 3)).files == default.files


def test_a_run_is_not_resumed_in_another_language(tmp_path, small_corpus):
    def config(*overrides):
        return load_config(
            None,
            [
                f"out_dir={tmp_path / 'run'}",
                "data.source=pronouns",
                f"data.cache_dir={tmp_path / 'cache'}",
                *TINY_MODEL,
                "train.max_iters=4",
                "train.eval_interval=4",
                "train.eval_iters=1",
                "train.probe_interval=0",
                *overrides,
            ],
        )

    train(config("train.run_steps=2"))
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["pronouns"] == DEFAULT_MIX.label
    with pytest.raises(CannotResume) as e:
        train(config("data.pronouns.meaning=7"))
    message = str(e.value)
    assert "data.pronouns" in message and "meaning=7" in message and "\n" not in message
    assert train(config())  # the same language goes on

"""What a run trusts, as a user meets it at train.py and generate.py: a cached corpus is the text
its name promises, a run's config.yaml is the one its checkpoint was trained with, probe.json
names only layers and heads the model has, and a hook's return is checked wherever it was
registered. The battery of issue 60 (cases 2, 4, 5, 6); docs/reference/promises.md says what
each case holds the project to."""

import hashlib
import json

import pytest

from tests.helpers import TINY_MODEL, run_main


@pytest.fixture
def small_language(monkeypatch):
    """The pronoun language's generator cut to 20 kB, so a test generates it in a moment."""
    import data.pronouns

    real = data.pronouns.corpus_text
    monkeypatch.setattr(data.pronouns, "corpus_text", lambda **kw: real(**kw, n_bytes=20_000))
    return real(n_bytes=20_000)


def test_a_pronoun_corpus_written_over_is_generated_again(tmp_path, small_language):  # 1, 2
    args = [f"data.cache_dir={tmp_path / 'cache'}", "data.source=pronouns", *TINY_MODEL]
    args += ["tokenizer.kind=char", "train.max_iters=2", "train.eval_interval=2"]
    args += ["train.eval_iters=1", "train.probe_interval=0", "train.final_full_eval=false"]
    assert run_main("train.py", f"out_dir={tmp_path / 'a'}", *args).returncode == 0
    [corpus] = (tmp_path / "cache" / "corpora").glob("pronouns-*.txt")
    corpus.write_text("<!doctype html><p>a page written over the corpus</p>\n")
    r = run_main("train.py", f"out_dir={tmp_path / 'b'}", *args)
    assert r.returncode == 0, r.stderr
    assert corpus.read_text() == small_language
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["source_sha256"] == hashlib.sha256(small_language.encode()).hexdigest()

"""What a run trusts, as a user meets it at train.py: a cached corpus is the text its name
promises, a run's config.yaml is the one its checkpoint was trained with, another pronoun
language is refused before it is generated; and the messages of a run that goes wrong say what
to change. The battery of issue 60 (cases 1, 2, 4, 7, 8, 9, 10; 5 and 6 are in
test_attack_inputs.py and test_hooks.py); docs/reference/promises.md says what each case holds
the project to."""

import hashlib
import json

import pytest
import torch
import yaml

from configs.load import load_config
from tests.helpers import ROOT, TINY_MODEL, error_line, run_main


@pytest.fixture
def small_language(monkeypatch):
    """The pronoun language's generator cut to 20 kB, so a test generates it in a moment."""
    import data.pronouns

    real = data.pronouns.corpus_text
    monkeypatch.setattr(data.pronouns, "corpus_text", lambda **kw: real(**kw, n_bytes=20_000))
    mix = load_config(ROOT / "configs" / "default.yaml").data.pronouns.story_mix  # train.py's
    return real(n_bytes=20_000, mix=mix)


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


def tiny_run_args(corpus, out, *overrides):
    """train.py's arguments for a 2 x 2 x 32 run on the `corpus` fixture in `out`."""
    return [
        f"out_dir={out}",
        f"data.source={corpus / 'text.txt'}",
        f"data.cache_dir={corpus / 'cache'}",
        *TINY_MODEL,
        "train.eval_iters=1",
        "train.probe_interval=0",
        "train.final_full_eval=false",
        *overrides,
    ]


@pytest.mark.parametrize("lr", ["3.0", "1e6"])
def test_a_resume_that_saved_nothing_leaves_the_config_of_the_checkpoint(corpus, tmp_path, lr):
    first = tiny_run_args(corpus, tmp_path / "run", "train.max_iters=4", "train.eval_interval=2")
    assert run_main("train.py", *first).returncode == 0
    before = (tmp_path / "run" / "config.yaml").read_bytes()
    again = [*first, f"train.lr={lr}", f"train.muon_lr={lr}", "train.max_iters=100000"]
    again.append("train.eval_interval=50")  # its first save would come after the divergence
    r = run_main("train.py", *again)  # 60: 4
    assert r.returncode == 1 and "train.lr" in r.stderr, r.stderr  # diverged, or not finite
    # config.yaml is the checkpoint's config: the one before, unless the attempt saved one
    saved = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=False, map_location="cpu")
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert written["train"] == saved["config"]["train"], (written["train"], saved["config"])
    if saved["step"] == 4:  # nothing saved by the attempt: the file is as it was, byte for byte
        assert (tmp_path / "run" / "config.yaml").read_bytes() == before


def probed_run_args(tmp_path, *overrides):
    """A tiny run on pronoun sentences in tmp_path/run whose live probe measures every 3 steps."""
    from data.pronouns import examples
    from data.pronouns.jsonl import write_jsonl

    (tmp_path / "text.txt").write_text("\n".join(e.text for e in examples("train", n=200)))
    write_jsonl(examples("dev", n=20), tmp_path / "probe.jsonl")
    args = tiny_run_args(tmp_path, tmp_path / "run", "model.block_size=64", "train.max_iters=6")
    args += ["train.eval_interval=6", f"train.probe_file={tmp_path / 'probe.jsonl'}"]
    return [*args, "train.probe_interval=3", "train.warmup_iters=1", *overrides]


@pytest.mark.slow
def test_a_fresh_run_at_an_absurd_lr_says_lower_the_lr_and_blocks_nothing(tmp_path):  # 60: 7
    r = run_main("train.py", *probed_run_args(tmp_path, "train.lr=1e6", "train.muon_lr=1e6"))
    assert r.returncode != 0 and "nan" in r.stderr and "train.lr" in r.stderr, r.stderr
    assert "hook" not in r.stderr and not (tmp_path / "run" / "config.yaml").exists()
    r = run_main(
        "train.py", *probed_run_args(tmp_path, "train.max_iters=2", "train.eval_interval=2")
    )
    assert r.returncode == 0, r.stderr  # the folder it left blocks nothing


@pytest.mark.slow
def test_a_plot_that_cannot_be_written_says_which_steps_are_lost(tmp_path):  # 60: 9
    args = probed_run_args(tmp_path, "train.eval_interval=3")
    assert run_main("train.py", *args).returncode == 0
    (tmp_path / "run" / "probe.png").unlink()
    (tmp_path / "run" / "probe.png").mkdir()  # no file can go there, as on a full disk
    said = error_line(run_main("train.py", *args, "train.max_iters=12"))
    assert "probe.png" in said and "steps 7-9 are lost" in said, said
    assert "from the checkpoint of step 6" in said, said


@pytest.mark.parametrize(
    "weights",
    [["data.pronouns.meaning=inf"], ["data.pronouns.role=1e308", "data.pronouns.meaning=1e308"]],
)
def test_infinite_pronoun_weights_are_refused_at_load_naming_the_section(tmp_path, weights):
    r = run_main("train.py", f"out_dir={tmp_path / 'run'}", "data.source=pronouns", *weights)
    said = error_line(r)  # 60: 8
    assert "data.pronouns" in said and "finite" in said, said
    assert not (tmp_path / "run").exists()


def test_a_resume_in_another_pronoun_language_is_refused_before_it_is_generated(
    tmp_path, small_language
):  # 60: 8
    args = [f"data.cache_dir={tmp_path / 'cache'}", "data.source=pronouns", *TINY_MODEL]
    args += ["tokenizer.kind=char", "train.max_iters=2", "train.eval_interval=2"]
    args += ["train.eval_iters=1", "train.probe_interval=0", "train.final_full_eval=false"]
    assert run_main("train.py", f"out_dir={tmp_path / 'run'}", *args).returncode == 0
    corpora = sorted((tmp_path / "cache" / "corpora").iterdir())
    r = run_main("train.py", f"out_dir={tmp_path / 'run'}", *args, "data.pronouns.meaning=7")
    assert r.returncode == 2 and "data.pronouns" in r.stderr and "meaning=7" in r.stderr, r.stderr
    assert sorted((tmp_path / "cache" / "corpora").iterdir()) == corpora  # nothing generated


def test_a_local_window_past_the_block_is_said_to_limit_nothing(corpus, tmp_path):  # 60: 10
    args = tiny_run_args(corpus, tmp_path / "run", "model.local_window=64", "train.max_iters=1")
    r = run_main("train.py", *args, "train.eval_interval=1")
    assert r.returncode == 0, r.stderr
    assert "model.local_window=64" in r.stdout and "block_size=16" in r.stdout, r.stdout


def test_eval_only_off_a_terminal_says_it_is_evaluating(corpus, tmp_path):  # 60: 10
    args = tiny_run_args(corpus, tmp_path / "run", "train.max_iters=2", "train.eval_interval=2")
    assert run_main("train.py", *args).returncode == 0
    r = run_main("train.py", *args, "--eval-only")
    assert r.returncode == 0 and "loss" in r.stdout, r.stderr
    assert "evaluating" in r.stderr and "windows" in r.stderr, r.stderr

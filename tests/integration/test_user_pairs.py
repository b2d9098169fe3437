"""Patching and the circuit on a user's own clean/corrupt prompt pairs (generate.py --pairs
FILE): the lexicon's own twins, written out as such a file, give exactly the patching and the
circuit of the built-in twins; a pair that differs in its last token too keeps that token out of
the "changed" column; a circuit only where the pairs pass the built-in sets' bar; the report in
the pairs' own words; a file the metric cannot read is a one-line error naming its line."""

import io
import json
import random
import re

import pytest

import generate
from analysis.circuit import circuit_of_pairs
from analysis.circuit_results import PairsResult
from analysis.conform import mismatches
from analysis.patching import activation_patching, make_pair, mean_lds, patching_of_pairs
from analysis.probe import MIN_FOR_STATS
from analysis.user_pairs import encode_pairs, pairs_study
from data.prompt_pairs import TextPair, read_prompt_pairs
from data.pronouns import examples
from data.tokenizer import train_tokenizer
from model.checkpoint import atomic_save
from tests.helpers import RUN_TEXT, loud_gpt, run_generate


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """As tests/unit/test_patching.py's: a BPE of the built-in sentences, a tiny model at 5x the
    usual weight scale, 30 test examples, and the same as a run folder for generate.py."""
    from dataclasses import asdict

    from model.gpt import GPTConfig

    text = RUN_TEXT + "\n".join(ex.text for ex in examples("dev") + examples("test"))
    tokenizer = train_tokenizer("bpe", text, 600)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=128, n_layer=2, n_head=2, n_embd=32
    )
    model = loud_gpt(config, 5).eval()
    folder = tmp_path_factory.mktemp("pairs_run")
    tokenizer.save(folder / "tokenizer.bpe")
    (folder / "meta.json").write_text(
        json.dumps({"tokenizer_file": "tokenizer.bpe", "tokenizer_kind": "bpe"})
    )
    atomic_save(
        {"model": model.state_dict(), "model_config": asdict(config), "step": 0}, folder / "ckpt.pt"
    )
    return model, tokenizer, examples("test")[:30], folder


def twins_as_text(tokenizer, examples_, block_size=128):
    """The lexicon's twin pairs of `examples_` (drawn as activation_patching draws them) as the
    user's file would hold them: the two prompts and the two continuations, in words."""
    rng = random.Random(0)
    pairs = [p for p in (make_pair(tokenizer, ex, block_size, rng) for ex in examples_) if p]
    decode = tokenizer.decode
    return pairs, [
        TextPair(
            decode(p.clean), decode(p.corrupt), decode([p.clean_next]), decode([p.corrupt_next]), i
        )
        for i, p in enumerate(pairs, start=1)
    ]


def test_the_twins_written_as_a_users_pairs_give_the_same_patching_and_circuit(setup):
    model, tokenizer, examples_, _ = setup
    pairs, texts = twins_as_text(tokenizer, examples_)
    # Read back: the same ids and continuations; the "antecedent" is where the prompts differ
    # (a twin's antecedent token that happens to be the same in both is not).
    read = encode_pairs(tokenizer, texts, 128)
    assert [r._replace(antecedent=[]) for r in read] == [p._replace(antecedent=[]) for p in pairs]
    assert all(set(r.antecedent) <= set(p.antecedent) for r, p in zip(read, pairs))
    kept = [i for i, (r, p) in enumerate(zip(read, pairs)) if r.antecedent == p.antecedent]
    assert len(kept) >= MIN_FOR_STATS  # enough for a circuit
    ours = pairs_study(model, tokenizer, [texts[i] for i in kept], resamples=200)
    built_in = [pairs[i] for i in kept]
    assert ours["pairs"] == len(kept) and mismatches(ours, PairsResult) == []
    assert ours["last_changed"] == 0  # a twin changes its antecedent, never its pronoun
    # The same numbers; the columns and the embedding node named by what they are.
    assert ours["patching"] == {
        **patching_of_pairs(model, built_in, resamples=200),
        "columns": ["changed", "between", "last"],
    }
    circuit = circuit_of_pairs(model, built_in, [None] * len(kept), resamples=200)
    rename = {"embed:antecedent": "embed:changed"}
    edges = [{**e, "from": rename.get(e["from"], e["from"])} for e in circuit["edges"]]
    assert ours["circuit"] == {**circuit, "edges": edges, "skipped": 0}
    # and patching_of_pairs is what the built-in twins' patching computes
    assert activation_patching(model, tokenizer, examples_, resamples=200) == {
        **patching_of_pairs(model, pairs, resamples=200),
        "skipped": len(examples_) - len(pairs),
    }


def pairs_file(model, tokenizer, texts, path):
    """`texts` written to the JSONL file `path`, each pair turned round where the random model
    prefers the other way (reversed pairs are refused)."""
    clean_ld, corrupt_ld = mean_lds(model, encode_pairs(tokenizer, texts, 128))
    if clean_ld < corrupt_ld:
        texts = [t._replace(clean=t.corrupt, corrupt=t.clean) for t in texts]
    path.write_text(
        "\n".join(json.dumps(dict(zip(("clean", "corrupt", "answer", "other"), t))) for t in texts)
        + "\n\n"
    )
    return path


def test_pairs_alone_prints_the_report_in_the_pairs_words_or_the_json(setup, tmp_path):
    model, tokenizer, examples_, folder = setup
    _, texts = twins_as_text(tokenizer, examples_[:8])
    path = pairs_file(model, tokenizer, texts, tmp_path / "pairs.jsonl")
    code, report, err = run_generate("--ckpt", folder, "--pairs", path)  # no --probe
    assert code == 0, err
    assert " ".join(report.split()).startswith(f"{len(texts)} pairs from {path}")
    assert "each head's output at the last token patched" in report
    # Your pairs know no antecedent, pronoun or twin: the report does not say them.
    assert not re.search("antecedent|pronoun|twin|sentence", report), report
    code, out, _ = run_generate("--ckpt", folder, "--patch", "--pairs", path, "--json")
    result = json.loads(out)
    assert code == 0 and set(result) == {"pairs", "last_changed", "patching"}
    assert result["patching"]["n"] == len(texts)
    assert not (folder / "probe.json").exists()  # nothing is saved


def test_a_circuit_is_drawn_only_where_the_pairs_pass_the_built_in_sets_bar(setup, tmp_path):
    model, tokenizer, examples_, folder = setup
    _, texts = twins_as_text(tokenizer, examples_)
    few = pairs_file(model, tokenizer, texts[:8], tmp_path / "few.jsonl")
    code, report, _ = run_generate("--ckpt", folder, "--circuit", "--pairs", few)
    said = [" ".join(p.split()) for p in report.split("\n\n") if p.startswith("No circuit")]
    assert code == 0 and len(said) == 1 and f"at least {MIN_FOR_STATS} pairs" in said[0]
    assert "est. share" not in report and " -> " not in report  # no table of edges
    code, out, _ = run_generate("--ckpt", folder, "--circuit", "--pairs", few, "--json")
    result = json.loads(out)
    assert "circuit" not in result
    assert result["circuit_skipped"] == {"reason": "too few pairs", "needs": MIN_FOR_STATS}


def test_one_pair_is_one_pair(setup, tmp_path):
    model, tokenizer, examples_, folder = setup
    _, texts = twins_as_text(tokenizer, examples_[:1])
    path = pairs_file(model, tokenizer, texts, tmp_path / "one.jsonl")
    code, report, _ = run_generate("--ckpt", folder, "--pairs", path)
    said = " ".join(report.split())
    assert code == 0 and said.startswith(f"1 pair from {path}")
    assert "1 pair (0 skipped)" in said and "1 pair is too few" in said
    assert "1 pairs" not in said


def gender_swaps(tokenizer, examples_):
    """The twins with the corrupt prompt's last token (the pronoun) changed too, where the text
    reads back to the same tokens: clean and corrupt differ in the antecedent and the pronoun."""
    pairs, texts = twins_as_text(tokenizer, examples_)
    swapped = []
    for pair, text in zip(pairs, texts):
        for word in (" she", " he", " they", " it"):
            other = tokenizer.encode(word)
            corrupt = tokenizer.decode(pair.corrupt[:-1] + other)
            if len(other) == 1 and other != pair.clean[-1:]:
                if tokenizer.encode(corrupt) == pair.corrupt[:-1] + other:
                    swapped.append(text._replace(corrupt=corrupt))
                    break
    return swapped


def test_a_pair_that_differs_in_its_last_token_too_keeps_it_out_of_the_changed_column(
    setup, tmp_path
):
    model, tokenizer, examples_, folder = setup
    swaps = gender_swaps(tokenizer, examples_[:12])
    assert len(swaps) >= 5
    path = pairs_file(model, tokenizer, swaps, tmp_path / "swaps.jsonl")
    code, out, _ = run_generate("--ckpt", folder, "--patch", "--pairs", path, "--json")
    result = json.loads(out)
    assert code == 0 and result["last_changed"] == len(swaps)
    patching = result["patching"]
    assert patching["columns"] == ["changed", "between", "last"]
    # After the last block only the last token's stream reaches the logits: the changed tokens
    # before it recover nothing there, the last token everything (the pronoun's own position
    # counted as a changed token would recover all of it too).
    changed, _, last = patching["stream"][-1]
    assert changed["recovered"] == 0 and last["recovered"] == pytest.approx(1, abs=1e-6)
    code, report, _ = run_generate("--ckpt", folder, "--patch", "--pairs", path)
    said = " ".join(report.split())
    assert f"In all {len(swaps)} pairs the last token differs too" in said


@pytest.mark.parametrize(
    "line, names",
    [
        ('{"clean": "the cat", "corrupt": "the dog"}', ("line 2", "missing answer, other")),
        (
            '{"clean": "a", "corrupt": "b", "answer": "x", "other": "y", "kind": "k"}',
            ("unknown kind",),
        ),
        ("not json", ("line 2", "not JSON")),
        (
            '{"clean": "the cat", "corrupt": "the cat", "answer": " x", "other": " y"}',
            ("same text",),
        ),
    ],
)
def test_a_line_that_is_no_pair_is_a_one_line_error_naming_it(tmp_path, line, names):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"clean": "a", "corrupt": "b", "answer": "x", "other": "y"}\n' + line + "\n")
    with pytest.raises(ValueError) as e:
        read_prompt_pairs(path)
    assert str(path) in str(e.value) and all(n in str(e.value) for n in names), e.value


def test_pairs_the_metric_cannot_read_are_refused_naming_their_line(setup, tmp_path):
    model, tokenizer, _, folder = setup
    long_word = TextPair(
        "The cat sat because it", "The elephantine dog sat because it", " a", " b", 3
    )
    with pytest.raises(ValueError, match="line 3: clean is .* tokens and corrupt"):
        encode_pairs(tokenizer, [long_word], 128)
    same_start = TextPair("The cat sat because it", "The dog sat because it", " ran", " ran off", 4)
    with pytest.raises(ValueError, match="line 4: answer and other begin with the same token"):
        encode_pairs(tokenizer, [same_start], 128)
    too_long = TextPair("the cat " * 80, "the dog " * 80, " a", " b", 5)
    with pytest.raises(ValueError, match="over the model's block_size 128"):
        encode_pairs(tokenizer, [too_long], 128)
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(dict(zip(("clean", "corrupt", "answer", "other"), same_start[:4]))))
    err = io.StringIO()
    argv = ["--ckpt", str(folder), "--patch", "--pairs", str(path)]
    assert generate.main(argv, out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("error: ") and err.getvalue().count("\n") == 1
    for wrong, said in (
        (["--probe", "--pairs", str(path)], "drop --probe"),
        (["--probe", "natural", "--patch", "--pairs", str(path)], "drop --probe"),
        (["--pairs", str(path), "--query", "next"], "--query"),
        (["--pairs", str(path), "--summary"], "--summary"),
        (["--pairs", str(path), "--no-causal"], "--no-causal"),
    ):
        err = io.StringIO()
        assert generate.main(["--ckpt", str(folder), *wrong], out=io.StringIO(), err=err) == 2
        assert said in err.getvalue() and err.getvalue().count("\n") == 1, err.getvalue()

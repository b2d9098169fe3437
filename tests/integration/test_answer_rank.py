"""generate.py --test-prompt PROMPT --answer TEXT, TransformerLens's test_prompt: each answer
token's rank, logit and probability after the prompt and the answer's tokens before it, and the
tokens ranked first there."""

import io
import json

import pytest
import torch

import analysis.answer_rank as answer_rank
import generate
from tests.helpers import make_run

PROMPT, ANSWER = "The cat sat on the mat because it", " was tired"


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rank_run")
    model, tokenizer = make_run(folder, "bpe", 64)
    return folder, model, tokenizer


def test_each_answer_token_is_ranked_among_the_models_own_logits(bpe_run):
    _, model, tokenizer = bpe_run
    result = answer_rank.test_prompt(model, tokenizer, PROMPT, ANSWER)
    ids, answer = tokenizer.encode(PROMPT), tokenizer.encode(ANSWER)
    assert result["prompt_tokens"] == [tokenizer.decode([t]) for t in ids]
    assert len(result["answer"]) == len(answer) >= 2
    with torch.no_grad():
        logits = model(torch.tensor([ids + answer]))[0, :, : tokenizer.vocab_size]
    for i, (row, token) in enumerate(zip(result["answer"], answer)):
        at = logits[len(ids) + i - 1]
        assert row["logit"] == pytest.approx(at[token].item())
        assert row["rank"] == int((at > at[token]).sum())
        assert row["prob"] == pytest.approx(at.softmax(-1)[token].item(), rel=1e-5)
        probs = [t["prob"] for t in row["top"]]
        assert len(probs) == 10 and probs == sorted(probs, reverse=True)
        assert (row["rank"] == 0) == (row["top"][0]["token"] == row["token"])
    # The model's own first choice has rank 0; a later answer token is read after the earlier
    # ones (teacher forcing): the same as asking for it after the longer prompt.
    first = result["answer"][0]["top"][0]["token"]
    assert answer_rank.test_prompt(model, tokenizer, PROMPT, first)["answer"][0]["rank"] == 0
    longer = PROMPT + tokenizer.decode(answer[:1])
    second = answer_rank.test_prompt(model, tokenizer, longer, tokenizer.decode(answer[1:2]))
    assert second["answer"][0]["rank"] == result["answer"][1]["rank"]


def test_the_cli_prints_transformerlens_report_or_json(bpe_run):
    folder, _, tokenizer = bpe_run
    first = tokenizer.decode(tokenizer.encode(ANSWER)[:1])
    argv = ["--ckpt", str(folder), "--test-prompt", PROMPT, "--answer", ANSWER]
    out = io.StringIO()
    assert generate.main(argv, out=out, err=io.StringIO()) == 0
    text = out.getvalue()
    assert text.startswith("Tokenized prompt: ['The',") and "Top 9th token." in text
    assert f"Ranks of the answer tokens: [({first!r}," in text
    out = io.StringIO()
    assert generate.main([*argv, "--json"], out=out, err=io.StringIO()) == 0
    assert set(json.loads(out.getvalue())) == {"prompt_tokens", "answer_tokens", "answer"}


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--answer", " x"], "go together"),
        (["--test-prompt", "The cat"], "go together"),
        (["--test-prompt", "The cat", "--answer", "x", "--probe"], "run of its own"),
        (["--test-prompt", "The cat " * 40, "--answer", " x"], "over the model's block_size"),
    ],
)
def test_a_test_prompt_without_its_parts_is_a_one_line_error(bpe_run, argv, said):
    err = io.StringIO()
    assert generate.main(["--ckpt", str(bpe_run[0]), *argv], out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("error: ") and said in err.getvalue(), err.getvalue()


@pytest.mark.parametrize("width", [40, 80, None])
def test_test_prompts_lists_fit_the_terminal_broken_only_between_tokens(width):
    import ast

    from reports.prompt_report import listed

    tokens = ["The", " owl", " sat", " in", " the", " old", " tree", " because", " it", " was"] * 2
    lines = listed("Tokenized prompt: ", tokens, width)
    assert width is None or all(len(line) <= width for line in lines)
    assert (len(lines) == 1) is (width is None)  # 190 columns of tokens: wrapped where asked
    text = " ".join(line.strip() for line in lines)
    assert ast.literal_eval(text.removeprefix("Tokenized prompt: ")) == tokens  # no token cut

"""train.py --export-hf: a run folder as a Hugging Face GPT-2 (or, with a local first layer,
GPT-Neo) that transformers opens with our logits, attention and token ids; what neither can
express is refused; our import reads a GPT-2 back."""

import contextlib

import pytest
import torch

from data.hf_tokenizer import break_ids, end_ids, hf_tokenizer_files
from data.tokenizer import gpt2_tokenizer
from runs.export import export_hf
from runs.loading import load_run
from tests.helpers import (
    TORTURE,
    error_line,
    loud_run,
    one_line,
    patterns,
    read_only_folder,
    run_main,
    run_script,
)

transformers = pytest.importorskip(
    "transformers", reason="the reference is transformers: pip install -r requirements-test.txt"
)

LOCAL = {"local_window": 4, "bias": False}  # GPT-Neo: layer 0 local


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"bias": False},
        {"gelu_approximate": "tanh"},
        {"mlp_activation": "relu2"},
        LOCAL,
        LOCAL | {"mlp_activation": "relu2", "n_layer": 3},
        LOCAL | {"local_window": 1, "n_layer": 1},
    ],
)
def test_transformers_opens_the_export_with_our_logits_attention_and_ids(tmp_path, overrides):
    run = load_run(loud_run(tmp_path / "run", **overrides))
    export_hf(tmp_path / "run", tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "hf", attn_implementation="eager"
    ).eval()
    expected = "GPTNeoForCausalLM" if overrides.get("local_window") else "GPT2LMHeadModel"
    assert type(hf).__name__ == expected
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = run.tokenizer.encode(TORTURE)
    assert tokenizer(TORTURE)["input_ids"] == ids and tokenizer.decode(ids) == TORTURE
    window = torch.tensor([ids[:64]])
    with torch.no_grad():
        ours, seen = run.model(window), patterns(run.model, window)
    with torch.no_grad():
        theirs = hf(window, output_attentions=True)
    torch.testing.assert_close(theirs.logits, ours, atol=1e-4, rtol=0)
    for a, b in zip(theirs.attentions, seen, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    # The padded vocabulary goes out unpadded.
    assert hf.config.vocab_size == run.tokenizer.vocab_size == hf.transformer.wte.weight.shape[0]
    assert run.model.config.padded_vocab_size > run.tokenizer.vocab_size


def test_the_export_imports_back_bit_identical(tmp_path):
    run = load_run(loud_run(tmp_path / "run"))
    export_hf(tmp_path / "run", tmp_path / "hf")
    back = load_run(tmp_path / "hf")
    ours, theirs = run.model.state_dict(), back.model.state_dict()
    V = run.tokenizer.vocab_size
    assert set(ours) == set(theirs)
    for name, tensor in ours.items():
        rows = slice(0, V) if name in ("tok_emb.weight", "lm_head.weight") else slice(None)
        assert torch.equal(theirs[name][rows], tensor[rows]), name
    window = torch.tensor([run.tokenizer.encode(TORTURE)[:64]])
    with torch.no_grad():
        assert torch.equal(back.model(window), run.model(window))
    assert back.tokenizer.encode(TORTURE) == run.tokenizer.encode(
        TORTURE
    )  # GPT-4's split pattern too


def test_gpt2s_own_tokenizer_exports_with_its_pattern_and_end_of_text(tmp_path, gpt2_folder):
    ours = gpt2_tokenizer(gpt2_folder)
    for name, text in hf_tokenizer_files(ours, 64).items():
        (tmp_path / name).write_text(text)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    plain = TORTURE.replace(
        "<|endoftext|>", ""
    )  # GPT-2's files make it a special token; ours: text
    assert theirs(plain)["input_ids"] == ours.encode(plain)
    assert theirs.eos_token_id == ours.eot_id
    assert end_ids(ours) == [ours.eot_id]  # generation stops where ours does: <|endoftext|>
    breaks = break_ids(ours)  # and, asked for one line, at any token holding a line break
    assert ours.encode("\n")[0] in breaks and all("\n" in ours.decode([i]) for i in breaks)


def test_transformers_generate_on_the_export_stops_where_ours_does(trained_export, corpus):
    """The export declares our sampler's end (generation_config.json, config.json): a BPE run
    has no end-of-text token, so transformers' generate writes on past every line break, token
    for token as our own generate does."""
    from runs.loading import load_run

    hf = transformers.GPT2LMHeadModel.from_pretrained(trained_export[1]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(trained_export[1])
    assert hf.generation_config.eos_token_id == hf.config.eos_token_id == []
    line = (corpus / "text.txt").read_text().splitlines()[0]
    prompt = tokenizer(line[: line.rindex(" ")], return_tensors="pt")  # a line, its end to come
    room = hf.config.n_positions - prompt["input_ids"].size(1)
    theirs = hf.generate(**prompt, do_sample=False, max_new_tokens=room)[0]
    ours = load_run(trained_export[0]).model.generate(
        prompt["input_ids"], max_new_tokens=room, do_sample=False
    )[0]
    assert theirs.tolist() == ours.tolist()  # greedy: the same tokens, the same length
    crossed = []
    for seed in range(4):  # sampled: on to max_new_tokens, as ours, across line breaks
        torch.manual_seed(seed)
        out = hf.generate(**prompt, do_sample=True, max_new_tokens=room)[0]
        assert out.size(0) == prompt["input_ids"].size(1) + room
        crossed.append("\n" in tokenizer.decode(out[prompt["input_ids"].size(1) : -1]))
    assert any(crossed), "no sample wrote past a line break"


def test_transformers_generate_asked_for_one_line_stops_at_its_end(trained_export):
    """break_ids, passed as eos_token_id: every token that holds a line break, not only the
    newline's own token, which a BPE merges into ".\n"; generate stops there, and nowhere
    else, on a model trained on lines."""
    hf = transformers.GPT2LMHeadModel.from_pretrained(trained_export[1]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(trained_export[1])
    breaks = [i for i in range(len(tokenizer)) if "\n" in tokenizer.decode([i])]
    assert tokenizer("the barn.\n")["input_ids"][-1] != tokenizer("\n")["input_ids"][0]  # ".\n"
    prompt = tokenizer("the cat", return_tensors="pt")
    room = hf.config.n_positions - prompt["input_ids"].size(1)
    ends = []
    for seed in range(8):
        samples = []
        for eos in (breaks, None):  # at a line break, then no stop at all
            torch.manual_seed(seed)
            out = hf.generate(**prompt, do_sample=True, max_new_tokens=room, eos_token_id=eos)
            samples.append(out[0, prompt["input_ids"].size(1) :].tolist())
        stopped, free = samples
        first = next((n for n, i in enumerate(free) if i in breaks), None)
        assert stopped == (free if first is None else free[: first + 1]), seed
        if first is not None:
            ends.append(tokenizer.decode(stopped[-1:]))
    assert ends, "no sample reached the end of a line"
    assert any(end != "\n" for end in ends), ends  # what the newline's token alone would miss


@pytest.mark.parametrize(
    "overrides, names",
    [
        ({"rotary": True}, "model.rotary"),
        ({"qk_norm": True}, "model.qk_norm"),
        ({"tie_embeddings": False}, "model.tie_embeddings"),
        ({"local_window": 4, "bias": True}, "model.bias"),
    ],
)
def test_what_no_export_can_express_is_refused_and_nothing_is_written(tmp_path, overrides, names):
    loud_run(tmp_path / "run", **overrides)
    with pytest.raises(ValueError, match=names) as error:
        export_hf(tmp_path / "run", tmp_path / "hf")
    one_line(error)
    assert not (tmp_path / "hf").exists()


def test_a_char_run_or_a_folder_with_files_is_refused_at_the_command_line(tmp_path):
    loud_run(tmp_path / "char", kind="char")  # train.py's main() in this process
    r = run_main("train.py", f"out_dir={tmp_path / 'char'}", "--export-hf", tmp_path / "hf")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "char tokenizer" in r.stderr and "tokenizer.kind=bpe" in r.stderr  # the way out
    assert not (tmp_path / "hf").exists()
    loud_run(tmp_path / "bpe")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    r = run_main("train.py", f"out_dir={tmp_path / 'bpe'}", "--export-hf", tmp_path / "full")
    assert r.returncode == 2 and str(tmp_path / "full") in r.stderr and "empty folder" in r.stderr
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    r = run_main("train.py", f"out_dir={tmp_path / 'bpe'}", "--export-hf", tmp_path / "hf")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == sorted(
        [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "vocab.json",
            "merges.txt",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
    )


@pytest.mark.slow
def test_an_export_to_a_read_only_folder_names_the_export_not_the_run_folder(tmp_path):
    loud_run(tmp_path / "bpe")
    with contextlib.ExitStack() as stack:
        if not read_only_folder(stack, tmp_path / "ro"):
            pytest.skip("cannot make a read-only folder here")
        dest = tmp_path / "ro" / "hf"
        r = run_script("train.py", f"out_dir={tmp_path / 'bpe'}", "--export-hf", dest)
    said = error_line(r)
    assert str(dest) in said and "--export-hf" in said and "out_dir" not in said, said

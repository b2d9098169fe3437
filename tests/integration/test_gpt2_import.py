"""GPT-2 from the Hugging Face format (model/gpt2_import.py, data/tokenizer.py's gpt2 files),
checked against transformers, the reference implementation, on a tiny GPT-2 it makes."""

import json
import re
import shutil
from dataclasses import replace

import pytest
import torch

from data.tokenizer import gpt2_tokenizer, load_tokenizer
from model.gpt import GPT
from model.gpt2_import import read_gpt2
from model.sampling import generate
from runs.loading import load_pretrained, load_run
from tests.fakehub import tiny_gpt2_folder
from tests.helpers import one_line, patterns

transformers = pytest.importorskip(
    "transformers", reason="the reference: pip install -r requirements-test.txt"
)

TORTURE = (
    "\ufeffBOM first\r\nCRLF line\r\ntabs\tand\t\tmore\n"
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467 "
    "thumb \U0001f44d\U0001f3fd flag \U0001f3f3\ufe0f\u200d\U0001f308\n"
    "accents: café naïve déjà vu e\u0301 n\u0303 Ångström\n"
    "CJK: 日本語のテキスト 中文 한국어 東京\n"
    "digits 0 12 345 6789 3.14159 1,000,000 and   multiple    spaces   \n"
    "it's they'll we've I'm you'd she's 'quoted' \"double\"\n\n\n  trailing  "
)


@pytest.fixture(scope="module")
def reference(gpt2_folder):
    # eager attention: the only implementation that hands back the attention weights.
    return transformers.GPT2LMHeadModel.from_pretrained(
        gpt2_folder, attn_implementation="eager"
    ).eval()


@pytest.fixture(scope="module")
def run(gpt2_folder):
    return load_run(gpt2_folder)


def assert_same_model(ours, reference, ids):
    with torch.no_grad():
        logits, attn = ours(ids), patterns(ours, ids)
        theirs = reference(ids, output_attentions=True)
    assert logits.shape == theirs.logits.shape  # the padded rows are never scored
    assert (logits - theirs.logits).abs().max().item() <= 1e-5
    assert len(attn) == len(theirs.attentions) == 2
    for layer, (a, b) in enumerate(zip(attn, theirs.attentions)):
        assert a.shape == b.shape and (a - b).abs().max().item() <= 1e-5, f"layer {layer}"
    # Not a near-uniform pattern that anything would match: some head looks mostly at one token.
    assert max(a[..., 1:, :].max().item() for a in attn) > 0.5


# --- the model ---------------------------------------------------------------------------------


def test_logits_and_every_layers_attention_equal_transformers(run, reference):
    ids = torch.tensor(
        [run.tokenizer.encode("the owl sat on the mat because it was tired. 東京 😀 123")]
    )
    assert ids.size(1) > 10
    assert_same_model(run.model, reference, ids)
    assert run.model.config.gelu_approximate == "tanh"
    config = run.model.config
    assert config.padded_vocab_size == config.vocab_size  # loaded to sample or study: unpadded
    assert run.model.lm_head.weight is run.model.tok_emb.weight


def test_the_exact_gelu_would_not_match(gpt2_folder, reference):
    """The GELU approximation is what makes the match exact: with erf-GELU it drifts."""
    config, state = read_gpt2(gpt2_folder)
    config.gelu_approximate = "none"
    model = GPT(config).eval()
    model.load_state_dict(state)
    ids = torch.tensor([[5, 80, 200, 31, 7, 99]])
    with torch.no_grad():
        assert (model(ids) - reference(ids).logits).abs().max().item() > 1e-5


def test_greedy_generation_matches_transformers_token_for_token(run, reference):
    prompt = torch.tensor([run.tokenizer.encode("the cat and the dog")])
    ours = torch.stack(list(generate(run.model, prompt, 30, temperature=0.0)), dim=1)
    theirs = reference.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=30,
        pad_token_id=0,
    )
    assert theirs.size(1) == prompt.size(1) + 30
    assert ours.tolist() == theirs[:, prompt.size(1) :].tolist()


def test_pytorch_model_bin_with_old_key_names_loads_the_same(tmp_path, gpt2_folder, reference):
    old = tiny_gpt2_folder(tmp_path / "bin", bin_file=True)
    assert not (old / "model.safetensors").exists()
    assert "h.0.attn.masked_bias" in torch.load(old / "pytorch_model.bin", weights_only=True)
    ours = load_run(old).model
    assert_same_model(ours, reference, torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]]))


def test_loading_draws_no_random_numbers_and_inits_only_shapes(gpt2_folder, monkeypatch):
    seen = []
    normal_ = torch.nn.init.normal_

    def spy(tensor, *args, **kwargs):
        seen.append(tensor.device.type)
        return normal_(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.nn.init, "normal_", spy)
    before = torch.get_rng_state()
    load_run(gpt2_folder)
    assert torch.equal(torch.get_rng_state(), before)  # no random init on real memory
    assert seen and set(seen) == {"meta"}
    GPT(read_gpt2(gpt2_folder)[0])  # the ordinary constructor, by contrast, draws them
    assert not torch.equal(torch.get_rng_state(), before)


def test_load_pretrained_gives_config_weights_and_tokenizer(gpt2_folder, run):
    config, state, tokenizer = load_pretrained(gpt2_folder)
    assert config.vocab_multiple == 64 and replace(config, vocab_multiple=1) == run.model.config
    assert tokenizer.vocab_size == config.vocab_size
    assert config.padded_vocab_size % 64 == 0 and config.padded_vocab_size > config.vocab_size
    padding = state["tok_emb.weight"][config.vocab_size :]  # to train: padded, with zero rows
    assert padding.numel() > 0 and not padding.any()
    model = GPT(config)
    model.load_state_dict(state)  # strict: every name and shape fits our GPT
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():  # the padded table is another matmul shape: the same up to rounding
        torch.testing.assert_close(model.eval()(ids), run.model(ids), atol=1e-5, rtol=0)
    path = str(gpt2_folder)
    assert run.meta == {"source": path, "folder": path, "tokenizer_kind": "gpt2"}


# --- the tokenizer -----------------------------------------------------------------------------


@pytest.mark.parametrize("reference_class", ["GPT2TokenizerFast", "GPT2Tokenizer"])
def test_tokenizer_ids_equal_transformers_on_a_unicode_torture_text(
    run, gpt2_folder, reference_class
):
    cls = getattr(transformers, reference_class)
    reference = cls(vocab=str(gpt2_folder / "vocab.json"), merges=str(gpt2_folder / "merges.txt"))
    expected = reference(TORTURE)["input_ids"]
    assert len(expected) > 100  # a tokenizer built wrongly can quietly return nothing
    assert run.tokenizer.encode(TORTURE) == expected
    assert run.tokenizer.decode(expected) == TORTURE
    ids, starts = run.tokenizer.encode_with_offsets(TORTURE)
    assert ids == expected and starts == sorted(starts) and starts[0] == 0


def test_end_of_text_is_plain_text_but_its_id_is_known(run, gpt2_folder):
    vocab = json.loads((gpt2_folder / "vocab.json").read_text())
    assert run.tokenizer.eot_id == vocab["<|endoftext|>"]
    ids = run.tokenizer.encode("a <|endoftext|> b")
    assert run.tokenizer.eot_id not in ids
    assert run.tokenizer.decode(ids) == "a <|endoftext|> b"
    assert run.tokenizer.decode([run.tokenizer.eot_id]) == "<|endoftext|>"


def test_tokenizer_from_files_saves_and_loads_by_itself(run, gpt2_folder, tmp_path):
    run.tokenizer.save(tmp_path / "tok.json")
    loaded = load_tokenizer(tmp_path / "tok.json")  # no folder needed any more
    assert (loaded.kind, loaded.vocab_size) == ("gpt2", run.tokenizer.vocab_size)
    assert loaded.eot_id == run.tokenizer.eot_id
    assert loaded.encode(TORTURE) == run.tokenizer.encode(TORTURE)


def test_gpt2_kind_finds_gpt2_in_the_hugging_face_cache(gpt2_folder, tmp_path, monkeypatch):
    from huggingface_hub import constants

    snapshot = tmp_path / "hub" / "models--openai-community--gpt2" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc")
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(gpt2_folder / name, snapshot / name)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    tokenizer = gpt2_tokenizer()  # offline: the cache is enough
    assert tokenizer.encode(TORTURE) == gpt2_tokenizer(gpt2_folder).encode(TORTURE)


# --- bad input: one line each, saying what to do ------------------------------------------------


def copy_folder(gpt2_folder, tmp_path, drop=(), config_changes=None):
    out = tmp_path / "copy"
    shutil.copytree(gpt2_folder, out)
    for name in drop:
        (out / name).unlink()
    if config_changes:
        config = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps({**config, **config_changes}))
    return out


def test_a_folder_without_config_json(gpt2_folder, tmp_path):
    bad = copy_folder(gpt2_folder, tmp_path, drop=["config.json"])
    with pytest.raises(ValueError) as err:
        read_gpt2(bad)
    assert "has no config.json" in one_line(err) and "model.safetensors" in one_line(err)
    with pytest.raises(ValueError) as err:
        load_run(bad)
    one_line(err, str(bad), "no config.json")


def test_a_folder_without_weights(gpt2_folder, tmp_path):
    with pytest.raises(ValueError) as err:
        load_run(copy_folder(gpt2_folder, tmp_path, drop=["model.safetensors"]))
    one_line(err, "no weights", "model.safetensors", "pytorch_model.bin")


def test_a_folder_without_tokenizer_files(gpt2_folder, tmp_path):
    with pytest.raises(ValueError) as err:
        load_run(copy_folder(gpt2_folder, tmp_path, drop=["merges.txt"]))
    assert "has no merges.txt" in one_line(err) and "vocab.json and merges.txt" in one_line(err)


def test_another_model_type_names_what_is_supported(gpt2_folder, tmp_path):
    with pytest.raises(ValueError) as err:
        load_run(copy_folder(gpt2_folder, tmp_path, config_changes={"model_type": "llama"}))
    assert "'llama'" in one_line(err) and "only model_type 'gpt2'" in one_line(err)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"activation_function": "relu"}, "activation_function 'relu'"),
        ({"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon"),
        ({"n_inner": 100}, "n_inner 100"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ],
)
def test_gpt2_variants_we_do_not_implement_are_refused(gpt2_folder, tmp_path, change, fragment):
    with pytest.raises(ValueError) as err:
        read_gpt2(copy_folder(gpt2_folder, tmp_path, config_changes=change))
    assert fragment in one_line(err)


@pytest.mark.parametrize(
    "change, names",
    [
        ({"n_embd": 64}, ("wte.weight", ", 32)", ", 64)")),  # the shape found, the shape implied
        ({"n_layer": 3}, ("h.2.ln_1.weight",)),  # the weight missing
        ({"n_layer": 1}, ("h.1.",)),  # a weight left over
        ({"n_positions": 32}, ("wpe.weight", "(64, 32)", "(32, 32)")),
    ],
)
def test_weights_that_do_not_match_the_config(gpt2_folder, tmp_path, change, names):
    with pytest.raises(ValueError) as err:
        load_run(copy_folder(gpt2_folder, tmp_path, config_changes=change))
    one_line(err, str(tmp_path), "config.json", *names)


def test_a_tokenizer_of_another_size_is_refused(gpt2_folder, tmp_path):
    bad = copy_folder(gpt2_folder, tmp_path)
    merges = (bad / "merges.txt").read_text().splitlines()
    vocab = json.loads((bad / "vocab.json").read_text())
    del vocab["".join(merges[-1].split(" "))]  # the last merge and its token: one token fewer
    (bad / "vocab.json").write_text(json.dumps(vocab))
    (bad / "merges.txt").write_text("\n".join(merges[:-1]) + "\n")
    with pytest.raises(ValueError) as err:
        load_run(bad)
    message = one_line(err, "two runs")
    assert re.search(
        rf"\b{len(vocab)} tokens\b.*\b{len(vocab) + 1}\b", message
    )  # its size, then the model's


def test_tokenizer_files_that_are_not_gpt2_style_are_refused(gpt2_folder, tmp_path):
    bad = copy_folder(gpt2_folder, tmp_path)
    (bad / "merges.txt").write_text("#version: 0.2\nno such merge\n")
    with pytest.raises(ValueError) as err:
        load_run(bad)
    one_line(err, str(bad), "GPT-2's byte-level BPE")


def test_a_pytorch_model_bin_carrying_code_is_refused_and_nothing_runs(gpt2_folder, tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('ran')",))

    bad = copy_folder(gpt2_folder, tmp_path, drop=["model.safetensors"])
    torch.save({"wte.weight": torch.zeros(3), "payload": Payload()}, bad / "pytorch_model.bin")
    with pytest.raises(ValueError) as err:
        load_run(bad)
    one_line(err, "pytorch_model.bin", "plain-data", "download it again")
    assert not marker.exists()


def test_a_truncated_safetensors_file(gpt2_folder, tmp_path):
    bad = copy_folder(gpt2_folder, tmp_path)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError) as err:
        load_run(bad)
    one_line(err, "model.safetensors", "truncated", "download it again")

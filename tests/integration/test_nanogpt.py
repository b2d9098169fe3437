"""nanoGPT run folders: --ckpt and train.init_from read nanoGPT's ckpt.pt (compiled or not) and
its meta.pkl, the latter as plain data only, so a pickle that would run code is refused."""

import pickle

import pytest
import torch

from lab.run import train
from model.gpt import GPT, GPTConfig
from runs.loading import NoNanogptMeta, load_run
from tests.helpers import error_line, run_generate, run_main, tiny_config

CHARS = sorted(set("\n !'.,?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
# Our names -> nanoGPT's (the inverse of model/nanogpt_import.py's table), as its GPT names them.
NANOGPT_NAMES = (
    ("tok_emb.", "transformer.wte."),
    ("pos_emb.", "transformer.wpe."),
    ("ln_f.", "transformer.ln_f."),
    ("blocks.", "transformer.h."),
    (".attn.w_qkv.", ".attn.c_attn."),
    (".attn.w_out.", ".attn.c_proj."),
    (".mlp.w_in.", ".mlp.c_fc."),
    (".mlp.w_out.", ".mlp.c_proj."),
)


def nanogpt_folder(folder, compiled=False, mask=False, bias=True, vocab=None):
    """A run folder as nanoGPT's train.py leaves it: ckpt.pt with its keys and layout, and the
    char vocabulary's meta.pkl beside it (none when `vocab` is given: a GPT-2-vocabulary run).
    Returns our model that the weights come from."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = vocab or len(CHARS)
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=rows,
            block_size=32,
            n_layer=2,
            n_head=2,
            n_embd=32,
            bias=bias,
            vocab_multiple=1,
        )
    )
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(5)  # attention far from uniform, so comparisons bite
    state = {}
    for name, tensor in model.state_dict().items():
        if name == "positions":
            continue
        for ours, theirs in NANOGPT_NAMES:
            name = name.replace(ours, theirs)
        state[("_orig_mod." if compiled else "") + name] = tensor
    if mask:  # nanoGPT without flash attention keeps its causal mask as a buffer
        for i in range(2):
            state[f"{'_orig_mod.' if compiled else ''}transformer.h.{i}.attn.bias"] = torch.tril(
                torch.ones(32, 32)
            ).view(1, 1, 32, 32)
    model_args = dict(
        n_layer=2, n_head=2, n_embd=32, block_size=32, bias=bias, vocab_size=rows, dropout=0.0
    )
    optimizer = torch.optim.AdamW(model.parameters())
    torch.save(
        {
            "model": state,
            "optimizer": optimizer.state_dict(),
            "model_args": model_args,
            "iter_num": 250,
            "best_val_loss": torch.tensor(1.5),
            "config": {"dataset": "shakespeare_char", "batch_size": 12},
        },
        folder / "ckpt.pt",
    )
    if vocab is None:
        with open(folder / "meta.pkl", "wb") as f:
            pickle.dump(
                {
                    "vocab_size": len(CHARS),
                    "itos": dict(enumerate(CHARS)),
                    "stoi": {c: i for i, c in enumerate(CHARS)},
                },
                f,
            )
    return model.eval()


@pytest.mark.parametrize(
    "compiled, mask, bias", [(False, False, True), (True, True, True), (False, True, False)]
)
def test_a_nanogpt_run_loads_with_its_logits_and_characters(tmp_path, compiled, mask, bias):
    source = nanogpt_folder(tmp_path / "nano", compiled, mask, bias)
    run = load_run(tmp_path / "nano")
    text = "The cat sat. It was tired!"
    ids = run.tokenizer.encode(text)
    assert ids == [CHARS.index(c) for c in text] and run.tokenizer.decode(ids) == text
    with torch.no_grad():
        assert torch.equal(run.model(torch.tensor([ids])), source(torch.tensor([ids])))


def test_greedy_text_attention_and_the_probe_work_on_a_nanogpt_run(tmp_path):
    nanogpt_folder(tmp_path / "nano")
    code, out, err = run_generate(
        "--ckpt",
        tmp_path / "nano",
        "--prompt",
        "The owl",
        "--temperature",
        "0",
        "--max-new-tokens",
        "12",
        "--seed",
        "1",
    )
    assert code == 0 and out.startswith("The owl") and len(out.rstrip("\n")) > len("The owl"), err
    code, out, err = run_generate(
        "--ckpt", tmp_path / "nano", "--attention", "The dog ran because it was hungry."
    )
    assert code == 0 and "it" in out and "dog" in out, err
    code, out, err = run_generate(
        "--ckpt", tmp_path / "nano", "--probe", "--json", "--no-causal", "--permutations", "10"
    )
    assert code == 0 and '"best_head"' in out, err


def test_meta_pkl_beside_or_named_and_a_missing_one_says_where_to_put_it(tmp_path):
    nanogpt_folder(tmp_path / "nano")
    (tmp_path / "nano" / "meta.pkl").rename(tmp_path / "elsewhere.pkl")
    code, _, err = run_generate(
        "--ckpt", tmp_path / "nano", "--prompt", "a", "--max-new-tokens", "2"
    )
    assert code == 2 and "meta.pkl" in err and "--meta" in err and err.count("\n") == 1
    with pytest.raises(NoNanogptMeta) as e:  # the Python call: the argument, not the flag
        load_run(tmp_path / "nano")
    assert "nanogpt_meta" in str(e.value) and "--meta" not in str(e.value)
    assert load_run(tmp_path / "nano", nanogpt_meta=tmp_path / "elsewhere.pkl").tokenizer
    code, out, err = run_generate(
        "--ckpt",
        tmp_path / "nano",
        "--meta",
        tmp_path / "elsewhere.pkl",
        "--prompt",
        "a",
        "--max-new-tokens",
        "2",
        "--seed",
        "0",
    )
    assert code == 0, err


class Payload:
    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.target),))


@pytest.mark.parametrize("hostile", ["runs code", "needs a class"])
def test_a_meta_pkl_that_needs_more_than_plain_data_is_refused_and_nothing_in_it_runs(
    tmp_path, hostile
):
    nanogpt_folder(tmp_path / "nano")
    ran = tmp_path / "it-ran"
    if hostile == "runs code":
        payload = Payload()
        payload.target = str(ran)
        meta = {"itos": dict(enumerate(CHARS)), "x": payload}
    else:
        from collections import OrderedDict

        meta = {"itos": OrderedDict(enumerate(CHARS))}
    (tmp_path / "nano" / "meta.pkl").write_bytes(pickle.dumps(meta))
    code, _, err = run_generate(
        "--ckpt", tmp_path / "nano", "--prompt", "a", "--max-new-tokens", "2"
    )
    assert code == 2 and err.count("\n") == 1 and "meta.pkl" in err and "plain-data" in err
    assert not ran.exists()


def test_fine_tuning_starts_from_a_nanogpt_run_with_its_characters(tmp_path):
    nanogpt_folder(tmp_path / "nano")
    text = tmp_path / "text.txt"
    text.write_text("The cat sat on the mat. It was tired, was it not?\n" * 200)
    config = tiny_config(
        tmp_path,
        tmp_path / "tuned",
        f"train.init_from={tmp_path / 'nano'}",
        "model.n_embd=32",
        "model.block_size=32",
        "train.max_iters=4",
        "train.eval_interval=4",
    )
    result = train(config)
    assert result["step"] == 4 and result["final"]["val_loss"] < 10


def test_a_nanogpt_gpt2_run_takes_gpt2s_encoding(tmp_path):
    from data.tokenizer import gpt2_tokenizer

    try:
        gpt2 = gpt2_tokenizer()
    except ValueError as e:
        pytest.skip(f"GPT-2's encoding is not available offline here: {e}")
    source = nanogpt_folder(tmp_path / "nano", vocab=50304)
    run = load_run(tmp_path / "nano")
    assert run.tokenizer.vocab_size == gpt2.vocab_size == run.model.config.vocab_size == 50257
    ids = torch.tensor([gpt2.encode("Hello there")])
    with torch.no_grad():
        assert torch.equal(run.model(ids), source(ids)[..., :50257])


@pytest.mark.slow
def test_a_folder_given_as_meta_pkl_is_read_inside_or_named_as_a_folder(tmp_path):
    nanogpt_folder(tmp_path / "nano")
    data = tmp_path / "data" / "shakespeare_char"
    data.mkdir(parents=True)
    (tmp_path / "nano" / "meta.pkl").rename(data / "meta.pkl")  # where nanoGPT writes it
    r = run_main(
        "generate.py",
        "--ckpt",
        tmp_path / "nano",
        "--meta",
        data,
        "--prompt",
        "a",
        "--max-new-tokens",
        "2",
        "--seed",
        "0",
    )
    assert r.returncode == 0, r.stderr
    said = error_line(
        run_main("generate.py", "--ckpt", tmp_path / "nano", "--meta", data.parent, "--prompt", "a")
    )
    assert str(data.parent) in said and "is a folder" in said, said

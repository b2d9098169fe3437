"""TransformerLens's calling conventions on our GPT (model.hooked, model.cache): the methods,
the cache's shorthand as TransformerLens resolves it, model.cfg, tokens from text on a loaded
run, and the errors of a wrong call."""

import dataclasses

import pytest
import torch

from model.cache import ActivationCache, act_name
from model.gpt import lm_loss
from model.hooks import hook_points, hooks, run_with_cache
from runs.loading import load_run
from tests.helpers import make_run, one_line

IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3))
TEXT = "The cat sat on the mat because it was tired."


def no_hooks_left(model):
    return all(not point.fns for point in hook_points(model).values())


# Shorthand as tutorials write it, and the argument forms get_act_name takes.
SHORTHAND = [
    ("pattern", 0),
    ("attn", 1),
    ("z", 1, "attn"),
    ("k", 0, "a"),
    ("q", 1),
    ("v", 0),
    ("result", 1),
    ("attn_scores", 0),
    ("attn_logits", 1),
    ("resid_pre", 1),
    ("resid_mid", 0),
    ("resid_post", 1),
    ("attn_out", 0),
    ("mlp_out", 1),
    ("mlp_in", 0),
    ("pre", 1),
    ("post", 0),
    ("mlp_post", 1),
    ("normalized", 1, "ln1"),
    ("normalized", 0, "ln2"),
    ("normalized",),
    ("embed",),
    ("pos_embed",),
    ("pattern1",),
    ("k0",),
    ("normalized1ln2",),
    ("blocks.0.attn.hook_z",),
    ("hook_embed",),
]


@pytest.mark.parametrize("key", SHORTHAND)
def test_shorthand_resolves_as_transformerlens_resolves_it(key):
    utilities = pytest.importorskip("transformer_lens.utilities")
    assert act_name(*key) == utilities.get_act_name(*key)


@torch.no_grad()
def test_the_cache_takes_full_names_shorthand_and_negative_layers(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    logits, cache = model.run_with_cache(IDX)
    assert isinstance(cache, ActivationCache) and isinstance(cache, dict)
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["z", 1, "attn"] is cache["blocks.1.attn.hook_z"]
    assert cache["pattern1"] is cache["blocks.1.attn.hook_pattern"]
    assert cache["embed"] is cache["hook_embed"]
    assert cache["normalized"] is cache["ln_final.hook_normalized"]
    assert ("pattern", 0) in cache and ("pattern", 7) not in cache
    assert cache["scale"] is cache["ln_final.hook_scale"]
    assert cache["scale", 0, "ln1"] is cache["blocks.0.ln1.hook_scale"]
    assert len(cache) == len(list(cache.keys())) == 4 + 2 * 19
    torch.testing.assert_close(logits, model(IDX), atol=1e-5, rtol=0)
    with pytest.raises(KeyError) as e:
        cache["patern", 0]
    assert "blocks.0.attn.hook_pattern" in str(e.value) and "\n" not in str(e.value)
    moved = cache.to("cpu")
    assert moved is cache and cache["pattern", 0].device.type == "cpu"


@torch.no_grad()
def test_names_filter_takes_a_name_a_list_a_predicate_or_nothing(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    z = "blocks.1.attn.hook_z"
    assert list(model.run_with_cache(IDX, names_filter=z)[1]) == [z]
    assert list(model.run_with_cache(IDX, names_filter=[z, "hook_embed"])[1]) == ["hook_embed", z]
    _, patterns = model.run_with_cache(IDX, names_filter=lambda n: n.endswith("hook_pattern"))
    assert list(patterns) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    _, plain = model.run_with_cache(IDX, names_filter=z, return_cache_object=False)
    assert type(plain) is dict and list(plain) == [z]
    _, one = model.run_with_cache(IDX[:1], names_filter=z, remove_batch_dim=True)
    assert one[z].shape == (12, 4, 8)
    _, module_level = run_with_cache(model, IDX, [z])  # the project's own spelling still works
    assert torch.equal(module_level[z], plain[z])


@torch.no_grad()
def test_run_with_hooks_zero_ablates_and_every_hook_comes_off(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    seen = []

    def zero_head_1(z, hook):
        seen.append(hook.name)
        assert hook.layer() == int(hook.name.split(".")[1])
        z[:, :, 1] = 0
        return z

    clean = model(IDX)
    ablated = model.run_with_hooks(IDX, fwd_hooks=[("blocks.0.attn.hook_z", zero_head_1)])
    assert seen == ["blocks.0.attn.hook_z"] and no_hooks_left(model)
    assert (ablated - clean).abs().max() > 1e-4
    # The same ablation through the project's own hooks gives the same logits.
    with hooks(model, {"blocks.0.attn.hook_z": zero_head_1}):
        torch.testing.assert_close(model(IDX), ablated, atol=0, rtol=0)
    twice = model.run_with_hooks(
        IDX, fwd_hooks=[(lambda n: n.endswith("hook_z"), zero_head_1)] * 2
    )  # a predicate, and one pair twice: each installed and removed
    assert seen[-4:] == ["blocks.0.attn.hook_z"] * 2 + ["blocks.1.attn.hook_z"] * 2
    assert no_hooks_left(model) and not torch.equal(twice, ablated)


def test_hooks_come_off_on_an_exception_and_stay_only_when_asked(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()

    def broken(value, hook):
        raise RuntimeError("a broken hook")

    with pytest.raises(RuntimeError, match="broken hook"):
        model.run_with_hooks(IDX, fwd_hooks=[("blocks.0.hook_resid_pre", broken)])
    assert no_hooks_left(model)
    with pytest.raises(ZeroDivisionError), model.hooks(fwd_hooks=[("hook_embed", broken)]):
        raise ZeroDivisionError("inside the block")
    assert no_hooks_left(model)
    with pytest.raises(ValueError):  # the second name is wrong: the first is taken off again
        model.run_with_hooks(IDX, fwd_hooks=[("hook_embed", broken), ("hook_embd", broken)])
    assert no_hooks_left(model)
    kept = lambda value, hook: None  # noqa: E731
    model.run_with_hooks(IDX, fwd_hooks=[("hook_embed", kept)], reset_hooks_end=False)
    assert hook_points(model)["hook_embed"].fns == [kept]
    model.reset_hooks()
    assert no_hooks_left(model)


def test_unknown_keywords_and_names_are_one_line_errors_naming_the_nearest(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    with pytest.raises(TypeError) as e:
        model.run_with_cache(IDX, names_filer="hook_embed")
    one_line(e, "names_filer", "names_filter")
    with pytest.raises(TypeError) as e:
        model.run_with_hooks(IDX, fwd_hook=[])
    one_line(e, "fwd_hook", "fwd_hooks")
    with pytest.raises(TypeError) as e:
        model.run_with_hooks(IDX, stop_at_layer=1)
    one_line(e, "stop_at_layer", "return_type")  # nothing near: what it takes
    with pytest.raises(TypeError) as e, model.hooks(fwd_hook=[("hook_embed", print)]):
        pass
    one_line(e, "fwd_hook", "fwd_hooks")
    with pytest.raises(ValueError) as e:
        model.run_with_cache(IDX, names_filter=["blocks.0.attn.hook_patern"])
    one_line(e, "hook_patern", "blocks.0.attn.hook_pattern")
    with pytest.raises(ValueError) as e:
        model.run_with_hooks(IDX, fwd_hooks=[("blocks.0.hook_z", lambda v, h: None)])
    one_line(e, "blocks.0.hook_z", "blocks.0.attn.hook_z")
    assert no_hooks_left(model)


def test_cfg_has_transformerlens_names_and_is_read_only(tiny_hooked_gpt):
    model = tiny_hooked_gpt()
    cfg = model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head, cfg.d_vocab, cfg.n_ctx) == (
        2,
        4,
        32,
        8,
        50,
        16,
    )
    assert cfg.device == torch.device("cpu") and cfg.n_key_value_heads is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_layers = 3
    with pytest.raises(AttributeError):
        model.cfg = cfg
    assert model.config.n_layer == 2  # our own names beside it


@torch.no_grad()
def test_one_dimensional_tokens_are_a_batch_of_one(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    ids = IDX[0]
    logits, cache = run_with_cache(model, ids, ["blocks.0.attn.hook_pattern"])  # issue 45's case
    assert logits.shape == (1, 12, 50) and cache["pattern", 0].shape == (1, 4, 12, 12)
    # Caching the pattern takes the explicit path: the same function, rounded otherwise.
    torch.testing.assert_close(logits, model(ids[None]), atol=1e-5, rtol=0)
    assert torch.equal(model(ids), model(ids[None]))
    assert torch.equal(model.run_with_cache(ids, names_filter="hook_embed")[0], model(ids[None]))
    with pytest.raises(ValueError) as e:
        model(IDX[None])
    one_line(e, "(1, 2, 12)")


@torch.no_grad()
def test_return_type_gives_the_next_token_loss(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    logits = model(IDX)
    loss = model(IDX, return_type="loss")
    assert torch.equal(loss, lm_loss(logits[:, :-1], IDX[:, 1:]))
    both = model.run_with_hooks(IDX, return_type="both")
    assert torch.equal(both[0], logits) and torch.equal(both[1], loss)
    assert model(IDX, return_type=None) is None
    with pytest.raises(ValueError) as e:
        model(IDX, return_type="logit")
    one_line(e, "'logit'", "loss")


def test_a_backward_hook_sees_the_gradient_of_its_point(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    name = "blocks.0.hook_resid_post"
    grads = []
    with model.hooks(bwd_hooks=[(name, lambda grad, hook: grads.append(grad))]):
        loss = model(IDX, return_type="loss")
    loss.backward()
    assert len(grads) == 1 and grads[0].shape == (2, 12, 32)
    logits, cache = run_with_cache(model, IDX, [name], detach=False)
    (expected,) = torch.autograd.grad(lm_loss(logits[:, :-1], IDX[:, 1:]), [cache[name]])
    torch.testing.assert_close(grads[0], expected, atol=1e-7, rtol=0)


def test_incl_bwd_caches_each_points_gradient_and_add_hook_keeps_a_hook(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    names = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_v"]
    loss, cache = model.run_with_cache(IDX, names_filter=names, incl_bwd=True, return_type="loss")
    assert sorted(cache) == sorted(names + [f"{n}_grad" for n in names]) and no_hooks_left(model)
    logits, kept = run_with_cache(model, IDX, names, detach=False)
    want = torch.autograd.grad(lm_loss(logits[:, :-1], IDX[:, 1:]), [kept[n] for n in names])
    for name, grad in zip(names, want):
        torch.testing.assert_close(cache[f"{name}_grad"], grad, atol=1e-7, rtol=0)
    with pytest.raises(ValueError) as e:
        model.run_with_cache(IDX, names_filter=names, incl_bwd=True)  # logits: not a scalar
    one_line(e, "return_type")
    seen = []
    model.add_hook("hook_embed", lambda value, hook: seen.append("fwd"))
    model.add_hook("hook_embed", lambda grad, hook: seen.append("bwd"), dir="bwd")
    model(IDX, return_type="loss").backward()
    model(IDX)
    assert seen == ["fwd", "bwd", "fwd"]  # both stay on: each pass, and its backward
    model.reset_hooks(direction="fwd")  # the backward one stays, as in TransformerLens
    seen.clear()
    model(IDX, return_type="loss").backward()
    assert seen == ["bwd"]
    model.reset_hooks()
    assert no_hooks_left(model)


def test_hook_lifetime_arguments_are_checked(tiny_hooked_gpt):
    """The lifetime itself, call by call beside TransformerLens's bridge: test_tlens_bridge.py."""
    model = tiny_hooked_gpt()
    with pytest.raises(ValueError) as e:
        model.add_hook("hook_embed", lambda value, hook: None, dir="sideways")
    one_line(e, "'sideways'", "bwd")
    with pytest.raises(TypeError) as e:
        model.add_hook("hook_embed", lambda value: None)  # checked when added, not when run
    one_line(e, "fn(activation, hook)")
    with pytest.raises(ValueError) as e:
        model.reset_hooks(direction="forward")
    one_line(e, "'forward'", "fwd")
    model.add_perma_hook("hook_embed", lambda value, hook: None)
    with pytest.raises(ValueError) as e:
        model.reset_hooks(level=1)
    one_line(e, "level")
    model.reset_hooks()
    assert not no_hooks_left(model)  # the permanent hook stays
    model.reset_hooks(including_permanent=True)
    assert no_hooks_left(model)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hooked") / "run"
    make_run(folder, "bpe", 64)
    return load_run(folder)


@torch.no_grad()
def test_a_loaded_run_turns_text_into_tokens_with_its_tokenizer(run):
    model, tokenizer = run.model, run.tokenizer
    tokens = model.to_tokens(TEXT)
    assert tokens.tolist() == [tokenizer.encode(TEXT)]
    assert model.to_str_tokens(TEXT) == [tokenizer.decode([i]) for i in tokenizer.encode(TEXT)]
    assert "".join(model.to_str_tokens(tokens)) == TEXT == model.to_string(tokens[0])
    logits, cache = model.run_with_cache(TEXT, names_filter="blocks.0.attn.hook_z")
    assert torch.equal(logits, model(tokens)) and torch.equal(model(TEXT), logits)
    assert model.to_tokens([TEXT, TEXT]).shape == (2, tokens.size(1))
    with pytest.raises(ValueError) as e:
        model.to_tokens([TEXT, "The cat"])
    one_line(e, "one token length")
    with pytest.raises(ValueError) as e:  # a run's BPE has no end-of-text token to prepend
        model.to_tokens(TEXT, prepend_bos=True)
    one_line(e, "prepend_bos")
    long = model.to_tokens(TEXT * 20)
    assert long.shape == (1, 64) and model.to_tokens(TEXT * 20, truncate=False).size(1) > 64


@torch.no_grad()
def test_generate_continues_text_as_our_sampler_does(run):
    from model.sampling import generate

    model = run.model
    tokens = model.to_tokens(TEXT)
    greedy = torch.cat(
        [tokens, *(t[:, None] for t in generate(model, tokens, 5, temperature=0))], 1
    )
    assert torch.equal(model.generate(tokens, 5, do_sample=False), greedy)
    assert model.generate(TEXT, 5, do_sample=False) == model.to_string(greedy[0])
    assert model.generate([TEXT], 5, do_sample=False, return_type="tokens").tolist() == (
        greedy.tolist()
    )
    first = greedy[0, tokens.size(1)].item()  # stops once every row has written "eos"
    assert model.generate(tokens, 5, do_sample=False, eos_token_id=first).size(1) == (
        tokens.size(1) + 1
    )
    assert model.to_single_token(model.to_string(first)) == first
    with pytest.raises(TypeError) as e:
        model.generate(TEXT, max_tokens=5)
    one_line(e, "max_tokens", "max_new_tokens")
    with pytest.raises(TypeError) as e:
        model.to_tokens(TEXT, prepend=False)
    one_line(e, "prepend", "prepend_bos")
    with pytest.raises(ValueError) as e:
        model.to_single_token(TEXT)
    one_line(e, "not one")
    with pytest.raises(ValueError) as e:
        model.generate("")
    one_line(e, "prompt")


def test_a_bare_model_says_how_to_get_a_tokenizer(tiny_hooked_gpt):
    model = tiny_hooked_gpt()
    for call in (lambda: model.to_tokens(TEXT), lambda: model.to_str_tokens(IDX[0])):
        with pytest.raises(ValueError) as e:
            call()
        one_line(e, "load_run", "set_tokenizer")
    with pytest.raises(TypeError):
        model.set_tokenizer("not a tokenizer")


# TransformerLens's Main Demo (its "Hooks" and "Caching all activations" cells), as written but
# for three things: the model is ours (`model`, given), TransformerLens 4 calls utils
# `utilities`, and the head ablated is 1 (this model has 2 heads, the demo's GPT-2 12).
MAIN_DEMO = """
import torch
from jaxtyping import Float
from transformer_lens import utilities as utils
from transformer_lens.hook_points import HookPoint

gpt2_text = "Natural language processing tasks, such as question answering, machine translation, reading comprehension, and summarization, are typically approached with supervised learning on taskspecific datasets."
gpt2_tokens = model.to_tokens(gpt2_text)
print(gpt2_tokens.device)
gpt2_logits, gpt2_cache = model.run_with_cache(gpt2_tokens, remove_batch_dim=True)
attention_pattern = gpt2_cache["pattern", 0, "attn"]
print(attention_pattern.shape)
gpt2_str_tokens = model.to_str_tokens(gpt2_text)

layer_to_ablate = 0
head_index_to_ablate = 1

# We define a head ablation hook
# The type annotations are NOT necessary, they're just a useful guide to the reader
#
def head_ablation_hook(
    value: Float[torch.Tensor, "batch pos head_index d_head"],
    hook: HookPoint
) -> Float[torch.Tensor, "batch pos head_index d_head"]:
    print(f"Shape of the value tensor: {value.shape}")
    value[:, :, head_index_to_ablate, :] = 0.
    return value

original_loss = model(gpt2_tokens, return_type="loss")
ablated_loss = model.run_with_hooks(
    gpt2_tokens,
    return_type="loss",
    fwd_hooks=[(
        utils.get_act_name("v", layer_to_ablate),
        head_ablation_hook
        )]
    )
print(f"Original Loss: {original_loss.item():.3f}")
print(f"Ablated Loss: {ablated_loss.item():.3f}")
"""  # noqa: E501


def test_transformerlens_main_demo_runs_as_written(run, capsys):
    pytest.importorskip("transformer_lens", reason="pip install -r requirements-test.txt")
    model = run.model
    scope = {"model": model}
    exec(compile(MAIN_DEMO, "TransformerLens Main Demo", "exec"), scope)
    tokens = scope["gpt2_tokens"]
    assert tokens.shape == (1, 64)  # the text is longer than n_ctx: cut, as TransformerLens does
    pattern = scope["attention_pattern"]
    assert pattern.shape == (2, 64, 64)  # remove_batch_dim: (heads, T, T)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(2, 64))
    assert len(scope["gpt2_str_tokens"]) == 64
    with torch.no_grad():
        logits = model(tokens)
        assert scope["original_loss"].item() == pytest.approx(
            lm_loss(logits[:, :-1], tokens[:, 1:]).item(), abs=1e-6
        )

        def zero_v_of_head_1(value, hook):
            return value.index_fill(2, torch.tensor([1]), 0.0)

        with hooks(model, {"blocks.0.attn.hook_v": zero_v_of_head_1}):
            ablated = model(tokens, return_type="loss")
    assert scope["ablated_loss"].item() == pytest.approx(ablated.item(), abs=1e-6)
    assert abs(ablated.item() - scope["original_loss"].item()) > 1e-4
    out = capsys.readouterr().out
    assert "torch.Size([1, 64, 2, 16])" in out and "Ablated Loss" in out
    assert no_hooks_left(model)


# Issue 42's snippet, the TransformerLens way, as a notebook outside the checkout would run it.
ISSUE_SNIPPET = """
import json
import sys

sys.path.insert(0, CHECKOUT)
import torch
from runs.loading import load_run

run = load_run(RUN)
tokens = run.model.to_tokens("The animal in the jungle went out on a hunt because it was hungry.")
logits, cache = run.model.run_with_cache(tokens)
pattern = cache["pattern", 0]
seen = []
with run.model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", lambda z, hook: seen.append(hook.name))]):
    run.model(tokens)
_, zs = run.model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_z"))
print(json.dumps({
    "tokens": list(tokens.shape),
    "pattern": list(pattern.shape),
    "rows": pattern.sum(-1).flatten().tolist(),
    "seen": seen,
    "zs": list(zs),
    "str_tokens": run.model.to_str_tokens(tokens),
}))
"""


@pytest.mark.slow
def test_the_issues_snippet_runs_on_a_loaded_run_from_another_folder(tmp_path):
    import json
    import subprocess
    import sys

    from tests.helpers import ROOT

    _, tokenizer = make_run(tmp_path / "run", "bpe", 64)
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    code = f"CHECKOUT, RUN = {str(ROOT)!r}, {str(tmp_path / 'run')!r}\n" + ISSUE_SNIPPET
    (notebook / "snippet.py").write_text(code)
    r = subprocess.run(
        [sys.executable, "snippet.py"], cwd=notebook, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    sentence = "The animal in the jungle went out on a hunt because it was hungry."
    T = len(tokenizer.encode(sentence))
    assert out["tokens"] == [1, T] and out["pattern"] == [1, 2, T, T]
    assert all(abs(row - 1) < 1e-5 for row in out["rows"])
    assert out["seen"] == ["blocks.0.attn.hook_z"]
    assert out["zs"] == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    assert "".join(out["str_tokens"]) == sentence


@torch.no_grad()
def test_transformerlens_tools_read_our_model_and_cache(run, capsys):
    """Its test_prompt (to_tokens, to_str_tokens, to_string, the logits) and its own
    ActivationCache wrapped around ours (accumulated_resid reads cfg and the names)."""
    tl = pytest.importorskip("transformer_lens", reason="pip install -r requirements-test.txt")
    from transformer_lens import utilities

    model = run.model
    prompt = "The cat sat on the mat because"
    utilities.test_prompt(prompt, " it", model)
    top = model(prompt)[0, -1].argmax().item()
    out = capsys.readouterr().out
    assert "Ranks of the answer tokens" in out
    assert f"Top 0th token. Logit: {model(prompt)[0, -1, top].item():5.2f}" in out
    assert f"|{model.to_string(top)}|" in out
    _, ours = model.run_with_cache(prompt)
    stack = tl.ActivationCache(dict(ours), model).accumulated_resid()
    want = torch.stack([ours["resid_pre", 0], ours["resid_pre", 1], ours["resid_post", -1]])
    assert torch.equal(stack, want)


def test_the_module_run_with_cache_takes_transformer_lens_names_filter(tiny_hooked_gpt):
    from model.hooks import run_with_cache

    model = tiny_hooked_gpt().eval()
    idx = torch.zeros(1, 5, dtype=torch.long)
    _, cache = run_with_cache(model, idx, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(cache) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    with pytest.raises(ValueError, match="give one of them"):
        run_with_cache(model, idx, names=["hook_embed"], names_filter=["hook_embed"])

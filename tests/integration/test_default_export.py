"""The default recipe's model leaves the project like any GPT-2: a model with configs/default.yaml's
architecture (its options and biases, small sizes) exported with --export-hf is opened by
transformers with our logits, generates what our sampler generates, shows bertviz our
attention, and boots in TransformerLens's bridge offline, whose run_with_cache gives our
logits and patterns. The architecture is read from the config, so the test follows the default
wherever it goes."""

import json
import re

import pytest
import torch

from configs.load import load_config
from model.gpt import ARCHITECTURE_KEYS
from model.hooks import run_with_cache
from runs.export import export_hf
from runs.loading import load_run
from tests.helpers import ROOT, TORTURE, boot_bridge, loud_run, patterns

transformers = pytest.importorskip(
    "transformers", reason="the reference is transformers: pip install -r requirements-test.txt"
)
SENTENCE = "The animal in the jungle went out on a hunt because it was hungry."


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(the run, its export folder): an untrained 2 x 4 x 32 model with the default's
    architecture, weights at 10x scale so that attention is far from uniform."""
    model = load_config(ROOT / "configs" / "default.yaml").model
    architecture = {key: getattr(model, key) for key in (*ARCHITECTURE_KEYS, "bias")}
    folder = tmp_path_factory.mktemp("default_export")
    loud_run(folder / "run", n_head=4, **architecture)
    export_hf(folder / "run", folder / "hf")
    return load_run(folder / "run"), folder / "hf"


def test_transformers_computes_our_logits_and_attention(exported):
    run, folder = exported
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    window = torch.tensor([run.tokenizer.encode(TORTURE)[:64]])
    with torch.no_grad():
        theirs = hf.eval()(window, output_attentions=True)
        ours = run.model(window)
    torch.testing.assert_close(theirs.logits, ours, atol=1e-4, rtol=0)
    for a, b in zip(theirs.attentions, patterns(run.model, window), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_transformers_generate_continues_as_our_greedy_sampler(exported):
    run, folder = exported
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    prompt = torch.tensor([run.tokenizer.encode("The animal in the jungle")])
    out = hf.generate(prompt, do_sample=False, max_new_tokens=12, eos_token_id=None)
    ids = prompt[0].tolist()
    with torch.no_grad():
        for _ in range(12):  # greedy: the argmax of our logits, one token at a time
            ids.append(int(run.model(torch.tensor([ids]))[0, -1].argmax()))
    assert out[0].tolist() == ids


def test_bertviz_head_view_shows_our_attention(exported):
    head_view = pytest.importorskip("bertviz", reason="pip install -r requirements-test.txt")
    run, folder = exported
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        attentions = hf.eval()(ids, output_attentions=True).attentions
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    html = head_view.head_view(attentions, tokens, html_action="return").data
    params = json.loads(re.search(r"const params = (.*?); // HACK", html).group(1))
    shown = torch.tensor(params["attention"][0]["attn"])  # (L, H, T, T)
    ours = torch.stack([p[0] for p in patterns(run.model, ids)])
    torch.testing.assert_close(shown, ours, atol=1e-5, rtol=0)
    assert len(params["attention"][0]["left_text"]) == len(tokens) == ids.size(1)


def test_the_bridge_boots_offline_and_its_cache_holds_our_numbers(exported):
    run, folder = exported
    bridge = boot_bridge(folder).eval()
    tokens = torch.tensor([run.tokenizer.encode(SENTENCE)])
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(tokens)
        ours, our_cache = run_with_cache(run.model, tokens, lambda n: n.endswith("hook_pattern"))
    torch.testing.assert_close(logits, ours, atol=1e-4, rtol=0)
    for layer in range(run.model.config.n_layer):
        name = f"blocks.{layer}.attn.hook_pattern"
        torch.testing.assert_close(cache[name], our_cache[name], atol=1e-5, rtol=0)

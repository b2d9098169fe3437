"""Fixtures pytest hands to tests: a small corpus, tiny models (drawn at random, trained, or
built by hand) and a tiny GPT-2 folder. Functions that tests import
and call (the repository root, running a script, a tiny training config, a tiny run folder) are
in tests/helpers.py. The repository root is on sys.path through pyproject.toml's pythonpath."""

import os
from collections import Counter

import pytest
import torch

from model.gpt import GPT, GPTConfig
from model.hooked import HookedGPT

# Test models are tiny: one thread is as fast, and several pytest or torchrun processes on a small
# machine would otherwise fight over the cores.
torch.set_num_threads(1)


def pytest_configure(config):
    """Hypothesis's profiles for tests/integration/test_fuzz.py: "suite" (a few examples a test,
    within seconds, in `make test`) unless HYPOTHESIS_PROFILE names "fuzz" (`make fuzz`: many
    more, failures replayed from .hypothesis/)."""
    from hypothesis import HealthCheck, settings

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
    settings.register_profile(
        "suite", max_examples=12, deadline=None, database=None, suppress_health_check=quiet
    )
    settings.register_profile("fuzz", max_examples=500, deadline=None, suppress_health_check=quiet)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


def pytest_collection_modifyitems(config, items):
    """The files with the most tests marked slow (real processes) first, each file's tests in
    their order: `make test` hands out whole files in this order (--dist loadfile
    --no-loadscope-reorder), so the last to run are quick ones and neither worker waits long for
    the other at the end. (xdist's own order, most tests first, left the 7 slow tests of
    test_restart.py to the end, with the other worker idle.)"""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])  # a stable sort: files stay whole


TINY_GPT = dict(
    vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32, vocab_multiple=1
)  # unpadded


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A small deterministic text and a shared data cache, so data is prepared once."""
    folder = tmp_path_factory.mktemp("corpus")
    words = "the cat sat on a mat while one dog ran to the old red barn and it barked".split()
    lines = [
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(9)) + "." for i in range(400)
    ]
    (folder / "text.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="session")
def trained_export(corpus, tmp_path_factory):
    """(run folder, its --export-hf folder): a 2 x 2 x 32 model with a window of 32 tokens,
    trained for 100 steps on the corpus (enough for attention to be far from uniform, so edits
    bite, and for its samples to end lines as the corpus does) with a BPE tokenizer (GPT-2 has
    no char form), exported as train.py --export-hf writes it. Shared by the session: copy it
    before changing it."""
    # Imported here, not when pytest collects: training brings in the lab.
    from lab.run import train
    from runs.export import export_hf
    from tests.helpers import tiny_config

    folder = tmp_path_factory.mktemp("trained_export")
    train(
        tiny_config(
            corpus,
            folder / "run",
            "tokenizer.kind=bpe",
            "tokenizer.vocab_size=300",
            "model.block_size=32",
            "train.max_iters=100",
            "train.eval_interval=50",
        )
    )
    export_hf(folder / "run", folder / "hf")
    return folder / "run", folder / "hf"


@pytest.fixture(scope="session")
def gpt2_folder(tmp_path_factory):
    """A tiny Hugging Face GPT-2 folder as transformers writes it (tests/fakehub.py), shared by
    the session: copy it before changing it."""
    pytest.importorskip(
        "transformers",
        reason="the tiny GPT-2 folder is written by transformers: "
        "pip install -r requirements-test.txt",
    )
    from tests.fakehub import tiny_gpt2_folder

    return tiny_gpt2_folder(tmp_path_factory.mktemp("gpt2"))


@pytest.fixture
def tiny_gpt():
    """tiny_gpt(**GPTConfig keys): a GPT seeded with 0, by default 2 layers x 4 heads, 32 wide,
    block 16, vocabulary 50; in training mode, as GPT() is."""

    def build(**overrides):
        torch.manual_seed(0)
        return GPT(GPTConfig(**{**TINY_GPT, **overrides}))

    return build


@pytest.fixture
def tiny_hooked_gpt():
    """tiny_hooked_gpt(**GPTConfig keys): tiny_gpt's model, the same weights, as a HookedGPT
    (TransformerLens's calls on top, model.hooked)."""

    def build(**overrides):
        torch.manual_seed(0)
        return HookedGPT(GPTConfig(**{**TINY_GPT, **overrides}))

    return build


@pytest.fixture
def choice_model():
    """(model, pairs): a model built by hand whose choice between two candidates is one head's
    alone, and the twin pairs that show it (float64, in eval mode).

    The model: one layer that matters, two heads, 16 channels, no LayerNorm. Tokens: candidates
    1 and 2 (channels 0, 1), pronouns 3 and 4 (channels 2, 3), fillers 5; next words 6 and 7.
    L0H1's query at pronoun 3 looks for candidate 1, at pronoun 4 for candidate 2 (its key); its
    value copies the candidate into channel 4 or 5, which the unembedding reads as word 6 or 7.
    Every other head and MLP is zero: the choice is L0H1's alone. The pairs: candidates 1 and 2
    in every order among fillers, the pronoun 3 last; its twin has 4."""
    from analysis.patching import Pair
    from tests.helpers import zeroed_gpt

    model = zeroed_gpt(
        vocab_size=8,
        block_size=8,
        n_layer=2,
        n_head=2,
        n_embd=16,
        bias=False,
        tie_embeddings=False,
        vocab_multiple=1,
    )
    model = model.double().eval()
    with torch.no_grad():
        for token, channel in ((1, 0), (2, 1), (3, 2), (4, 3)):
            model.tok_emb.weight[token, channel] = 1.0
        w = model.blocks[0].attn.w_qkv.weight  # (3C, C): W_Q, W_K, W_V; head 1 rows 8-15
        w[8, 2] = w[9, 3] = 20.0  # q: which pronoun
        w[16 + 8, 0] = w[16 + 9, 1] = 1.0  # k: which candidate
        w[32 + 8, 0] = w[32 + 9, 1] = 1.0  # v: the candidate
        model.blocks[0].attn.w_out.weight[4, 8] = model.blocks[0].attn.w_out.weight[5, 9] = 1.0
        model.lm_head.weight[6, 4] = model.lm_head.weight[7, 5] = 5.0
    pairs = []
    for a in range(5):
        for b in range(5):
            if a != b:
                ids = [5] * 5 + [3]
                ids[a], ids[b] = 1, 2
                pairs.append(Pair(ids, ids[:-1] + [4], [5], 6, 7))
    return model, pairs

"""What generate.py waits for: sampling with and without the KV cache, the causal tests at one
thread and at torch's default, and loading a GPT-2 folder against transformers."""

import statistics
import sys
import tempfile
import time

import torch

from benchmarks.processes import ROOT


def bench_generation(args):
    """Sampling at 256 tokens of context, with and without the KV cache, interleaved, five runs
    each: the median rate of each and the median of the five paired ratios. Threads as
    generate.py sets them (one for a model this small: two made the cached path bimodal, its
    many tiny kernels waiting on the second core)."""
    from model.device import generation_threads
    from model.gpt import GPT, GPTConfig
    from model.sampling import generate

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=1024, block_size=512, n_layer=2, n_head=4, n_embd=128)).eval()
    prompt = torch.randint(0, 1024, (1, 256))
    threads, before = generation_threads(model.config.n_embd), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        rates = {True: [], False: []}
        for use_cache in (True, False) * 5:
            start = time.perf_counter()
            for _ in generate(model, prompt, 128, temperature=0.0, use_cache=use_cache):
                pass
            rates[use_cache].append(128 / (time.perf_counter() - start))
    finally:
        torch.set_num_threads(before)
    ratios = [a / b for a, b in zip(rates[True], rates[False])]
    return {
        "generate tok/s at 256 context, KV cache (median of 5)": statistics.median(rates[True]),
        "generate tok/s at 256 context, no cache (median of 5)": statistics.median(rates[False]),
        "KV-cache speed-up (median of 5 paired runs)": statistics.median(ratios),
        "KV-cache speed-up, lowest and highest": f"{min(ratios):.1f}x .. {max(ratios):.1f}x",
        "generation threads": threads or torch.get_num_threads(),
    }


def bench_causal(args):
    """The causal tests (every head, each layer, all heads) on the 300 built-in test sentences, for
    the default model's shape (random weights: the cost does not depend on them), at one thread
    and at torch's default, alternating, median of three each."""
    from analysis.causal import causal_tests
    from data.prepare import prepare
    from data.pronouns import examples
    from model.gpt import GPT, GPTConfig

    tokenizer = prepare("pronouns", "bpe", 1024, 0.1, ROOT / ".cache").tokenizer
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=128)
    ).eval()
    test = examples("test")
    default, seconds = torch.get_num_threads(), {1: [], 0: []}
    try:
        for _ in range(3):
            for threads in (1, 0):
                torch.set_num_threads(threads or default)
                start = time.perf_counter()
                causal_tests(model, tokenizer, test)
                seconds[threads].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(default)
    return {
        "causal tests s, 300 sentences, 1 thread (median of 3)": statistics.median(seconds[1]),
        f"causal tests s, 300 sentences, {default} threads (median of 3)": statistics.median(
            seconds[0]
        ),
    }


def bench_load(args):
    """GPT-2 small's shape (124M, random weights) saved by transformers as a Hugging Face folder
    (model.safetensors), loaded by our loader as load_run does it (model.gpt2_import +
    checkpoint.build_gpt, unpadded) and by transformers' GPT2LMHeadModel.from_pretrained,
    alternating, best of 3 each. Both map the file, so loading reads little; "+ first forward" (64
    tokens) also reads every weight once. Fine-tuning (train.init_from) pads the token table to a
    multiple of 64, a 154 MB copy: its row shows that cost."""
    try:
        import transformers
    except ImportError:
        sys.exit(
            "error: `bench.py load` compares with transformers: "
            "pip install -r requirements-test.txt"
        )
    from model.checkpoint import build_gpt
    from model.gpt2_import import read_gpt2

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    loaders = {
        "ours": lambda d: build_gpt(*read_gpt2(d, vocab_multiple=1)),
        "transformers": lambda d: transformers.GPT2LMHeadModel.from_pretrained(d).eval(),
        "ours, padded for fine-tuning": lambda d: build_gpt(*read_gpt2(d, vocab_multiple=64)),
    }
    load_s, first_s = {}, {}
    x = torch.randint(0, 50257, (1, 64), generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as d:
        torch.manual_seed(0)
        transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(d)
        for _ in range(3):
            for name, load in loaders.items():
                start = time.perf_counter()
                model = load(d)
                loaded = time.perf_counter() - start
                with torch.no_grad():
                    model(x)
                used = time.perf_counter() - start
                del model
                load_s[name] = min(loaded, load_s.get(name, float("inf")))
                first_s[name] = min(used, first_s.get(name, float("inf")))
    return {
        "load GPT-2 124M s (ours)": load_s["ours"],
        "load GPT-2 124M s (transformers)": load_s["transformers"],
        "load speed-up vs transformers": load_s["transformers"] / load_s["ours"],
        "load + first forward s (ours)": first_s["ours"],
        "load + first forward s (transformers)": first_s["transformers"],
        "load + first forward speed-up vs transformers": first_s["transformers"] / first_s["ours"],
        "load GPT-2 124M s (ours, padded for fine-tuning)": load_s["ours, padded for fine-tuning"],
    }

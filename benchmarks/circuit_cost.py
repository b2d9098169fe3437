"""What `generate.py --probe --circuit` costs: the circuit's computation (analysis/circuit.py:
the pairs, twins, attribution, the checked edges, the pruning of the whole set and of each
kind) on the default model's shape with the 300 built-in test sentences, and on GPT-2 small's
shape with 100 of them, each with its peak memory, at the threads generate.py would use; for
each circuit of CIRCUITS (a name and its pair maker), so that a circuit on other twins is timed
by adding its pair maker there (or passing bench_circuit a dict of them).

Random weights unless --run names a run folder for the first: the cost does not depend on the
weights, except that a set with no preference skips its search; here every set is searched
(min_gap None), so the random models pay the most a trained one can. The sentences are tokenized
by a BPE of the built-in sentences (1024 tokens; a model's larger vocabulary only widens its
unembedding, which the GPT-2 shape keeps at 50257)."""

import argparse
import resource
import time

import torch

from analysis import choice, circuit


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def identity_pairs(model, tokenizer, examples: list, seed: int = 0) -> tuple[list, list]:
    """The identity circuit's (pairs, kinds), as trace_circuit makes them: each example with
    its antecedent swapped for a same-kind noun (analysis.patching.twin_pairs), where it has one."""
    from analysis.patching import twin_pairs

    pairs, kept = twin_pairs(tokenizer, examples, model.config.block_size, seed, "the circuit")
    return pairs, [ex.decided_by for ex in kept]


def choice_pairs(model, tokenizer, examples: list) -> tuple[list, list]:
    """The choice circuit's (pairs, kinds), as analysis.choice makes them: each example with its
    choice twin (both candidates kept, the answer flipped), where one is token-aligned."""
    from analysis.choice_pairs import choice_pairs as made

    choices = made(tokenizer, examples, model.config.block_size)
    return choices.pairs, choices.kinds


# The circuits timed, by name: a pair maker (model, tokenizer, examples) -> (pairs, kinds) for
# analysis.circuit.circuit_of_pairs, and the share of the gap its circuit keeps. Another kind
# of twin is one more entry.
CIRCUITS = {
    "identity": (identity_pairs, circuit.FAITHFUL),
    "choice": (choice_pairs, choice.FAITHFUL),
}


def bench_circuit(args: argparse.Namespace, circuits: dict | None = None) -> dict:
    """Seconds and peak RSS of each circuit of `circuits` (default CIRCUITS): its pairs made and
    circuit_of_pairs, at the default shape (or --run) then GPT-2 small's."""
    from analysis.circuit import circuit_of_pairs
    from data.pronouns import examples
    from data.tokenizer import train_tokenizer
    from model.device import generation_threads
    from model.gpt import GPT, GPTConfig

    test = examples("test")
    text = "\n".join(ex.text for ex in examples("dev") + test)
    tokenizer = train_tokenizer("bpe", text, 1024)
    rows = {}
    shapes = {
        "default shape (2 x 4 heads, 128 wide), 300 sentences": (
            dict(vocab_size=4096, block_size=64, n_layer=2, n_head=4, n_embd=128),
            300,
        ),
        "GPT-2 small shape (12 x 12 heads, 768 wide), 100 sentences": (
            dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768),
            100,
        ),
    }
    for name, (make_pairs, faithful) in (circuits or CIRCUITS).items():
        for label, (shape, n) in shapes.items():
            if args.run and shape["n_layer"] == 2:
                from runs.loading import load_run

                run = load_run(args.run)
                model, tok, min_gap = run.model, run.tokenizer, 0.5
                label = f"{args.run}, 300 sentences"
            else:
                torch.manual_seed(0)
                model, tok, min_gap = GPT(GPTConfig(**shape)).eval(), tokenizer, None
            threads, before = generation_threads(model.config.n_embd), torch.get_num_threads()
            torch.set_num_threads(threads or before)  # as generate.py sets them
            start = time.perf_counter()
            try:
                pairs, kinds = make_pairs(model, tok, test[:n])
                result = circuit_of_pairs(model, pairs, kinds, min_gap=min_gap, faithful=faithful)
            finally:
                torch.set_num_threads(before)
            used = threads or before
            key = f"{name} circuit, {label}"
            rows[f"{key}, s at {used} thread{'s' if used > 1 else ''}"] = (
                time.perf_counter() - start
            )
            rows[f"{key}, edges"] = f"{result['n_edges']:,} ({result['n']} twins)"
            rows[f"{key}, peak RSS MB after it"] = _rss_mb()
            del model, result
    return rows

"""Text to tokens: training and running the BPE tokenizer, preparing a corpus on one worker and on
every CPU, preparing a mix against its sources one by one."""

import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.processes import ROOT


def bench_tokenizer(args):
    from data.sources import open_source
    from data.tokenizer import train_tokenizer

    text = open_source(args.text, ROOT / ".cache").read_text()
    start = time.perf_counter()
    tok = train_tokenizer("bpe", text, 4096)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    n = len(tok.encode(text))
    encode_s = time.perf_counter() - start
    mb = len(text.encode()) / 1e6
    return {
        f"BPE-4096 train s ({args.text})": train_s,
        "BPE bytes/token": mb * 1e6 / n,
        "BPE encode MB/s": mb / encode_s,
        **bench_bpe_without_whitespace(),
    }


def bench_bpe_without_whitespace():
    """Random ACGT (fixed seed), which GPT-4's split pattern leaves as one giant piece: 5 MB,
    and 1 MB of it, whose time ratio shows whether training grows linearly with the text."""
    from data.tokenizer import train_tokenizer

    dna = "".join(random.Random(0).choices("ACGT", k=5_000_000))
    seconds = {}
    for mb in (1, 5):
        start = time.perf_counter()
        train_tokenizer("bpe", dna[: mb * 1_000_000], 1024)
        seconds[mb] = time.perf_counter() - start
    return {
        "BPE-1024 train s (5 MB DNA, no whitespace)": seconds[5],
        "BPE-1024 DNA train time, 5 MB / 1 MB (linear: 5)": seconds[5] / seconds[1],
    }


def bench_prepare(args):
    """Preparing a 20 MB text. char: prepare() once (one worker: threads cannot speed up its
    Python encode). bpe, one worker against every usable CPU, alternating: the whole prepare()
    from scratch (hash, scan, train the BPE on its first 10 M characters, encode on N threads),
    five times each, the best and the median of each; then the encoding pass alone
    (data.token_files.encode_splits, as prepare runs it once the tokenizer is trained), three
    times each, the best of each. Every bpe output must match the first
    one-worker files byte for byte."""
    import data.prepare as prep
    from data.parallel import usable_cpus
    from data.pronouns import corpus_text

    n = usable_cpus()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "corpus.txt"
        path.write_text(corpus_text(seed=1, n_bytes=20_000_000))
        mb = path.stat().st_size / 1e6
        start = time.perf_counter()
        prep.prepare(str(path), "char", None, 0.1, Path(d) / "char")
        char_s = time.perf_counter() - start

        first, whole = None, {1: [], n: []}
        for i, workers in enumerate([1, n] * 5):
            start = time.perf_counter()
            done = prep.prepare(str(path), "bpe", None, 0.1, Path(d) / f"bpe{i}", workers=workers)
            whole[workers].append(time.perf_counter() - start)
            first = first or done
            if done.dir.name != first.dir.name:
                sys.exit(f"error: the cache folder depends on the worker count: {done.dir.name}")
            same_files(first.dir, done.dir, f"prepare() with {workers} workers")
        encoding, busy = time_encoding_pass(path, first, n, Path(d))
    return {
        "prepare MB/s (char, 20 MB, includes hashing)": mb / char_s,
        "prepare MB/s (bpe, 20 MB, whole, 1 worker, best)": mb / min(whole[1]),
        f"prepare MB/s (bpe, 20 MB, whole, {n} workers, best)": mb / min(whole[n]),
        "prepare speed-up, bpe whole (N workers / 1), best": min(whole[1]) / min(whole[n]),
        "prepare speed-up, bpe whole (N workers / 1), median": (
            statistics.median(whole[1]) / statistics.median(whole[n])
        ),
        "bpe encoding pass MB/s (1 worker)": mb / encoding[1],
        f"bpe encoding pass MB/s ({n} workers)": mb / encoding[n],
        "bpe encoding pass speed-up (N workers / 1)": encoding[1] / encoding[n],
        # Cores this process kept busy: below N, other work on the machine took the rest.
        f"bpe encoding pass CPU s / wall s ({n} workers)": busy[n],
    }


def time_encoding_pass(path, first, n, folder):
    """bench_prepare's second half: the encoding pass alone on the text at `path` with the
    tokenizer of `first` (a Prepared), one worker against n, alternating, three times each; the
    best seconds of each and its CPU seconds per wall second. Every output must match `first`'s."""
    import numpy as np

    import data.prepare as prep
    from data.sources import open_source

    encoding, busy, meta = {}, {}, first.meta
    for i, workers in enumerate([1, n] * 3):
        out = folder / f"pass{i}"
        out.mkdir()
        start, cpu = time.perf_counter(), time.process_time()
        prep.encode_splits(
            open_source(str(path)),
            first.tokenizer,
            meta["split_char"],
            meta["source_chars"],
            np.dtype(meta["dtype"]),
            out,
            workers,
            prep.ENCODE_CHUNK_CHARS,
        )
        seconds = time.perf_counter() - start
        if seconds < encoding.get(workers, float("inf")):
            encoding[workers], busy[workers] = seconds, (time.process_time() - cpu) / seconds
        same_files(first.dir, out, f"the encoding pass with {workers} workers")
        shutil.rmtree(out)
    return encoding, busy


def bench_mix(args):
    """Preparing a mix against preparing its sources one by one, from empty caches, alternating,
    three times each, the best of each: two generated texts (10 MB and 2 MB), bpe 4096 and char.
    The mix hashes each source twice and trains one tokenizer; one by one trains one per source."""
    from data.mix import prepare_mix
    from data.mix_spec import MixEntry
    from data.prepare import prepare
    from data.pronouns import corpus_text

    results = {}
    with tempfile.TemporaryDirectory() as d:
        paths = [Path(d) / "big.txt", Path(d) / "small.txt"]
        paths[0].write_text(corpus_text(seed=1, n_bytes=10_000_000))
        paths[1].write_text(corpus_text(seed=2, n_bytes=2_000_000))
        for kind, vocab in (("bpe", 4096), ("char", None)):
            best = {"mix": float("inf"), "one by one": float("inf")}
            for i in range(3):
                start = time.perf_counter()
                prepare_mix(
                    [MixEntry(str(paths[0]), 0.8), MixEntry(str(paths[1]), 0.2)],
                    kind,
                    vocab,
                    cache_dir=Path(d) / f"mix-{kind}{i}",
                )
                best["mix"] = min(best["mix"], time.perf_counter() - start)
                start = time.perf_counter()
                for path in paths:
                    prepare(str(path), kind, vocab, cache_dir=Path(d) / f"one-{kind}{i}")
                best["one by one"] = min(best["one by one"], time.perf_counter() - start)
            results[f"prepare a mix of 10 + 2 MB, {kind}, s (best of 3)"] = best["mix"]
            results[f"prepare the 2 sources one by one, {kind}, s (best of 3)"] = best["one by one"]
            results[f"mix / one by one, {kind}"] = best["mix"] / best["one by one"]
    return results


def same_files(reference, folder, what):
    """Exit with an error unless every file in `folder` equals its namesake in `reference`."""
    differ = [
        p.name
        for p in sorted(folder.iterdir())
        if p.read_bytes() != (reference / p.name).read_bytes()
    ]
    if differ:
        sys.exit(f"error: {what} wrote other bytes than one worker in {', '.join(differ)}")

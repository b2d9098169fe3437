"""Several corpora in one run: a weighted mixture, one tokenizer for all, each source on its own.

`data.mix` lists sources (anything `data.source` takes) with weights; `data.source` alone is a
mix of one. The command line writes a mix as `SOURCE:WEIGHT,SOURCE:WEIGHT` (the weight is after
the last colon, so `hf:OWNER/DATASET/PATH:0.5` works); YAML as a list of {source, weight}.
Weights need not sum to 1: they are shares of the training windows, normalised.

A curriculum: a weight written START..END (YAML: start_weight beside weight) moves linearly from
START at the first step to END at the last (train.max_iters); each step's shares are the two
normalised sets of weights mixed in that proportion. START may be 0 (a source that comes in
later); END must be above 0. Evaluation weighs sources by the END weights, where the run ends.

One tokenizer serves the whole mix, so every source's ids mean the same words:
    char  the union of the sources' characters (the weights do not change it);
    bpe   trained on a sample of the union drawn by weight (a curriculum's: the share each source
          gets over the whole run, the mean of its start and end): each source's prefix in
          proportion to its weight, as large as the smallest source allows, up to
          BPE_SAMPLE_CHARS in all;
          so a new weight trains a new BPE, and every source is tokenised again with it;
    gpt2  GPT-2's, the same for any mix.
Each source is then prepared on its own (data.prepare with that tokenizer), cached by its content
and the tokenizer's: a char or gpt2 mix whose weights change prepares nothing again, and every
window the loader draws lies inside one source (data.loader.get_mixed_batch).
"""

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from data.mix_spec import MixEntry, source_name
from data.prepare import BPE_SAMPLE_CHARS, FORMAT_VERSION, Prepared, content_fingerprint, prepare
from data.sources import open_source
from data.tokenizer import KINDS, Tokenizer, load_tokenizer, train_tokenizer
from storage.atomic import clean_stale_temps, make_temp_folder, publish_folder


@dataclass
class Part:
    """One source of a mixture: its short name, its normalised weight, its prepared files."""

    name: str
    weight: float  # at the last step (normalised over the parts)
    prepared: Prepared
    start_weight: float | None = None  # at the first step (normalised), for a curriculum


@dataclass
class Mixture:
    """Prepared data of a run: one part per source (one for data.source), sharing `tokenizer`."""

    parts: list[Part]
    tokenizer: Tokenizer
    tokenizer_path: Path  # the tokenizer's file, copied into the run folder
    meta: dict  # the run folder's meta.json: a single source's own, or the mix's (mix_meta)

    @property
    def is_mix(self) -> bool:
        return len(self.parts) > 1

    def train_files(self, progress: float = 1.0) -> list[tuple[Path, float]]:
        """(train.bin, weight) of each part at `progress` (step / max_iters, 0 to 1) through the
        run: what data.loader.get_mixed_batch draws from."""
        return [(p.prepared.train_path, _at(p, progress)) for p in self.parts]

    @property
    def label(self) -> str:
        """The data in words: the source, or name:weight (name:start..end) of each part."""
        if not self.is_mix:
            return self.parts[0].prepared.meta["source"]
        return _label(self.parts)


def _at(part: Part, progress: float) -> float:
    if part.start_weight is None:
        return part.weight
    return part.start_weight + (part.weight - part.start_weight) * min(max(progress, 0.0), 1.0)


def _label(parts) -> str:
    return ",".join(
        f"{p.name}:{p.weight:.4g}"
        if p.start_weight is None
        else f"{p.name}:{p.start_weight:.4g}..{p.weight:.4g}"
        for p in parts
    )


def prepare_mix(
    entries: list[MixEntry],
    tokenizer_kind: str,
    vocab_size: int | None = None,
    val_fraction: float = 0.1,
    cache_dir: str | os.PathLike = ".cache",
    block_size: int | None = None,
    tokenizer: Tokenizer | None = None,
    pronouns=None,
) -> Mixture:
    """Prepare every source of the mix with one tokenizer (see the module docstring), or reuse
    what is cached. `tokenizer` (a fine-tuning source's) is used as given; `pronouns` is the
    language of the pronouns corpus (data.prepare.prepare's). A single entry is
    data.prepare.prepare exactly, with its own tokenizer and cache folder."""
    if not entries:
        raise ValueError("data.mix is empty; give at least one source")
    if len(entries) == 1:
        only = prepare(
            open_source(entries[0].source, cache_dir, pronouns),
            tokenizer_kind,
            vocab_size,
            val_fraction,
            cache_dir,
            block_size,
            tokenizer=tokenizer,
        )
        path = only.dir / only.meta["tokenizer_file"]
        return Mixture(
            [Part(source_name(entries[0].source), 1.0, only)], only.tokenizer, path, only.meta
        )
    weights, starts = _normalised([e.weight for e in entries]), None
    if any(e.start_weight is not None for e in entries):
        starts = _normalised(
            [e.weight if e.start_weight is None else e.start_weight for e in entries]
        )
    if tokenizer is None:
        shares = weights if starts is None else [(a + b) / 2 for a, b in zip(starts, weights)]
        tokenizer_path = _mix_tokenizer(
            entries, shares, tokenizer_kind, vocab_size, cache_dir, pronouns
        )
        tokenizer = load_tokenizer(tokenizer_path)
    else:
        tokenizer_path = None
    parts = []
    for i, (entry, weight) in enumerate(zip(entries, weights)):
        try:
            prepared = prepare(
                open_source(entry.source, cache_dir, pronouns),
                tokenizer.kind,
                None,
                val_fraction,
                cache_dir,
                block_size,
                tokenizer=tokenizer,
            )
        except ValueError as e:
            raise ValueError(f"data.mix: {entry.source}: {e}") from None
        parts.append(Part(source_name(entry.source), weight, prepared, starts and starts[i]))
    if tokenizer_path is None:  # the given tokenizer: its file as the first part saved it
        tokenizer_path = parts[0].prepared.dir / parts[0].prepared.meta["tokenizer_file"]
    return Mixture(parts, tokenizer, tokenizer_path, mix_meta(parts, tokenizer_path.name))


def _normalised(weights: list[float]) -> list[float]:
    return [w / sum(weights) for w in weights]


def mix_meta(parts: list[Part], tokenizer_file: str) -> dict:
    """meta.json of a mixed run: the tokenizer, and each part's counts and cache folder."""
    first = parts[0].prepared.meta
    return {
        "source": _label(parts),
        "tokenizer_kind": first["tokenizer_kind"],
        "tokenizer_file": tokenizer_file,
        "vocab_size": first["vocab_size"],
        "dtype": first["dtype"],
        "train_tokens": sum(p.prepared.meta["train_tokens"] for p in parts),
        "val_tokens": sum(p.prepared.meta["val_tokens"] for p in parts),
        "mix": [
            {
                "name": p.name,
                "weight": p.weight,
                "start_weight": p.start_weight,
                "source": p.prepared.meta["source"],
                "prepared": str(p.prepared.dir),
                **{k: p.prepared.meta[k] for k in ("pronouns",) if k in p.prepared.meta},
                **{
                    k: p.prepared.meta[k]
                    for k in (
                        "source_sha256",
                        "split_char",
                        "train_tokens",
                        "val_tokens",
                        "train_bytes",
                        "val_bytes",
                    )
                },
            }
            for p in parts
        ],
    }


def _mix_tokenizer(entries, weights, kind, vocab_size, cache_dir, pronouns=None) -> Path:
    """The mix's tokenizer file, trained once and cached by the sources' contents (and, for bpe,
    the weights and vocabulary size)."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    sources = [open_source(e.source, cache_dir, pronouns) for e in entries]
    shas_and_sizes = [content_fingerprint(src) for src in sources]
    by_weight = weights if kind == "bpe" else None
    size = vocab_size if kind == "bpe" else None
    inputs = json.dumps(
        [FORMAT_VERSION, "mix", kind, size, [s for s, _ in shas_and_sizes], by_weight]
    )
    key = hashlib.sha256(inputs.encode()).hexdigest()[:16]
    out = Path(cache_dir) / "prepared" / f"mix-{kind}-{size or 'auto'}-{key}"
    name = "tokenizer.bpe" if kind == "bpe" else "tokenizer.json"
    if (out / name).exists():
        return out / name
    clean_stale_temps(out.parent)
    if kind == "char":
        text = "".join(
            sorted(set().union(*(set(piece) for src in sources for piece in src.iter_text())))
        )
    elif kind == "bpe":
        sample = _sample_chars(shas_and_sizes, weights)
        text = "\n".join(_prefix(src, int(w * sample)) for src, w in zip(sources, weights))
    else:
        text = ""
    tokenizer = train_tokenizer(kind, text, size)
    tmp = make_temp_folder(out)
    try:
        tokenizer.save(tmp / name)
        publish_folder(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / name).exists():  # not another process's finished copy
            raise
    return out / name


def _sample_chars(shas_and_sizes, weights) -> int:
    """Characters of BPE sample in all: BPE_SAMPLE_CHARS, or less where a source is too small
    to supply its share."""
    return int(min(BPE_SAMPLE_CHARS, *(n / w for (_, n), w in zip(shas_and_sizes, weights))))


def _prefix(src, n_chars: int) -> str:
    """The first n_chars characters of a source's text."""
    pieces, got = [], 0
    for piece in src.iter_text():
        if got >= n_chars:
            break
        pieces.append(piece[: n_chars - got])
        got += len(pieces[-1])
    return "".join(pieces)

"""Everything a run decides before its first step: prepare the data, check what the run folder
holds (resume) or what `train.init_from` starts from (fine-tuning). How the run starts is one
value, `Start`; training/job.py builds the run from it.
"""

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch.distributed as dist

from configs.schema import config_dict
from data.mix import Mixture, prepare_mix
from data.mix_spec import mix_entries
from data.sources import check_source
from model.checkpoint import CKPT_NAME, load_checkpoint
from model.gpt import SHAPE_KEYS, GPTConfig
from runs.loading import load_pretrained
from training.resume import (
    CannotResume,
    check_resume,
    data_fingerprint,
)
from training.runtime import compile_problem, setup_runtime, teardown
from training.trackers import check_installed

# Shape keys a fine-tuning config must share with its source (block_size may be smaller: the
# position table is cropped; dropout may differ).
SHARED_SHAPE = tuple(key for key in SHAPE_KEYS if key != "block_size")


@dataclass
class Pretrained:
    """Where train.init_from starts: the source's shape (block_size and dropout from the config),
    its weights (the position table cropped to block_size) and its tokenizer."""

    source: str
    config: GPTConfig
    state_dict: dict
    tokenizer: object


@dataclass
class Start:
    """How this run starts, decided once before anything is built: "fresh", "resumed" from
    out_dir's checkpoint, or "fine-tuned" from train.init_from's weights; the model it trains,
    and what it carries from there."""

    how: str
    model_config: GPTConfig
    fingerprint: dict  # the data it trains on, by content (training.resume.data_fingerprint)
    checkpoint: dict | None = None  # resumed: weights, optimizer, scaler and counters
    pretrained: Pretrained | None = None  # fine-tuned: the source's weights
    changes: tuple = ()  # resumed: what the new config changes, as "key old→new"
    aside: bool = False  # --force over a run: written aside until its first checkpoint
    # (runs/restart.py)


def start_runtime(config):
    """The Runtime of a run (device, dtype, torchrun's processes), once what can be checked
    before it is: each data source exists, each tracker's package imports, and train.compile
    can build kernels here. Each is a one-line ValueError."""
    for entry in mix_entries(config.data.mix, config.data.source):
        check_source(entry.source)
    check_installed(config.train.loggers)
    runtime = setup_runtime(config.train.device, config.train.dtype)
    problem = config.train.compile and compile_problem(runtime.device.type)
    if problem:
        teardown(runtime)
        raise ValueError(
            f"train.compile=true cannot build kernels here: {problem}; install it, "
            "or set train.compile=false"
        )
    return runtime


def pretrained_start(config):
    """train.init_from read and checked against the config's model keys; None without it."""
    source, m = config.train.init_from, config.model
    if not source:
        return None
    try:
        model_config, state_dict, tokenizer = load_pretrained(source)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"train.init_from={source}: {e}") from None
    diff = [
        f"model.{k} is {getattr(m, k)!r}, {source} has {getattr(model_config, k)!r}"
        for k in SHARED_SHAPE
        if getattr(m, k) != getattr(model_config, k)
    ]
    if m.block_size > model_config.block_size:
        diff.append(
            f"model.block_size {m.block_size} is longer than {source}'s "
            f"{model_config.block_size} positions"
        )
    if diff:
        raise ValueError(
            f"train.init_from: {'; '.join(diff)}; the model keys must match the source's shape "
            "(block_size may be smaller, dropout may differ)"
        )
    if "pos_emb.weight" in state_dict:  # a rotary model has no position table to crop
        state_dict = {**state_dict, "pos_emb.weight": state_dict["pos_emb.weight"][: m.block_size]}
    return Pretrained(
        source,
        replace(model_config, block_size=m.block_size, dropout=m.dropout),
        state_dict,
        tokenizer,
    )


def prepare_corpus(config, tokenizer=None) -> Mixture:
    """The config's sources (data.mix, or data.source), tokenised (or found already prepared)
    in data.cache_dir: with the tokenizer the config describes, or with `tokenizer` (a
    fine-tuning source's) when given."""
    kind, data = config.tokenizer.kind, config.data
    vocab_size = config.tokenizer.vocab_size if kind == "bpe" and tokenizer is None else None
    return prepare_mix(
        mix_entries(data.mix, data.source),
        kind,
        vocab_size,
        data.val_fraction,
        data.cache_path,
        config.model.block_size,
        tokenizer=tokenizer,
        pronouns=data.pronouns.story_mix,
    )


def vocab_note(config, data: Mixture, pretrained=None) -> str | None:
    """A note when the config's BPE learned fewer tokens than tokenizer.vocab_size asks (a
    small text runs out of pairs to merge), else None: the model's vocabulary is the smaller."""
    asked, learned = config.tokenizer.vocab_size, data.tokenizer.vocab_size
    if config.tokenizer.kind != "bpe" or pretrained is not None or not asked or learned >= asked:
        return None
    return (
        f"note: the BPE learned {learned:,} tokens, fewer than tokenizer.vocab_size={asked:,}: "
        "its text has no more pairs that repeat; the model's vocabulary is "
        f"{learned:,} (a longer text gives more)"
    )


def prepare_data(config, runtime, pretrained=None):
    """The config's data, prepared with `pretrained`'s tokenizer when fine-tuning. Under torchrun,
    one process per node (local rank 0) prepares while the others wait, then they find it in the
    cache; nodes without a shared filesystem each prepare their own."""
    if runtime.ddp and runtime.local_rank != 0:
        dist.barrier(group=runtime.preparing)
    data = prepare_corpus(config, pretrained.tokenizer if pretrained else None)
    if runtime.ddp and runtime.local_rank == 0:
        dist.barrier(group=runtime.preparing)
    return data


def how_it_starts(config, data, pretrained, force):
    """The run's Start, once every check has passed: resumed when out_dir holds a checkpoint
    (and not `force`), else fine-tuned when train.init_from gave `pretrained`, else fresh."""
    fingerprint = data_fingerprint(data)
    # A fine-tuned run trains its source's shape, also when it is resumed.
    model_config = (
        pretrained.config
        if pretrained
        else GPTConfig(vocab_size=data.tokenizer.vocab_size, **asdict(config.model))
    )
    ckpt_path = Path(config.out_dir) / CKPT_NAME
    if not force and ckpt_path.exists():
        if config.train.resume == "never":
            raise CannotResume(f"{ckpt_path} exists and train.resume=never")
        try:  # on the CPU: build() copies what it needs to the device, the rest is freed with it
            ckpt = load_checkpoint(ckpt_path, map_location="cpu", fix="")
        except ValueError as e:
            raise CannotResume(str(e)) from None
        changes = check_resume(
            ckpt, config_dict(config), asdict(model_config), fingerprint, config.out_dir
        )
        return Start("resumed", model_config, fingerprint, checkpoint=ckpt, changes=tuple(changes))
    aside = force and ckpt_path.exists()  # an old run stays whole until this one's first checkpoint
    if pretrained:
        return Start("fine-tuned", model_config, fingerprint, pretrained=pretrained, aside=aside)
    return Start("fresh", model_config, fingerprint, aside=aside)

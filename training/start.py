"""Everything a run does before its first step: prepare the data, pick the labelled sentences
the probe watches, check what the run folder holds (resume) or what `train.init_from` starts
from (fine-tuning), then build the model, optimizer and loss scaler and write the run folder's
files. How the run starts is one value, `Start`; the fixed parts of a run travel in `Job`, its
changing counters in `Progress`.
"""

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.distributed as dist

from configs.load import to_yaml
from configs.schema import Config, config_dict
from data.mix import Mixture, prepare_mix
from data.mix_spec import mix_entries
from model.checkpoint import CKPT_NAME, load_checkpoint
from model.device import bf16_native, fast_matmul_dtype
from model.gpt import GPT, SHAPE_KEYS, GPTConfig
from runs.folder import CONFIG_FILE, META_FILE, METRICS_FILE
from runs.loading import load_pretrained
from runs.restart import Aside, clean_stale_asides
from storage.atomic import clean_stale_temps, write_atomic
from training.console import Console, Metrics
from training.live_probe import probe_interval, probe_schedule
from training.optim import lr_at, make_optimizer
from training.resume import (
    CannotResume,
    check_resume,
    data_fingerprint,
    load_optimizer_state,
    load_scaler_state,
)
from training.runtime import Runtime, peak_flops, training_module
from training.trackers import Trackers

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


@dataclass(kw_only=True)
class Job:
    """What stays fixed while a run trains; built by keywords."""

    config: Config
    runtime: Runtime
    data: Mixture  # the prepared sources (one, or a data.mix)
    raw_model: GPT  # the plain module: evaluation and checkpoints use it
    model: torch.nn.Module  # what the training step calls, model(x, y) -> loss: TrainingLoss,
    # maybe DDP-wrapped, maybe compiled
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    fingerprint: dict
    metrics: Metrics | None  # rank 0 only
    peak: float | None  # FLOP/s of one process at 100% MFU (None: unknown)
    console: Console
    probe_examples: list | None  # labelled sentences the probe scores (rank 0; None: off)
    probe_steps: frozenset  # the steps after which the probe runs (probe_schedule)
    aside: Aside | None = None  # a forced restart's folder until its first checkpoint (rank 0)

    @property
    def out_dir(self):
        """The run folder, as the user named it."""
        return Path(self.config.out_dir)

    @property
    def folder(self):
        """Where the run's files are written now: out_dir, or a forced restart's aside folder."""
        return self.aside.folder if self.aside else self.out_dir

    @property
    def tokens_per_step(self):
        """Tokens one optimizer step trains on, over all processes."""
        settings = self.config.train
        return settings.batch_size * self.config.model.block_size * settings.grad_accum_steps


@dataclass
class Progress:
    """The counters that change while a run trains."""

    step: int
    start_step: int
    best_val: float = math.inf
    saved_step: int | None = None  # the step of the checkpoint on disk, if any
    final: dict | None = None  # the last evaluation
    loss_sum: torch.Tensor | None = None  # training loss summed on the device since the last log
    last_log_step: int = 0
    last_log_time: float = 0.0
    paused: float = 0.0  # seconds spent evaluating since the last log line
    tokens_per_sec: float | None = None  # at the last log line
    started: float = 0.0


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


def build(config, runtime, data, start, console, labelled=None, aside=None):
    """The Job: the model, optimizer and loss scaler as `start` says (its checkpoint's state, its
    source's weights with a fresh optimizer, or fresh), the run folder's files and metrics (in
    `aside`'s folder, a runs.restart.Aside, when given), and the probe's sentences `labelled`
    (None: off); and the counters to start from."""
    settings = config.train
    torch.manual_seed(config.seed)  # the same initial weights on every process
    raw_model = GPT(start.model_config).to(runtime.device)
    orth_dtype = fast_matmul_dtype(runtime.device.type, bf16_native(runtime.device))
    optimizer = make_optimizer(raw_model, settings, runtime.device.type, orth_dtype)
    scaler = torch.amp.GradScaler(runtime.device.type, enabled=runtime.dtype == torch.float16)
    progress = load_start(start, raw_model, optimizer, scaler, config.out_dir, console)
    progress.loss_sum = torch.zeros(
        (), device=runtime.device
    )  # summed on the device: no sync per step
    model = training_module(raw_model, runtime, settings.compile)
    metrics, peak = None, None
    folder = aside.folder if aside else Path(config.out_dir)
    if runtime.is_main:
        clean_stale_temps(config.out_dir)  # a killed writer's; the lock keeps live ones away
        clean_stale_asides(config.out_dir)
        if aside:
            console.say(
                f"forced restart: this run is written aside in {aside.folder} and replaces "
                f"{config.out_dir} whole at its first checkpoint; until then the old run "
                "stays as it is"
            )
        if progress.step < settings.max_iters:
            write_run_files(config, data, folder)
        trackers = Trackers(settings.loggers, folder, config) if settings.loggers else None
        metrics = Metrics(
            folder / METRICS_FILE,
            trackers=trackers,
            resume_step=progress.step if start.how == "resumed" else None,
        )
        peak = peak_flops(
            runtime.device, settings.peak_flops, config.data.cache_path, runtime.dtype
        )
        if peak is None:
            console.note(
                f"note: no peak FLOP/s known for {runtime.device}; MFU is shown as n/a until you "
                "set train.peak_flops"
            )
    say_setup(config, runtime, data, raw_model, orth_dtype, progress, console)
    job = Job(
        config=config,
        runtime=runtime,
        data=data,
        raw_model=raw_model,
        model=model,
        optimizer=optimizer,
        scaler=scaler,
        fingerprint=start.fingerprint,
        metrics=metrics,
        peak=peak,
        console=console,
        probe_examples=labelled,
        probe_steps=probe_schedule(settings.max_iters, probe_interval(config)),
        aside=aside,
    )
    return job, progress


def load_start(start, raw_model, optimizer, scaler, out_dir, console):
    """Put what `start` carries into the model, optimizer and scaler, say so, and return the
    counters the run goes on from."""
    if start.how == "resumed":
        ckpt = start.checkpoint
        console.say(
            f"resuming from step {ckpt['step']} of {Path(out_dir) / CKPT_NAME}"
            + (f"; from the new config: {', '.join(start.changes)}" if start.changes else "")
        )
        raw_model.load_state_dict(ckpt["model"])
        load_optimizer_state(optimizer, ckpt["optimizer"])
        note = load_scaler_state(scaler, ckpt.get("scaler", {}))
        if note:
            console.say(f"note: {note}")
        return Progress(
            step=ckpt["step"],
            start_step=ckpt["step"],
            best_val=ckpt["best_val_loss"],
            saved_step=ckpt["step"],
            last_log_step=ckpt["step"],
        )
    if start.how == "fine-tuned":
        raw_model.load_state_dict(start.pretrained.state_dict)
        console.say(
            f"starting from the weights of {start.pretrained.source} into {out_dir}; its "
            "tokenizer is used, not the config's tokenizer section"
        )
    else:
        console.say(f"training from scratch into {out_dir}")
    return Progress(step=0, start_step=0)


def say_setup(config, runtime, data, raw_model, orth_dtype, progress, console):
    """The model's size, the data, the device; and a note for a set-up that will disappoint."""
    settings = config.train
    shares = [
        f"{p.name} {p.weight:.0%}"
        if p.start_weight is None
        else f"{p.name} {p.start_weight:.0%} → {p.weight:.0%}"
        for p in data.parts
    ]
    mix = f" ({', '.join(shares)} of the windows)" if data.is_mix else ""
    console.say(
        f"{raw_model.num_params():,} parameters; {data.meta['train_tokens']:,} train tokens{mix}; "
        f"device {runtime.device}, {dtype_name(runtime.dtype)}, {runtime.world_size} process(es)"
        + (
            f"; Muon's Newton–Schulz in {dtype_name(orth_dtype)}"
            if settings.optimizer == "muon"
            else ""
        )
    )
    if settings.warmup_iters >= settings.max_iters and progress.step < settings.max_iters:
        last = lr_at(settings.max_iters - 1, settings)
        console.say(
            f"note: train.warmup_iters={settings.warmup_iters} is not below train.max_iters="
            f"{settings.max_iters}: the learning rate rises to {last / settings.lr:.0%} of "
            "train.lr and never decays; set warmup_iters below max_iters for the full schedule"
        )
    if (
        runtime.dtype == torch.bfloat16
        and not bf16_native(runtime.device)
        and runtime.device.type in ("cpu", "cuda")
    ):
        console.say(
            f"note: {runtime.device.type} has no bf16 in hardware, so train.dtype=bfloat16 is "
            "emulated and many times slower than float32; use train.dtype=auto"
        )


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def write_run_files(config, data, out_dir):
    """What generation needs besides the checkpoint: the config, meta.json and the tokenizer."""
    write_atomic(out_dir / CONFIG_FILE, to_yaml(config))
    write_atomic(out_dir / META_FILE, json.dumps(data.meta, indent=2) + "\n")
    write_atomic(out_dir / data.meta["tokenizer_file"], data.tokenizer_path.read_bytes())

"""A run built from how it starts (training/start.py's `Start`): the model, optimizer and loss
scaler (from a checkpoint's state, a source's weights with a fresh optimizer, or fresh), the run
folder's files and metrics, and the set-up it says. The fixed parts of a run travel in `Job`,
its changing counters in `Progress`.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.load import to_yaml
from configs.schema import Config
from data.mix import Mixture
from model.checkpoint import CKPT_NAME
from model.device import bf16_native, fast_matmul_dtype
from model.gpt import GPT
from runs.folder import CONFIG_FILE, META_FILE, METRICS_FILE
from runs.restart import Aside, clean_stale_asides
from storage.atomic import clean_stale_temps, write_atomic
from training.console import Console, Metrics
from training.live_probe import probe_interval, probe_schedule
from training.optim import lr_at, make_optimizer
from training.resume import (
    load_optimizer_state,
    load_scaler_state,
)
from training.runtime import Runtime, peak_flops, training_module
from training.trackers import Trackers


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
    if runtime.is_main:  # rank 0 alone writes the run folder
        metrics, peak = open_run_folder(config, runtime, data, start, progress, console, aside)
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


def open_run_folder(config, runtime, data, start, progress, console, aside=None):
    """Rank 0's part of building a run: stale temps cleaned, the run files written (into
    `aside`'s folder for a forced restart), the metrics opened, and the peak FLOP/s found.
    Returns (Metrics, peak FLOP/s or None)."""
    settings = config.train
    folder = aside.folder if aside else Path(config.out_dir)
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
    peak = peak_flops(runtime.device, settings.peak_flops, config.data.cache_path, runtime.dtype)
    if peak is None:
        console.note(
            f"note: no peak FLOP/s known for {runtime.device}; MFU is shown as n/a until you "
            "set train.peak_flops"
        )
    return metrics, peak


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

"""A run built from how it starts (training/start.py's `Start`): the model, optimizer and loss
scaler (from a checkpoint's state, a source's weights with a fresh optimizer, or fresh), the run
folder's files and metrics, and the set-up it says. The fixed parts of a run travel in `Job`,
its changing counters in `Progress`.
"""

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.load import to_yaml
from configs.paths import data_caches
from configs.schema import Config
from data.mix import Mixture
from model.checkpoint import CKPT_NAME
from model.device import bf16_native, fast_matmul_dtype
from model.gpt import GPT
from runs.folder import CONFIG_FILE, META_FILE, METRICS_FILE
from runs.output_path import check_output_path
from runs.restart import Aside, clean_stale_asides, finish_cut_swap, written_aside
from storage.atomic import clean_stale_temps, write_atomic
from storage.lock import folder_lock
from training.console import Console, Metrics
from training.optim import lr_at, make_optimizer
from training.resume import (
    check_language,
    load_optimizer_state,
    load_scaler_state,
)
from training.runtime import Runtime, peak_flops, training_module
from training.start import how_it_starts, prepare_data, pretrained_start, vocab_note
from training.trackers import Trackers
from training.watchers import Record, RunSteps, SignalStop, Watcher, Watchers


@dataclass(kw_only=True)
class Job:
    """What stays fixed while a run trains; built by keywords."""

    config: Config
    runtime: Runtime
    data: Mixture  # the prepared sources (one, or a data.mix)
    raw_model: GPT  # the plain module: evaluation and checkpoints use it
    model: torch.nn.Module  # what the training step calls, model(x, y) -> (logits, loss): the
    # GPT, maybe DDP-wrapped, maybe compiled
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    fingerprint: dict
    metrics: Metrics | None  # rank 0 only
    peak: float | None  # FLOP/s of one process at 100% MFU (None: unknown)
    console: Console
    watch: Watcher  # what watches the run (training/watchers.py): told of logs and evaluations
    aside: Aside | None = None  # a forced restart's folder until its first checkpoint (rank 0)

    @property
    def out_dir(self):
        """The run folder, as the user named it."""
        return Path(self.config.out_dir)

    @property
    def folder(self):
        """Where the run's files are written now: out_dir, or a forced restart's aside folder."""
        return self.aside.folder if self.aside else self.out_dir

    def checkpoint_state(self, progress: "Progress") -> str:
        """Where the run's checkpoint stands, for a message that says why the run stopped."""
        if self.aside and not self.aside.published:
            return (
                f"no checkpoint was written; {self.out_dir} still holds the old run, untouched "
                "(a forced restart replaces it only at the new run's first checkpoint)"
            )
        if progress.saved_step is None:
            return f"no checkpoint was written to {self.out_dir}"
        return f"the checkpoint of step {progress.saved_step} in {self.out_dir} is intact"

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


@contextlib.contextmanager
def open_job(config, runtime, force, watchers=()):
    """(Job, Progress) of a run about to train, inside what guards it: the run folder's lock
    (rank 0 alone writes the folder, so it alone holds it) and, for a forced restart, the aside
    folder that replaces the old run at the first checkpoint (runs.restart). Training's own
    watchers come first, then `watchers`."""
    console = Console(runtime.is_main)
    # A run folder is an output: never in a data cache, whose files every run reads.
    check_output_path(config.out_dir, caches=[*data_caches(), config.data.cache_path])
    if runtime.is_main and (note := finish_cut_swap(config.out_dir)):  # before its lock
        console.note(note)
    lock = folder_lock(config.out_dir, "training run") if runtime.is_main else None
    with lock or contextlib.nullcontext():
        settings = config.train
        if settings.grad_accum_steps % runtime.world_size:
            raise ValueError(
                f"train.grad_accum_steps ({settings.grad_accum_steps}) must be a multiple of the "
                f"number of processes ({runtime.world_size}): each process runs an equal share "
                "of the micro-batches"
            )
        watch = Watchers([Record(), SignalStop(), RunSteps(), *watchers])
        check_language(config, force or config.train.resume == "never")
        pretrained = pretrained_start(config)
        data = prepare_data(config, runtime, pretrained)
        if note := vocab_note(config, data, pretrained):
            console.note(note)
        watch.prepare(config, runtime, console)  # a watcher's inputs fail before the folder
        start = how_it_starts(config, data, pretrained, force)
        del pretrained
        aside_wanted = start.aside and runtime.is_main
        with written_aside(config.out_dir) if aside_wanted else contextlib.nullcontext() as aside:
            job, progress = build(config, runtime, data, start, console, watch, aside)
            del start  # a checkpoint's weights and moments need not stay for the whole run
            try:
                yield job, progress
            finally:
                if job.metrics is not None:
                    job.metrics.close()  # the trackers' last records reach their files


def build(config, runtime, data, start, console, watch, aside=None):
    """The Job: the model, optimizer and loss scaler as `start` says (its checkpoint's state, its
    source's weights with a fresh optimizer, or fresh), the run folder's files and metrics (in
    `aside`'s folder, a runs.restart.Aside, when given); and the counters to start from."""
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
    model = training_module(raw_model, runtime, settings.compile)  # what the step calls
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
        watch=watch,
        aside=aside,
    )
    return job, progress


def publish_aside(job, step):
    """A forced restart's first checkpoint is written: its aside folder replaces the old run."""
    kept = job.aside.publish()
    job.metrics.path = job.folder / METRICS_FILE  # Metrics appends by path
    kept = f"; kept from the old folder: {', '.join(kept)}" if kept else ""
    job.console.say(
        f"{job.out_dir}: the old run is replaced by this one at its first "
        f"checkpoint (step {step}){kept}"
    )


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


# The words the run's first lines use, said once where a reader first meets them.
TERMS = (
    "terms: MFU, model FLOPs utilization, the share of the hardware's peak FLOP/s the run uses; "
    "val bpb, the val loss in bits per byte of text, comparable across tokenizers"
)
MUON_TERM = "; Muon's Newton–Schulz, the optimizer's few matmuls that orthogonalise each update"


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
    console.say(TERMS + (MUON_TERM if settings.optimizer == "muon" else ""))
    if settings.warmup_iters >= settings.max_iters and progress.step < settings.max_iters:
        last = lr_at(settings.max_iters - 1, settings)
        console.say(
            f"note: train.warmup_iters={settings.warmup_iters} is not below train.max_iters="
            f"{settings.max_iters}: the learning rate rises to {last / settings.lr:.0%} of "
            "train.lr and never decays; set warmup_iters below max_iters for the full schedule"
        )
    window, block = config.model.local_window, config.model.block_size
    if window >= block:
        console.say(
            f"note: model.local_window={window} is not below model.block_size={block}: layer 0 "
            "sees every position, as with local_window=0; set it below block_size to limit it"
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


def write_config(job):
    """config.yaml, the config of the checkpoint just saved: written only with a checkpoint, so
    an attempt that saved nothing (a resume that diverged at once) leaves the one on disk."""
    write_atomic(job.folder / CONFIG_FILE, to_yaml(job.config))


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def write_run_files(config, data, out_dir):
    """What generation needs besides the checkpoint: meta.json and the tokenizer. config.yaml
    is the checkpoint's, written with it (write_config)."""
    write_atomic(out_dir / META_FILE, json.dumps(data.meta, indent=2) + "\n")
    write_atomic(out_dir / data.meta["tokenizer_file"], data.tokenizer_path.read_bytes())

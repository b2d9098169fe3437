"""A run built from how it starts (training/start.py's `Start`) once the loop has made its model
and optimizer: a checkpoint's state loaded into them (or a fine-tuning source's weights), the
loss scaler, the wrapped module the step calls, the run folder opened (training/run_folder.py),
and the set-up said. The fixed parts of a run travel in `Job`, its changing counters in
`Progress`.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.schema import Config
from data.mix import Mixture
from model.checkpoint import CKPT_NAME
from model.device import bf16_native
from model.gpt import GPT
from runs.restart import Aside
from training.console import Console, Metrics
from training.optim import lr_at
from training.resume import load_optimizer_state, load_scaler_state
from training.run_folder import OpenRun, open_run_folder
from training.runtime import Runtime, training_module


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


def make_job(run: OpenRun, raw_model: GPT, optimizer: torch.optim.Optimizer):
    """(Job, Progress) of the `run` the loop built `raw_model` and `optimizer` for: the state
    its Start carries loaded into them, the loss scaler, the module the step calls, the run
    folder opened (rank 0), and the set-up said."""
    config, runtime, console = run.config, run.runtime, run.console
    scaler = torch.amp.GradScaler(runtime.device.type, enabled=runtime.dtype == torch.float16)
    progress = load_start(run.start, raw_model, optimizer, scaler, config.out_dir, console)
    progress.loss_sum = torch.zeros((), device=runtime.device)  # on the device: no sync per step
    model = training_module(raw_model, runtime, config.train.compile)  # what the step calls
    peak = open_run_folder(run, progress) if runtime.is_main else None  # rank 0 writes the folder
    say_setup(config, runtime, run.data, raw_model, run.orth_dtype, progress, console)
    job = Job(
        config=config, runtime=runtime, data=run.data, raw_model=raw_model, model=model,
        optimizer=optimizer, scaler=scaler, fingerprint=run.start.fingerprint,
        metrics=run.metrics, peak=peak, console=console, aside=run.aside,
    )  # fmt: skip
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


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")

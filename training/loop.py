"""Training: `train(config)` builds the model and the optimizer, then `train_loop` runs the steps.

One step is nanoGPT's: the learning rate from the schedule, a batch, the forward pass and its
loss, backward, clipping, the optimizer's step; every log_interval steps a printed line; every
eval_interval steps (and at the end) an evaluation and a checkpoint. What guards a run stays
outside this file (training/run_folder.py: the folder's lock and a forced restart;
training/stopping.py: Ctrl-C and torchrun's processes stopping together; training/divergence.py:
a diverged run is never saved), and so does the lab: train.py plugs in the live probe and the
plots as `watchers` (training/watchers.py), which this file calls but never imports.
"""

import contextlib
import math
import time
from dataclasses import asdict

import torch

from configs.schema import config_dict, resolved
from data.loader import get_mixed_batch
from model.checkpoint import CKPT_NAME, atomic_save
from model.gpt import GPT
from training.console import eval_line, summary
from training.divergence import check_evaluation
from training.eval_text import full_val_losses
from training.evaluate import evaluate, mix_bits_per_byte, with_rates
from training.job import make_job
from training.optim import lr_at, make_optimizer
from training.peak import mfu
from training.run_folder import open_run, publish_aside, write_config
from training.runtime import all_sum, teardown
from training.seeds import dropout_seed, micro_batch_generator
from training.start import start_runtime
from training.stopping import TrainingStopped, guarded, lost_steps, stopped


def train(config, force=False, watchers=(), temporary=False):
    """Train as `config` says, with `watchers` (training/watchers.py: the lab's probe, plots, a
    benchmark's stop); return a dict describing the run. The run goes to config.run_dir, the
    folder `python train.py` would choose. force: start over even if the folder holds a
    checkpoint. temporary: the caller removes the folder after, so a stop promises no resume."""
    config = resolved(config)  # a copy whose out_dir is the run's folder (configs/run_dir.py)
    runtime = start_runtime(config)  # the device, the dtype, torchrun's processes
    try:
        with open_run(config, runtime, force, watchers) as run:
            torch.manual_seed(config.seed)  # the same initial weights on every process
            model = GPT(run.start.model_config).to(runtime.device)
            optimizer = make_optimizer(model, config.train, runtime.device.type, run.orth_dtype)
            job, progress = make_job(run, model, optimizer)  # a resume's state loaded into them
            return train_loop(job, progress, watchers, temporary)
    finally:
        teardown(runtime)


def train_loop(job, progress, watchers=(), temporary=False):  # noqa: PLR0915  seen whole, as nanoGPT's
    """Steps until train.max_iters, or until a stop (Ctrl-C, train.run_steps, a watcher): then
    an evaluation and a checkpoint, as at the end, so that no save skips the divergence check."""
    config, runtime, settings = job.config, job.runtime, job.config.train
    model, optimizer, scaler = job.model, job.optimizer, job.scaler
    accum = settings.grad_accum_steps // runtime.world_size  # this process's micro-batches
    progress.last_log_time = progress.started = time.perf_counter()
    reason = None
    with guarded(job, progress) as stops:  # the progress bar, Ctrl-C, a failed write's message
        while progress.step < settings.max_iters and not reason:
            step = progress.step
            lr = lr_at(step, settings)  # warmup, then a cosine down to min_lr
            for group in optimizer.param_groups:  # every group keeps the schedule's shape
                group["lr"] = group["peak_lr"] * lr / settings.lr
            torch.manual_seed(dropout_seed(config.seed, step, runtime.rank))  # training/seeds.py
            files = job.data.train_files(step / settings.max_iters)  # a curriculum's weights now
            for a in range(accum):
                g = micro_batch_generator(config.seed, step, runtime.rank * accum + a)
                x, y = get_mixed_batch(
                    files, job.data.meta["dtype"], settings.batch_size, config.model.block_size,
                    runtime.device, g,
                )  # fmt: skip
                # Under DDP, gradients are all-reduced only on the last micro-batch of a step.
                sync = not runtime.ddp or a == accum - 1
                with contextlib.nullcontext() if sync else model.no_sync():
                    with runtime.autocast():
                        _, loss = model(x, y)  # logits (B, T, V) and the mean next-token loss
                        loss = loss / accum
                    scaler.scale(loss).backward()
                progress.loss_sum += loss.detach()
            if settings.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(job.raw_model.parameters(), settings.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            progress.step = step = step + 1
            job.console.step()
            last = step == settings.max_iters
            if step % settings.log_interval == 0 or last:
                record = log_record(job, progress)  # the mean loss since the last line, tok/s
                if runtime.is_main:
                    job.metrics.log(**record)
                    job.console.log(**record)
            reasons = [w.after_step(job, progress) for w in watchers]  # the live probe
            if not last:
                reason = stops.reason(job, progress) or next((r for r in reasons if r), None)
            if step % settings.eval_interval == 0 or last or reason:
                started = time.perf_counter()
                final = evaluate(job.raw_model, job.data, config, runtime)  # fixed batches
                check_evaluation(final, progress, job.checkpoint_state(progress))
                progress.best_val = min(progress.best_val, final["val_loss"])
                progress.final = final = with_rates(final, job.data)  # perplexity, bits/byte
                if runtime.is_main:
                    job.metrics.log(step=step, **final)
                    seconds = time.perf_counter() - progress.started
                    job.console.say(eval_line(step, final, progress.tokens_per_sec, seconds))
                for w in watchers:
                    w.after_eval(job, progress)  # the plots
                save(job, progress)
                progress.paused += time.perf_counter() - started  # tok/s: training time only
    if reason:
        return stopped(job, progress, reason, temporary)
    return finish(job, progress, watchers)


def log_record(job, progress):
    """The log line's numbers: the mean training loss since the last line (over every process),
    the learning rate, tokens/s and MFU. A loss that is not finite stops the run."""
    runtime, step = job.runtime, progress.step
    steps = step - progress.last_log_step
    loss = (all_sum(progress.loss_sum, runtime) / (runtime.world_size * steps)).item()
    progress.loss_sum.zero_()
    if not math.isfinite(loss):
        raise TrainingStopped(
            f"loss is {loss} at step {step}; stopped, "
            f"{job.checkpoint_state(progress)} (try a lower train.lr)"
        )
    now = time.perf_counter()
    tok_s = job.tokens_per_step * steps / max(now - progress.last_log_time - progress.paused, 1e-9)
    progress.last_log_step, progress.last_log_time, progress.paused = step, now, 0.0
    progress.tokens_per_sec = tok_s
    util = mfu(job.raw_model.flops_per_token(), tok_s, job.peak, runtime.world_size)
    lr = lr_at(step - 1, job.config.train)
    return dict(step=step, loss=loss, lr=lr, tokens_per_sec=tok_s, mfu=util)


def save(job, progress):
    """Write the checkpoint (rank 0): everything a resume needs to go on bit for bit. Weights
    that are not finite are never saved over a good checkpoint."""
    if not job.runtime.is_main:
        return
    if not all(torch.isfinite(p).all() for p in job.raw_model.parameters()):
        raise TrainingStopped(
            f"weights are not finite at step {progress.step}; {job.checkpoint_state(progress)}"
        )
    try:
        atomic_save(
            {
                "model": job.raw_model.state_dict(),
                "optimizer": job.optimizer.state_dict(),
                "scaler": job.scaler.state_dict(),
                "step": progress.step,
                "best_val_loss": progress.best_val,
                "model_config": asdict(job.raw_model.config),
                "config": config_dict(job.config),
                "data": job.fingerprint,
            },
            job.folder / CKPT_NAME,
        )
        write_config(job)
    except ValueError as e:  # the disk is full, the folder went read-only, ...
        raise TrainingStopped(f"{e}; {lost_steps(progress)}") from None
    progress.saved_step = progress.step
    if job.aside and not job.aside.published:  # a forced restart replaces the old run now
        publish_aside(job, progress.step)


def finish(job, progress, watchers=()):
    """The closing summary (with train.final_full_eval, the loss on the whole val split first)."""
    runtime, settings, final = job.runtime, job.config.train, progress.final
    seconds = time.perf_counter() - progress.started
    tokens = job.tokens_per_step * (progress.step - progress.start_step)
    if final is not None and settings.final_full_eval:
        full = full_val_losses(
            job.raw_model, job.data, job.config.model.block_size, settings.batch_size, runtime
        )
        final.update(full, val_bpb_full=mix_bits_per_byte(full["val_loss_full"], job.data))
        if runtime.is_main:
            job.metrics.log(step=progress.step, **full, val_bpb_full=final["val_bpb_full"])
    if progress.start_step >= settings.max_iters:
        job.console.say(
            f"{job.out_dir} is already trained to train.max_iters={settings.max_iters}; "
            "raise it to train on"
        )
    for w in watchers:
        w.on_finish(job, progress)
    if runtime.is_main and final is not None:
        job.console.say(summary(final, tokens, seconds, job.out_dir))
    speed = tokens / max(seconds, 1e-9)
    return dict(
        step=progress.step, final=final, tokens=tokens, seconds=seconds, tokens_per_sec=speed
    )

"""The training loop: `train(config)`, on one process or under torchrun.

`train_loop` is the run, step by step: a batch, the forward pass and its loss, backward,
clipping, an optimizer step at the schedule's learning rate; a log line every log_interval
steps; an evaluation and a checkpoint every eval_interval steps and at the end. Around it:
training/job.py builds the Job (the data, the model, the optimizer, the run folder: what stays
fixed) and the Progress (the counters that change); training/optim.py is the optimizer and the
learning-rate schedule; training/evaluate.py the evaluation.

What watches or guards a run is plugged in, not written here: `watchers` (training/watchers.py)
are told of each log line and evaluation and may ask the loop to stop; the folder's lock and a
forced restart wrap the whole run (training/job.py). train.py adds the lab's watchers, the live
probe and the plots (lab/run.py); this file imports nothing of the lab.
"""

import contextlib
import math
import time
from dataclasses import asdict

import torch

from configs.schema import config_dict, resolved
from data.loader import get_mixed_batch
from model.checkpoint import CKPT_NAME, atomic_save
from training.console import perplexity, summary
from training.divergence import diverged, diverged_at
from training.evaluate import evaluate, full_val_losses, mix_bits_per_byte
from training.job import open_job, publish_aside, write_config
from training.optim import lr_at
from training.runtime import all_sum, mfu, teardown
from training.seeds import dropout_seed, micro_batch_generator
from training.start import start_runtime
from training.stopping import TrainingStopped, losing, lost_steps


def train(config, force=False, watchers=(), temporary=False):
    """Train as `config` says, with `watchers` (training/watchers.py) besides training's own;
    return a dict describing the run. The run goes to config.run_dir, the folder
    `python train.py` would choose. force: start over even if the folder holds a checkpoint.
    temporary: the caller removes the folder after (a benchmark's), so a stop promises no resume."""
    config = resolved(config)  # a copy: out_dir is the run's folder; the caller's is unchanged
    runtime = start_runtime(config)
    try:
        with open_job(config, runtime, force, watchers) as (job, progress):
            return train_loop(job, progress, temporary)
    finally:
        teardown(runtime)


def train_loop(job, progress, temporary=False):
    """Steps until train.max_iters, or until a watcher asks to stop: then an evaluation and a
    checkpoint, as at the end, so that no save skips the divergence check."""
    settings, watch = job.config.train, job.watch
    progress.last_log_time = progress.started = time.perf_counter()
    reason = None
    watch.on_start(job, progress)
    with watch.running(job, progress), losing(progress):
        while progress.step < settings.max_iters and not reason:
            torch.manual_seed(dropout_seed(job.config.seed, progress.step, job.runtime.rank))
            train_step(job, progress)
            last = progress.step == settings.max_iters
            if progress.step % settings.log_interval == 0 or last:
                log_progress(job, progress)
            if progress.step % settings.eval_interval == 0 or last:
                evaluate_and_save(job, progress)
            watch.after_step(job, progress)
            reason = None if last else watch.stop_reason(job, progress)
        if reason and progress.step % settings.eval_interval:  # not evaluated at this step yet
            evaluate_and_save(job, progress)
    if reason:
        return stopped(job, progress, reason, temporary)
    return finish(job, progress)


def train_step(job, progress):
    """One optimizer step: the process's share of the micro-batches, clipping, the update."""
    config, runtime, settings = job.config, job.runtime, job.config.train
    lr = lr_at(progress.step, settings)
    for group in job.optimizer.param_groups:  # every group follows the schedule's shape
        group["lr"] = group["peak_lr"] * lr / settings.lr
    accum = settings.grad_accum_steps // runtime.world_size
    files = job.data.train_files(progress.step / settings.max_iters)  # a curriculum's weights now
    for a in range(accum):
        g = micro_batch_generator(config.seed, progress.step, runtime.rank * accum + a)
        x, y = get_mixed_batch(
            files, job.data.meta["dtype"], settings.batch_size, config.model.block_size,
            runtime.device, g,
        )  # fmt: skip
        # Under DDP, gradients are all-reduced only on the last micro-batch of a step.
        sync = not runtime.ddp or a == accum - 1
        with contextlib.nullcontext() if sync else job.model.no_sync():
            with runtime.autocast():
                _, loss = job.model(x, y)
                loss = loss / accum
            job.scaler.scale(loss).backward()
        progress.loss_sum += loss.detach()
    if settings.grad_clip > 0:
        job.scaler.unscale_(job.optimizer)
        torch.nn.utils.clip_grad_norm_(job.raw_model.parameters(), settings.grad_clip)
    job.scaler.step(job.optimizer)
    job.scaler.update()
    job.optimizer.zero_grad(set_to_none=True)
    progress.step += 1


def log_progress(job, progress):
    """The mean training loss, learning rate, tokens/s and MFU since the last log line."""
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
    job.watch.on_log(
        job, progress, dict(step=step, loss=loss, lr=lr, tokens_per_sec=tok_s, mfu=util)
    )


def evaluate_and_save(job, progress):
    """Train and val loss on fixed batches; a checkpoint unless the run has diverged (then the
    one on disk, the last that passed, stays and the run stops)."""
    started = time.perf_counter()
    final = evaluate(job.raw_model, job.data, job.config, job.runtime)
    losses = [final["train_loss"], final["val_loss"], *final.get("val_loss_sources", {}).values()]
    if not all(math.isfinite(v) for v in losses):
        raise TrainingStopped(
            f"eval loss is not finite at step {progress.step}; stopped, "
            f"{job.checkpoint_state(progress)} (try a lower train.lr)"
        )
    if diverged(final["val_loss"], progress.best_val):
        raise TrainingStopped(diverged_at(progress, final, job.checkpoint_state(progress)))
    progress.best_val = min(progress.best_val, final["val_loss"])
    final.update(
        val_ppl=perplexity(final["val_loss"]),
        val_bpb=mix_bits_per_byte(final["val_loss"], job.data),
    )
    progress.final = final
    job.watch.on_eval(job, progress, final)
    save(job, progress)
    progress.paused += time.perf_counter() - started  # tokens/s measures training, not evaluation


def save(job, progress):
    """Write the checkpoint (rank 0). Non-finite weights are never saved over a good checkpoint."""
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


def stopped(job, progress, reason, temporary=False):
    """Say where a run stopped early stands; an interrupt goes on as a KeyboardInterrupt. A
    temporary folder (`temporary`) is said to go, never offered for a resume."""
    settings, interrupted = job.config.train, reason.startswith("interrupted")
    if temporary:
        job.console.say(
            f"{reason}, at step {progress.step} of {settings.max_iters}; its folder "
            f"{job.out_dir} is temporary and is removed"
        )
    elif interrupted:
        job.console.say(
            f"\n{reason}: checkpoint of step {progress.step} saved in {job.out_dir}; "
            "run the same command to resume"
        )
    else:
        job.console.say(
            f"{reason}, at step {progress.step} of {settings.max_iters}: checkpoint saved in "
            f"{job.out_dir}; run the same command to go on"
        )
    if interrupted:
        raise KeyboardInterrupt
    return {"step": progress.step, "stopped": True}


def finish(job, progress):
    """The loss on the whole val split and the closing summary."""
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
    job.watch.on_finish(job, progress)
    if runtime.is_main and final is not None:
        job.console.say(summary(final, tokens, seconds, job.out_dir))
    return {
        "step": progress.step,
        "final": final,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_sec": tokens / max(seconds, 1e-9),
    }

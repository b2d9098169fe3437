"""The training loop: `train(config)`, on one process or under torchrun.

`train` reads as the steps of a run: what comes before the first step (training/start.py:
prepare the data, decide how the run starts — fresh, resumed or fine-tuned; training/job.py:
build the model and optimizer), then the loop over `train_step`, logging (`log_progress`),
evaluating and saving (`evaluate_and_save`), probing the heads (`probe_heads`,
training/live_probe.py), and `finish`. The parts that stay fixed for a run travel in `Job`; the
counters that change travel in `Progress`; everything the run prints goes through its `Console`.
"""

import contextlib
import math
import time
from dataclasses import asdict

import torch

from configs.schema import config_dict, resolved
from data.loader import get_mixed_batch
from data.mix_spec import mix_entries
from data.sources import check_source
from model.checkpoint import CKPT_NAME, atomic_save
from runs.folder import LOSS_PLOT, METRICS_FILE, PROBE_PLOT
from runs.restart import finish_cut_swap, written_aside
from storage.lock import folder_lock
from training.console import Console, eval_line, perplexity, plot_losses, plot_probe, summary
from training.divergence import diverged, diverged_at
from training.evaluate import evaluate, full_val_losses, mix_bits_per_byte
from training.job import build
from training.live_probe import probe_examples, probe_heads
from training.optim import lr_at
from training.runtime import all_sum, any_process, compile_problem, mfu, setup_runtime, teardown
from training.seeds import dropout_seed, micro_batch_generator
from training.start import how_it_starts, prepare_data, pretrained_start
from training.stopping import StopRequests, TrainingStopped, checkpoint_state
from training.trackers import check_installed


def train(config, force=False):
    """Train as `config` says; return a dict describing the finished run. The run goes to
    config.run_dir, the folder `python train.py` would choose for the same config and overrides.

    force: start over in out_dir even if it holds a checkpoint (it is replaced).
    """
    config = resolved(config)  # a copy: out_dir is the run's folder; the caller's is unchanged
    # A mistyped path fails before the run folder is made.
    for entry in mix_entries(config.data.mix, config.data.source):
        check_source(entry.source)
    check_installed(config.train.loggers)  # so does a tracker whose package is missing
    runtime = setup_runtime(config.train.device, config.train.dtype)
    problem = config.train.compile and compile_problem(runtime.device.type)
    if problem:
        teardown(runtime)
        raise ValueError(
            f"train.compile=true cannot build kernels here: {problem}; install it, "
            "or set train.compile=false"
        )
    try:
        if runtime.is_main and (note := finish_cut_swap(config.out_dir)):  # before its lock
            Console(True).note(note)
        # Rank 0 alone writes the run folder, so it alone holds the folder's lock.
        with (
            folder_lock(config.out_dir, "training run")
            if runtime.is_main
            else contextlib.nullcontext()
        ):
            return _train(config, runtime, force)
    finally:
        teardown(runtime)


def _train(config, runtime, force):
    settings = config.train
    if settings.grad_accum_steps % runtime.world_size:
        raise ValueError(
            f"train.grad_accum_steps ({settings.grad_accum_steps}) must be a multiple of the "
            f"number of processes ({runtime.world_size}): each process runs an equal share of the "
            "micro-batches"
        )
    console = Console(runtime.is_main)
    pretrained = pretrained_start(config)
    data = prepare_data(config, runtime, pretrained)
    labelled = probe_examples(config, runtime, console)
    start = how_it_starts(config, data, pretrained, force)
    aside_wanted = start.aside and runtime.is_main  # rank 0 alone writes the run folder
    restart = written_aside(config.out_dir) if aside_wanted else contextlib.nullcontext()
    with restart as aside:
        job, progress = build(config, runtime, data, start, console, labelled, aside)
        del start, pretrained  # a checkpoint's weights and moments need not stay for the whole run
        try:
            return _loop(job, progress)
        finally:
            if job.metrics is not None:
                job.metrics.close()  # the trackers' last records reach their files


def _loop(job, progress):
    config, runtime, settings = job.config, job.runtime, job.config.train
    progress.last_log_time = progress.started = time.perf_counter()
    console = job.console
    console.open_bar(settings.max_iters, progress.step)
    requested = False  # a stop request, agreed on by every process
    with StopRequests() as stop:
        try:
            while progress.step < settings.max_iters:
                torch.manual_seed(dropout_seed(config.seed, progress.step, runtime.rank))
                train_step(job, progress)
                console.step()
                if (
                    progress.step % settings.log_interval == 0
                    or progress.step == settings.max_iters
                ):
                    log_progress(job, progress)
                if (
                    progress.step % settings.eval_interval == 0
                    or progress.step == settings.max_iters
                ):
                    evaluate_and_save(job, progress)
                if job.probe_examples and progress.step in job.probe_steps:
                    probe_heads(job, progress)
                stopping = (
                    settings.run_steps and progress.step - progress.start_step >= settings.run_steps
                )
                # Under torchrun each process gets the signal on its own, maybe a step apart: all
                # stop after the step in which any one got it, or the others would wait forever.
                requested = any_process(stop.signal, runtime)
                if (requested or stopping) and progress.step < settings.max_iters:
                    console.close()
                    if progress.saved_step != progress.step:
                        save(job, progress)
                    break
        except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: out at once
            console.close()
            console.say(f"\nstopped without saving; {checkpoint_state(job, progress)}")
            raise
        finally:
            console.close()  # before any message or error, so none lands inside the bar
    if requested and progress.step < settings.max_iters:
        console.say(
            f"\ninterrupted ({stop.signal or 'on another process'}): checkpoint of step "
            f"{progress.step} saved in {job.out_dir}; run the same command to resume"
        )
        raise KeyboardInterrupt
    if progress.step < settings.max_iters:  # train.run_steps is done
        console.say(
            f"stopped after train.run_steps={settings.run_steps} steps, at step "
            f"{progress.step} of {settings.max_iters}: checkpoint saved in {job.out_dir}; "
            "run the same command to go on"
        )
        return {"step": progress.step, "stopped": True}
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
            files,
            job.data.meta["dtype"],
            settings.batch_size,
            config.model.block_size,
            runtime.device,
            g,
        )
        # Under DDP, gradients are all-reduced only on the last micro-batch of a step.
        sync = not runtime.ddp or a == accum - 1
        with contextlib.nullcontext() if sync else job.model.no_sync():
            with runtime.autocast():
                loss = job.model(x, y) / accum
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
    runtime, settings, step = job.runtime, job.config.train, progress.step
    steps = step - progress.last_log_step
    loss = (all_sum(progress.loss_sum, runtime) / (runtime.world_size * steps)).item()
    progress.loss_sum.zero_()
    if not math.isfinite(loss):
        raise TrainingStopped(
            f"loss is {loss} at step {step}; stopped, "
            f"{checkpoint_state(job, progress)} (try a lower train.lr)"
        )
    now = time.perf_counter()
    tok_s = job.tokens_per_step * steps / max(now - progress.last_log_time - progress.paused, 1e-9)
    progress.last_log_step, progress.last_log_time, progress.paused = step, now, 0.0
    if runtime.is_main:
        lr = lr_at(step - 1, settings)
        util = mfu(job.raw_model.flops_per_token(), tok_s, job.peak, runtime.world_size)
        job.metrics.log(step=step, loss=loss, lr=lr, tokens_per_sec=tok_s, mfu=util)
        job.console.log(step, loss, lr, tok_s, util)
    progress.tokens_per_sec = tok_s


def evaluate_and_save(job, progress):
    """Train and val loss on fixed batches, logged; then a checkpoint."""
    started = time.perf_counter()
    final = evaluate(job.raw_model, job.data, job.config, job.runtime)
    losses = [final["train_loss"], final["val_loss"], *final.get("val_loss_sources", {}).values()]
    if not all(math.isfinite(v) for v in losses):
        raise TrainingStopped(
            f"eval loss is not finite at step {progress.step}; stopped, "
            f"{checkpoint_state(job, progress)} (try a lower train.lr)"
        )
    if diverged(final["val_loss"], progress.best_val):  # the checkpoint on disk stays
        raise TrainingStopped(diverged_at(progress, final, checkpoint_state(job, progress)))
    progress.best_val = min(progress.best_val, final["val_loss"])
    final.update(
        val_ppl=perplexity(final["val_loss"]),
        val_bpb=mix_bits_per_byte(final["val_loss"], job.data),
    )
    progress.final = final
    if job.runtime.is_main:
        job.metrics.log(step=progress.step, **final)
        job.console.say(
            eval_line(
                progress.step,
                final,
                progress.tokens_per_sec,
                time.perf_counter() - progress.started,
            )
        )
        records = job.metrics.records()  # both plots at every evaluation: a long run can be watched
        plot_losses(records, job.folder / LOSS_PLOT)
        plot_probe(records, job.folder / PROBE_PLOT)
    save(job, progress)
    progress.paused += time.perf_counter() - started  # tokens/s measures training, not evaluation


def save(job, progress):
    """Write the checkpoint (rank 0). Non-finite weights are never saved over a good checkpoint."""
    if not job.runtime.is_main:
        return
    if not all(torch.isfinite(p).all() for p in job.raw_model.parameters()):
        raise TrainingStopped(
            f"weights are not finite at step {progress.step}; {checkpoint_state(job, progress)}"
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
    except ValueError as e:  # the disk is full, the folder went read-only, ...
        raise TrainingStopped(f"{e}") from None
    progress.saved_step = progress.step
    if job.aside and not job.aside.published:
        kept = job.aside.publish()
        job.metrics.path = job.folder / METRICS_FILE  # Metrics appends by path
        kept = f"; kept from the old folder: {', '.join(kept)}" if kept else ""
        job.console.say(
            f"{job.out_dir}: the old run is replaced by this one at its first "
            f"checkpoint (step {progress.step}){kept}"
        )


def finish(job, progress):
    """The loss on the whole val split, loss.png and the closing summary."""
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
    if runtime.is_main:
        records = job.metrics.records()
        plot_probe(records, job.folder / PROBE_PLOT)
        if final is not None:
            plot_losses(records, job.folder / LOSS_PLOT)
            job.console.say(summary(final, tokens, seconds, job.out_dir))
    return {
        "step": progress.step,
        "final": final,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_sec": tokens / max(seconds, 1e-9),
    }

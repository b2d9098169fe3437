"""The training loop: `train(config)`, on one process or under torchrun.

`train` reads as the steps of a run: prepare the data, check what the run folder holds, build the
model and optimizer (resuming if there is a checkpoint), then loop over `train_step`, logging
(`log_progress`), evaluating and saving (`evaluate_and_save`), and close with `finish`. The parts
that stay fixed for a run travel in `Job`; the counters that change travel in `Progress`.
"""

import contextlib
import math
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from analysis.probe import head_scores
from configs.schema import to_yaml
from data.loader import get_batch
from data.pronouns import examples as pronoun_examples
from data.pronouns import read_jsonl
from data.prepare import Prepared, prepare
from model.checkpoint import CKPT_NAME, atomic_save, load_checkpoint, load_run
from model.gpt import GPT, GPTConfig, lm_loss
from storage.atomic import clean_stale_temps, write_atomic
from storage.lock import folder_lock
from training.optim import lr_at, make_optimizer
from training.evaluate import bits_per_byte, evaluate, evaluate_run, full_val_loss
from training.report import Console, Metrics, eval_line, plot_losses, plot_probe, summary
from training.resume import (FORCE_HINT, check_resume, data_fingerprint, data_mismatch,
                             load_optimizer_state, load_scaler_state, recorded_fingerprint)
from training.runtime import Runtime, all_sum, mfu, peak_flops, setup_runtime, teardown


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


def micro_batch_generator(seed, step, micro):
    """The generator that draws micro-batch `micro` of optimizer step `step`.

    Every (step, micro-batch) pair has its own seed, so a run's data depends neither on how many
    processes share the work (rank r takes micro-batches r·A .. r·A + A-1) nor on where it was
    interrupted and resumed: there is no data-order state to save.
    """
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 65_537 + micro)


def dropout_seed(seed, step, rank):
    """The seed of the default generators (CPU and every GPU) for step `step` on process `rank`.

    Reseeding every step makes dropout a function of (seed, step, rank): a resumed run draws the
    same masks as an uninterrupted one on any device, with no RNG state to save, and processes
    never share masks."""
    return ((seed * 1_000_003 + step) * 8_191 + rank) % (1 << 63)


@dataclass
class Job:
    """What stays fixed while a run trains."""

    config: object
    rt: Runtime
    prepared: Prepared
    raw_model: GPT  # the plain module: evaluation and checkpoints use it
    model: torch.nn.Module  # what the training step calls: maybe compiled, maybe DDP-wrapped
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    fingerprint: dict
    metrics: Metrics | None  # rank 0 only
    peak: float | None  # FLOP/s of one process at 100% MFU (None: unknown)
    console: Console | None = None  # set when the loop starts
    probe_examples: list | None = None  # labelled sentences for train.probe_interval (rank 0)

    @property
    def out_dir(self):
        return Path(self.config.out_dir)


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


def train(config, force=False, stop_after=None):
    """Train as `config` says; return a dict describing the finished run.

    force: start over in out_dir even if it holds a checkpoint (it is replaced).
    stop_after: stop (saving a checkpoint) after this many steps, as an interruption would.
    """
    rt = setup_runtime(config.train.device, config.train.dtype)
    try:
        # Rank 0 alone writes the run folder, so it alone holds the folder's lock.
        with folder_lock(config.out_dir, "training run") if rt.is_main else contextlib.nullcontext():
            if rt.is_main:
                clean_stale_temps(config.out_dir)  # leftovers of a killed writer; the lock keeps live ones away
            return _train(config, rt, force, stop_after)
    finally:
        teardown(rt)


def _train(config, rt, force, stop_after):
    t = config.train
    if t.grad_accum_steps % rt.world_size:
        raise ValueError(
            f"train.grad_accum_steps ({t.grad_accum_steps}) must be a multiple of the number of "
            f"processes ({rt.world_size}): each process runs an equal share of the micro-batches")
    prepared = prepare_data(config, rt)
    labelled = probe_examples(config, rt)
    job, progress = build(config, rt, prepared, resume_checkpoint(config, rt, prepared, force))
    job.probe_examples = labelled
    console = job.console = Console(rt.is_main, t.max_iters, progress.step)
    with StopRequests() as stop:
        try:
            while progress.step < t.max_iters:
                torch.manual_seed(dropout_seed(config.seed, progress.step, rt.rank))
                train_step(job, progress)
                console.step()
                if progress.step % t.log_interval == 0 or progress.step == t.max_iters:
                    log_progress(job, progress)
                if progress.step % t.eval_interval == 0 or progress.step == t.max_iters:
                    evaluate_and_save(job, progress)
                if job.probe_examples and (progress.step % t.probe_interval == 0 or progress.step == t.max_iters):
                    probe_heads(job, progress)
                stopping = stop_after is not None and progress.step - progress.start_step >= stop_after
                if (stop.signal or stopping) and progress.step < t.max_iters:
                    console.close()
                    if progress.saved_step != progress.step:
                        save(job, progress)
                    break
        except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: out at once
            console.close()
            _say(rt, f"\nstopped without saving; {_checkpoint_state(job, progress)}")
            raise
        finally:
            console.close()  # before any message or error, so none lands inside the bar
    if stop.signal and progress.step < t.max_iters:
        _say(rt, f"\ninterrupted ({stop.signal}): checkpoint of step {progress.step} saved in "
                 f"{job.out_dir}; run the same command to resume")
        raise KeyboardInterrupt
    if progress.step < t.max_iters:
        return {"step": progress.step, "stopped": True}
    return finish(job, progress)


def _say(rt, message):
    if rt.is_main:
        print(message, flush=True)


def _checkpoint_state(job, progress):
    if progress.saved_step is None:
        return f"no checkpoint was written to {job.out_dir}"
    return f"the checkpoint of step {progress.saved_step} in {job.out_dir} is intact"


class StopRequests:
    """Ctrl-C (SIGINT) or SIGTERM (what schedulers and `docker stop` send) asks the loop to stop
    at the end of the current step and save; a second one stops at once, without saving."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def _handle(self, signum, frame):
        if self.signal:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        print(f"\n{self.signal}: saving a checkpoint after this step (again to quit without saving)",
              file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False


def probe_examples(config, rt):
    """The labelled sentences train.probe_interval scores heads on, or None (probe off). A
    missing or malformed train.probe_file is a one-line error before anything is trained."""
    t = config.train
    if not t.probe_interval or not rt.is_main:
        return None
    if t.probe_file:
        try:
            labelled = read_jsonl(t.probe_file)
        except OSError as e:
            raise ValueError(f"train.probe_file {t.probe_file}: {e.strerror or e}") from None
        if not labelled:
            raise ValueError(f"train.probe_file {t.probe_file} holds no examples; write one JSON object per line")
        return labelled
    if config.data.source == "pronouns":
        return pronoun_examples("dev")
    print("note: train.probe_interval is on, but this corpus has no labelled pronouns; give "
          "train.probe_file (labelled JSONL, as for generate.py --probe) to watch the heads", file=sys.stderr)
    return None


def probe_heads(job, progress):
    """Every head's cand@1 on the probe's sentences now, in metrics.jsonl and on the console
    (rank 0; the others wait for it at the next step's all-reduce)."""
    if not job.rt.is_main:
        return
    started = time.perf_counter()
    job.raw_model.eval()
    with torch.inference_mode():
        scores = head_scores(job.raw_model, job.prepared.tokenizer, job.probe_examples)
    job.raw_model.train()
    layer, head = scores["best_head"]
    job.metrics.log(step=progress.step, probe_best=scores["best"], probe_best_head=scores["best_head"],
                    probe_heads=scores["heads"], probe_baselines=scores["baselines"])
    b = scores["baselines"]
    job.console.say(f"step {progress.step}: probe best head L{layer} H{head} {scores['best']:.1%} "
                    f"(baselines: first {b['first']:.1%}, nearest {b['nearest']:.1%})")
    progress.paused += time.perf_counter() - started


def prepare_corpus(config):
    """The config's corpus, tokenised (or found already prepared) in data.cache_dir."""
    kind = config.tokenizer.kind
    return prepare(config.data.source, kind, config.tokenizer.vocab_size if kind == "bpe" else None,
                   config.data.val_fraction, config.data.cache_dir, config.model.block_size)


def prepare_data(config, rt):
    """Under torchrun, one process per node (local rank 0) prepares while the others wait, then
    they find it in the cache; nodes without a shared filesystem each prepare their own."""
    if rt.ddp and rt.local_rank != 0:
        dist.barrier()
    prepared = prepare_corpus(config)
    if rt.ddp and rt.local_rank == 0:
        dist.barrier()
    return prepared


def resume_checkpoint(config, rt, prepared, force):
    """The checkpoint to continue from (None: start fresh), once every check has passed."""
    t, ckpt_path = config.train, Path(config.out_dir) / CKPT_NAME
    if force or not ckpt_path.exists():
        return None
    if t.resume == "never":
        raise ValueError(f"{ckpt_path} exists and train.resume=never; {FORCE_HINT}")
    ckpt = load_checkpoint(ckpt_path, map_location=rt.device)
    changes = check_resume(ckpt, asdict(config), asdict(_model_config(config, prepared)),
                           data_fingerprint(prepared), config.out_dir)
    _say(rt, f"resuming from step {ckpt['step']} of {ckpt_path}"
             + (f"; from the new config: {', '.join(changes)}" if changes else ""))
    return ckpt


def evaluate_only(config, text_path=None):
    """`train.py --eval-only`: the loss of the run in out_dir on a text file, or on the val split
    of the config's data — which must be the data the run was trained on."""
    from model.device import pick_device, pick_dtype

    device = pick_device(config.train.device)
    rt = Runtime(device, pick_dtype(config.train.dtype, device))
    run = load_run(config.out_dir, device)
    prepared = None
    if text_path is None:
        prepared = prepare_corpus(config)
        mismatch = data_mismatch(recorded_fingerprint(run.ckpt, config.out_dir), data_fingerprint(prepared))
        if mismatch:
            raise ValueError(f"{config.out_dir} {mismatch}, so this config's val split is not its own; "
                             "give the config it was trained with, or --text FILE")
    return evaluate_run(run, rt, config.train.batch_size, text_path, prepared)


def _model_config(config, prepared):
    return GPTConfig(vocab_size=prepared.tokenizer.vocab_size, **asdict(config.model))


def build(config, rt, prepared, ckpt):
    """The model, optimizer and loss scaler, fresh or from `ckpt`; the run folder's files."""
    t = config.train
    torch.manual_seed(config.seed)  # the same initial weights on every process
    raw_model = GPT(_model_config(config, prepared)).to(rt.device)
    optimizer = make_optimizer(raw_model, t.optimizer, t.lr, t.weight_decay, (t.beta1, t.beta2),
                               rt.device.type, t.muon_lr, t.muon_momentum)
    scaler = torch.amp.GradScaler(rt.device.type, enabled=rt.dtype == torch.float16)
    progress = Progress(step=0, start_step=0)
    if ckpt is not None:
        raw_model.load_state_dict(ckpt["model"])
        load_optimizer_state(optimizer, ckpt["optimizer"])
        note = load_scaler_state(scaler, ckpt.get("scaler", {}))
        if note:
            _say(rt, f"note: {note}")
        progress = Progress(step=ckpt["step"], start_step=ckpt["step"], best_val=ckpt["best_val_loss"],
                            saved_step=ckpt["step"])
    else:
        _say(rt, f"training from scratch into {config.out_dir}")
    progress.last_log_step = progress.step
    progress.last_log_time = progress.started = time.perf_counter()
    progress.loss_sum = torch.zeros((), device=rt.device)  # summed on the device: no sync per step
    model = torch.compile(raw_model) if t.compile else raw_model
    if rt.ddp:
        # The buffers (causal mask, positions) are constants: broadcasting them every step is waste.
        model = DDP(model, device_ids=[rt.device.index] if rt.device.type == "cuda" else None,
                    broadcast_buffers=False)
    metrics, peak = None, None
    if rt.is_main:
        if progress.step < t.max_iters:
            write_run_files(config, prepared, Path(config.out_dir))
        metrics = Metrics(Path(config.out_dir) / "metrics.jsonl", resume_step=progress.step if ckpt else None)
        peak = peak_flops(rt.device, t.peak_flops)
        if peak is None:
            print(f"note: no peak FLOP/s known for {rt.device}; MFU is shown as n/a until you set "
                  "train.peak_flops", file=sys.stderr)
    _say(rt, f"{raw_model.num_params():,} parameters; {prepared.meta['train_tokens']:,} train tokens; "
             f"device {rt.device}, {str(rt.dtype).removeprefix('torch.')}, {rt.world_size} process(es)")
    job = Job(config, rt, prepared, raw_model, model, optimizer, scaler, data_fingerprint(prepared),
              metrics, peak)
    return job, progress


def write_run_files(config, prepared, out_dir):
    """What generation needs besides the checkpoint: the config, meta.json and the tokenizer."""
    write_atomic(out_dir / "config.yaml", to_yaml(config))
    for name in ("meta.json", prepared.meta["tokenizer_file"]):
        write_atomic(out_dir / name, (prepared.dir / name).read_bytes())


def train_step(job, progress):
    """One optimizer step: the process's share of the micro-batches, clipping, the update."""
    config, rt, t = job.config, job.rt, job.config.train
    lr = lr_at(progress.step, t.lr, t.min_lr, t.warmup_iters, t.max_iters)
    for group in job.optimizer.param_groups:  # every group follows the schedule's shape
        group["lr"] = group["peak_lr"] * lr / t.lr
    accum = t.grad_accum_steps // rt.world_size
    for a in range(accum):
        g = micro_batch_generator(config.seed, progress.step, rt.rank * accum + a)
        x, y = get_batch(job.prepared.train_path, job.prepared.meta["dtype"], t.batch_size,
                         config.model.block_size, rt.device, g)
        # Under DDP, gradients are all-reduced only on the last micro-batch of a step.
        sync = not rt.ddp or a == accum - 1
        with contextlib.nullcontext() if sync else job.model.no_sync():
            with rt.autocast():
                loss = lm_loss(job.model(x), y) / accum
            job.scaler.scale(loss).backward()
        progress.loss_sum += loss.detach()
    if t.grad_clip > 0:
        job.scaler.unscale_(job.optimizer)
        torch.nn.utils.clip_grad_norm_(job.raw_model.parameters(), t.grad_clip)
    job.scaler.step(job.optimizer)
    job.scaler.update()
    job.optimizer.zero_grad(set_to_none=True)
    progress.step += 1


def log_progress(job, progress):
    """The mean training loss, learning rate, tokens/s and MFU since the last log line."""
    rt, t, step = job.rt, job.config.train, progress.step
    steps = step - progress.last_log_step
    loss = (all_sum(progress.loss_sum, rt) / (rt.world_size * steps)).item()
    progress.loss_sum.zero_()
    if not math.isfinite(loss):
        raise TrainingStopped(f"loss is {loss} at step {step}; stopped, "
                              f"{_checkpoint_state(job, progress)} (try a lower train.lr)")
    now = time.perf_counter()
    tokens = t.batch_size * job.config.model.block_size * t.grad_accum_steps * steps  # all processes
    tok_s = tokens / max(now - progress.last_log_time - progress.paused, 1e-9)
    progress.last_log_step, progress.last_log_time, progress.paused = step, now, 0.0
    if rt.is_main:
        lr = lr_at(step - 1, t.lr, t.min_lr, t.warmup_iters, t.max_iters)
        util = mfu(job.raw_model.flops_per_token(), tok_s, job.peak, rt.world_size)
        job.metrics.log(step=step, loss=loss, lr=lr, tokens_per_sec=tok_s, mfu=util)
        job.console.log(step, loss, lr, tok_s, util)
    progress.tokens_per_sec = tok_s


def evaluate_and_save(job, progress):
    """Train and val loss on fixed batches, logged; then a checkpoint."""
    started = time.perf_counter()
    final = evaluate(job.raw_model, job.prepared, job.config, job.rt)
    if not all(math.isfinite(v) for v in final.values()):
        raise TrainingStopped(f"eval loss is not finite at step {progress.step}; stopped, "
                              f"{_checkpoint_state(job, progress)} (try a lower train.lr)")
    progress.best_val = min(progress.best_val, final["val_loss"])
    final.update(val_ppl=math.exp(min(final["val_loss"], 50)),
                 val_bpb=bits_per_byte(final["val_loss"], job.prepared.meta))
    progress.final = final
    if job.rt.is_main:
        job.metrics.log(step=progress.step, **final)
        job.console.say(eval_line(progress.step, final, progress.tokens_per_sec,
                                  time.perf_counter() - progress.started))
    save(job, progress)
    progress.paused += time.perf_counter() - started  # tokens/s measures training, not evaluation


def save(job, progress):
    """Write the checkpoint (rank 0). Non-finite weights are never saved over a good checkpoint."""
    if not job.rt.is_main:
        return
    if not all(torch.isfinite(p).all() for p in job.raw_model.parameters()):
        raise TrainingStopped(f"weights are not finite at step {progress.step}; "
                              f"{_checkpoint_state(job, progress)}")
    try:
        atomic_save({
            "model": job.raw_model.state_dict(), "optimizer": job.optimizer.state_dict(),
            "scaler": job.scaler.state_dict(), "step": progress.step, "best_val_loss": progress.best_val,
            "model_config": asdict(job.raw_model.config), "config": asdict(job.config),
            "data": job.fingerprint,
        }, job.out_dir / CKPT_NAME)
    except ValueError as e:  # the disk is full, the folder went read-only, ...
        raise TrainingStopped(f"{e}") from None
    progress.saved_step = progress.step


def finish(job, progress):
    """The loss on the whole val split, loss.png and the closing summary."""
    rt, t, final = job.rt, job.config.train, progress.final
    seconds = time.perf_counter() - progress.started
    tokens = t.batch_size * job.config.model.block_size * t.grad_accum_steps * (progress.step - progress.start_step)
    if final is not None and t.final_full_eval:
        final["val_loss_full"] = full_val_loss(job.raw_model, job.prepared, job.config.model.block_size,
                                               t.batch_size, rt)
        final["val_bpb_full"] = bits_per_byte(final["val_loss_full"], job.prepared.meta)
        if rt.is_main:
            job.metrics.log(step=progress.step, val_loss_full=final["val_loss_full"],
                            val_bpb_full=final["val_bpb_full"])
    if progress.start_step >= t.max_iters:
        _say(rt, f"{job.out_dir} is already trained to train.max_iters={t.max_iters}; raise it to train on")
    if rt.is_main:
        plot_probe(job.metrics.records(), job.out_dir / "probe.png")
    if rt.is_main and final is not None:
        plot_losses(job.metrics.records(), job.out_dir / "loss.png")
        _say(rt, summary(final, tokens, seconds, job.out_dir))
    return {"step": progress.step, "final": final, "tokens": tokens, "seconds": seconds,
            "tokens_per_sec": tokens / max(seconds, 1e-9)}

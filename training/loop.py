"""The training loop: one visible function, `train(config)`, on one process or under torchrun."""

import contextlib
import math
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from configs.schema import to_yaml
from data.loader import get_batch
from data.prepare import prepare
from model.checkpoint import CKPT_NAME, atomic_save, load_checkpoint
from model.gpt import GPT, GPTConfig, lm_loss
from training.optim import lr_at, make_optimizer
from training.report import Metrics, plot_losses, summary
from training.runtime import all_sum, peak_flops, setup_runtime, teardown


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


def micro_batch_generator(seed, step, micro):
    """The generator that draws micro-batch `micro` of optimizer step `step`.

    Every (step, micro-batch) pair has its own seed, so a run's data depends neither on how many
    processes share the work (rank r takes micro-batches r·A .. r·A + A-1) nor on where it was
    interrupted and resumed: there is no data-order state to save.
    """
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 65_537 + micro)


@torch.no_grad()
def evaluate(model, prepared, config, rt):
    """Mean loss over eval_iters fixed batches of each split; processes share the batches out."""
    t, block_size = config.train, config.model.block_size
    model.eval()
    out = {}
    for split, path in (("train", prepared.train_path), ("val", prepared.val_path)):
        total = torch.zeros((), device=rt.device)
        for k in range(rt.rank, t.eval_iters, rt.world_size):
            # The same batches at every evaluation, so the curve shows the model change, not the data.
            g = torch.Generator().manual_seed(config.seed + 7919 * (k + 1))
            x, y = get_batch(path, prepared.meta["dtype"], t.batch_size, block_size, rt.device, g)
            with rt.autocast():
                total += lm_loss(model(x), y).float()
        out[f"{split}_loss"] = (all_sum(total, rt) / t.eval_iters).item()
    model.train()
    return out


@torch.no_grad()
def full_val_loss(model, prepared, block_size, batch_size, rt):
    """Mean next-token loss over the whole val split, cut into non-overlapping block_size
    windows (each process takes every world_size-th batch)."""
    data = np.memmap(prepared.val_path, dtype=np.dtype(prepared.meta["dtype"]), mode="r")
    starts = np.arange((len(data) - 1) // block_size) * block_size
    total = torch.zeros((), dtype=torch.float64, device=rt.device)
    model.eval()
    for i in range(rt.rank * batch_size, len(starts), rt.world_size * batch_size):
        windows = np.stack([data[s : s + block_size + 1] for s in starts[i : i + batch_size]])
        windows = torch.from_numpy(windows.astype(np.int64)).to(rt.device)  # (B, T + 1)
        with rt.autocast():
            logits = model(windows[:, :-1])
        total += F.cross_entropy(logits.float().flatten(0, 1), windows[:, 1:].flatten(), reduction="sum")
    model.train()
    return (all_sum(total, rt) / (len(starts) * block_size)).item()


def bits_per_byte(loss, meta):
    """Nats per token -> bits per byte of text, comparable across tokenizers."""
    if not meta.get("val_bytes"):
        return None
    return loss / math.log(2) * meta["val_tokens"] / meta["val_bytes"]


def train(config, force=False, stop_after=None):
    """Train as `config` says; return a dict describing the finished run.

    force: with train.resume=never, overwrite an existing checkpoint instead of refusing.
    stop_after: stop (saving a checkpoint) after this many steps, as an interruption would.
    """
    rt = setup_runtime(config.train.device, config.train.dtype)
    try:
        return _train(config, rt, force, stop_after)
    finally:
        teardown(rt)


def _train(config, rt, force, stop_after):
    t, out_dir = config.train, Path(config.out_dir)
    if t.grad_accum_steps % rt.world_size:
        raise ValueError(
            f"train.grad_accum_steps ({t.grad_accum_steps}) must be a multiple of the number of "
            f"processes ({rt.world_size}): each process runs an equal share of the micro-batches"
        )
    accum = t.grad_accum_steps // rt.world_size
    say = print if rt.is_main else (lambda *a, **k: None)

    # Rank 0 prepares the data first; the others then find it in the cache.
    if rt.ddp and not rt.is_main:
        dist.barrier()
    kind = config.tokenizer.kind
    prepared = prepare(config.data.source, kind, config.tokenizer.vocab_size if kind == "bpe" else None,
                       config.data.val_fraction, config.data.cache_dir, config.model.block_size)
    if rt.ddp and rt.is_main:
        dist.barrier()

    gpt_config = GPTConfig(vocab_size=prepared.tokenizer.vocab_size, **asdict(config.model))
    ckpt_path, ckpt = out_dir / CKPT_NAME, None
    if ckpt_path.exists():
        if t.resume == "never" and not force:
            raise ValueError(f"{ckpt_path} exists and train.resume=never; pass --force to overwrite it, "
                             "or choose another out_dir")
        if t.resume == "auto":
            ckpt = load_checkpoint(ckpt_path, map_location=rt.device)
            if ckpt["model_config"] != asdict(gpt_config):
                old = ckpt["model_config"]
                diff = ", ".join(f"{k} {old.get(k)} -> {v}" for k, v in asdict(gpt_config).items() if old.get(k) != v)
                raise ValueError(f"{ckpt_path} holds a model of another shape ({diff}); use another out_dir, "
                                 "or train.resume=never --force to start over")

    torch.manual_seed(config.seed)
    raw_model = GPT(gpt_config).to(rt.device)
    optimizer = make_optimizer(raw_model, t.optimizer, t.lr, t.weight_decay, (t.beta1, t.beta2),
                               rt.device.type, t.muon_lr, t.muon_momentum)
    scaler = torch.amp.GradScaler(rt.device.type, enabled=rt.dtype == torch.float16)
    step, best_val = 0, math.inf
    if ckpt is not None:
        raw_model.load_state_dict(ckpt["model"])
        try:
            optimizer.load_state_dict(ckpt["optimizer"])
        except ValueError:
            raise ValueError(f"{ckpt_path} was trained with another optimizer (train.optimizer="
                             f"{ckpt['config']['train']['optimizer']}); resume with that one, or use "
                             "another out_dir") from None
        scaler.load_state_dict(ckpt["scaler"])
        step, best_val = ckpt["step"], ckpt["best_val_loss"]
        torch.set_rng_state(ckpt["rng"]["torch"].cpu())
        say(f"resuming from step {step} of {ckpt_path}")
    else:
        say(f"training from scratch into {out_dir}")
    model = torch.compile(raw_model) if t.compile else raw_model
    if rt.ddp:
        model = DDP(model, device_ids=[rt.local_rank] if rt.device.type == "cuda" else None)

    if rt.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.yaml").write_text(to_yaml(config))
        for name in ("meta.json", prepared.meta["tokenizer_file"]):
            shutil.copyfile(prepared.dir / name, out_dir / name)
        metrics = Metrics(out_dir / "metrics.jsonl", resume_step=step if ckpt else None)
    say(f"{raw_model.num_params():,} parameters; {prepared.meta['train_tokens']:,} train tokens; "
        f"device {rt.device}, {str(rt.dtype).removeprefix('torch.')}, {rt.world_size} process(es)")

    def save():
        if not rt.is_main:
            return
        if not all(torch.isfinite(p).all() for p in raw_model.parameters()):
            raise TrainingStopped(f"weights are not finite at step {step}; kept the last good checkpoint")
        atomic_save({
            "model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(), "step": step, "best_val_loss": best_val,
            "model_config": asdict(gpt_config), "config": asdict(config),
            "rng": {"torch": torch.get_rng_state()},
        }, ckpt_path)

    tokens_per_step = t.batch_size * config.model.block_size * t.grad_accum_steps
    flops_per_token = raw_model.flops_per_token()
    peak = peak_flops(rt.device, t.peak_flops) if rt.is_main else None
    bar = tqdm(total=t.max_iters, initial=step, desc="train", unit="step", disable=not rt.is_main,
               dynamic_ncols=True, mininterval=0.5)
    start_step, final = step, None
    loss_sum = torch.zeros((), device=rt.device)  # summed on the device: no sync per step
    clock = last_log = time.perf_counter()
    last_log_step = step
    try:
        while step < t.max_iters:
            lr = lr_at(step, t.lr, t.min_lr, t.warmup_iters, t.max_iters)
            for group in optimizer.param_groups:  # every group follows the schedule's shape
                group["lr"] = group["peak_lr"] * lr / t.lr
            for a in range(accum):
                g = micro_batch_generator(config.seed, step, rt.rank * accum + a)
                x, y = get_batch(prepared.train_path, prepared.meta["dtype"], t.batch_size,
                                 config.model.block_size, rt.device, g)
                # Under DDP, gradients are all-reduced only on the last micro-batch of a step.
                sync = not rt.ddp or a == accum - 1
                with contextlib.nullcontext() if sync else model.no_sync():
                    with rt.autocast():
                        loss = lm_loss(model(x), y) / accum
                    scaler.scale(loss).backward()
                loss_sum += loss.detach()
            if t.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(raw_model.parameters(), t.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)

            if step % t.log_interval == 0 or step == t.max_iters:
                loss_value = (all_sum(loss_sum, rt) / (rt.world_size * (step - last_log_step))).item()
                loss_sum.zero_()
                if not math.isfinite(loss_value):
                    raise TrainingStopped(f"loss is {loss_value} at step {step}; stopped, the last good "
                                          f"checkpoint in {out_dir} is intact (try a lower train.lr)")
                now = time.perf_counter()
                tok_s = tokens_per_step * (step - last_log_step) / (now - last_log)
                last_log, last_log_step = now, step
                if rt.is_main:
                    mfu = flops_per_token * tok_s / peak
                    metrics.log(step=step, loss=loss_value, lr=lr, tokens_per_sec=tok_s, mfu=mfu)
                    bar.set_postfix_str(f"loss {loss_value:.4f} lr {lr:.2e} {tok_s:,.0f} tok/s MFU {mfu:.1%}")

            if step % t.eval_interval == 0 or step == t.max_iters:
                final = evaluate(model, prepared, config, rt)
                if not all(math.isfinite(v) for v in final.values()):
                    raise TrainingStopped(f"eval loss is not finite at step {step}; stopped, the last good "
                                          f"checkpoint in {out_dir} is intact (try a lower train.lr)")
                best_val = min(best_val, final["val_loss"])
                final.update(val_ppl=math.exp(min(final["val_loss"], 50)),
                             val_bpb=bits_per_byte(final["val_loss"], prepared.meta))
                if rt.is_main:
                    metrics.log(step=step, **final)
                save()
                last_log = time.perf_counter()  # tokens/s measures training, not evaluation
            if stop_after is not None and step - start_step >= stop_after and step < t.max_iters:
                save()
                bar.close()
                return {"step": step, "stopped": True}
    except KeyboardInterrupt:
        bar.close()
        save()
        say(f"\ninterrupted: checkpoint of step {step} saved in {out_dir}; run the same command to resume")
        raise
    bar.close()
    seconds = time.perf_counter() - clock
    tokens = tokens_per_step * (step - start_step)
    if final is not None and t.final_full_eval:
        final["val_loss_full"] = full_val_loss(model, prepared, config.model.block_size, t.batch_size, rt)
        final["val_bpb_full"] = bits_per_byte(final["val_loss_full"], prepared.meta)
        if rt.is_main:
            metrics.log(step=step, val_loss_full=final["val_loss_full"], val_bpb_full=final["val_bpb_full"])
    if start_step >= t.max_iters:
        say(f"{out_dir} is already trained to train.max_iters={t.max_iters}; raise it to train on")
    if rt.is_main and final is not None:
        plot_losses(metrics.records(), out_dir / "loss.png")
        say(summary(final, tokens, seconds, out_dir))
    return {"step": step, "final": final, "tokens": tokens, "seconds": seconds,
            "tokens_per_sec": tokens / max(seconds, 1e-9)}

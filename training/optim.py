"""The optimizer and the learning-rate schedule, as plain functions of the train settings."""

import math

import torch

from configs.schema import TrainConfig
from training.muon import MuonWithAdamW


def lr_at(step: int, schedule: TrainConfig) -> float:
    """Learning rate for optimizer step `step` (0-based): linear warmup from lr/warmup_iters up
    to lr over warmup_iters steps, then down to min_lr at max_iters: a cosine over all the steps
    after warmup (decay_frac 0, nanoGPT's), or lr held until the last decay_frac of the steps
    and a straight line from there (warmup, stable, decay: the speedrun records')."""
    lr, min_lr = schedule.lr, schedule.min_lr
    warmup_iters, max_iters = schedule.warmup_iters, schedule.max_iters
    if step < warmup_iters:
        return lr * (step + 1) / warmup_iters
    if step >= max_iters:
        return min_lr
    if schedule.decay_frac > 0:
        left = (max_iters - step) / (schedule.decay_frac * max_iters)
        return min_lr + min(1.0, left) * (lr - min_lr)  # lr until the decay starts
    progress = (step - warmup_iters) / max(1, max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def make_optimizer(
    model: torch.nn.Module,
    settings: TrainConfig,
    device_type: str,
    orth_dtype: torch.dtype = torch.float32,
) -> torch.optim.Optimizer:
    """The optimizer `settings.optimizer` names (adamw or muon), built from `settings` (lr,
    weight_decay, beta1, beta2, muon_lr, muon_momentum); every param group carries its peak
    learning rate in "peak_lr", which the schedule scales.

    adamw: AdamW with weight decay on matrices and embeddings only (2+ dimensions): decaying
    biases and LayerNorm gains toward zero only hurts. Fused kernels on CUDA and CPU (on a CPU
    too: a small model's step is many small tensors, and one kernel over all of them beats a
    loop that visits them one by one).
    muon: torch.optim.Muon for the matrices inside the blocks, its Newton–Schulz iterations in
    `orth_dtype` (model.device.fast_matmul_dtype chooses it), fused AdamW (same rule) for
    everything else (training.muon.MuonWithAdamW pairs them).
    """
    kind, lr, weight_decay = settings.optimizer, settings.lr, settings.weight_decay
    betas = (settings.beta1, settings.beta2)
    muon_lr, muon_momentum = settings.muon_lr, settings.muon_momentum
    params = [p for p in model.parameters() if p.requires_grad]
    matrices = [p for p in params if p.dim() >= 2]
    others = [p for p in params if p.dim() < 2]
    if kind == "adamw":
        groups = [
            {"params": matrices, "weight_decay": weight_decay, "peak_lr": lr},
            {"params": others, "weight_decay": 0.0, "peak_lr": lr},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=device_type in ("cuda", "cpu"))
    if kind == "muon":
        hidden = {id(p) for block in model.blocks for p in block.parameters() if p.dim() >= 2}
        groups = [
            {
                "params": [p for p in matrices if id(p) in hidden],
                "use_muon": True,
                "lr": muon_lr,
                "peak_lr": muon_lr,
                "momentum": muon_momentum,
                "weight_decay": 0.0,
            },
            {
                "params": [p for p in matrices if id(p) not in hidden],
                "weight_decay": weight_decay,
                "lr": lr,
                "peak_lr": lr,
                "betas": betas,
            },
            {"params": others, "weight_decay": 0.0, "lr": lr, "peak_lr": lr, "betas": betas},
        ]
        return MuonWithAdamW(groups, fused=device_type in ("cuda", "cpu"), orth_dtype=orth_dtype)
    raise ValueError(f"unknown optimizer {kind!r}; use adamw or muon")

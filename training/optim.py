"""The optimizer and the learning-rate schedule, as plain functions."""

import math

import torch


def lr_at(step, lr, min_lr, warmup_iters, max_iters):
    """Learning rate for optimizer step `step` (0-based): linear warmup from lr/warmup_iters up
    to lr over warmup_iters steps, then a cosine from lr down to min_lr at max_iters."""
    if step < warmup_iters:
        return lr * (step + 1) / warmup_iters
    if step >= max_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def make_optimizer(model, lr, weight_decay, betas, device_type):
    """AdamW with weight decay on matrices and embeddings only (2+ dimensions): decaying
    biases and LayerNorm gains toward zero only hurts. Fused kernels on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=device_type == "cuda")

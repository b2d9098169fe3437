"""Muon for the blocks' matrices, fused AdamW for everything else: the library's optimizers,
paired so that the loop, the GradScaler and checkpoints treat them as one.

Muon's step for a matrix W with momentum buffer M is W -= lr · scale · orth(M): orth keeps M's
singular vectors and sets every singular value to (about) one, so all directions of the update
move at the same rate, instead of a few dominant ones, and the same data trains faster. orth is a
few Newton–Schulz iterations, matmuls only (torch.optim.Muon, Keller Jordan's recipe with its
"original" scale sqrt(max(1, rows/cols))). Embeddings, the LM head, biases and gains stay with
AdamW, as in modded-nanogpt.

The library runs the iterations in bf16, which a CPU without bf16 in hardware (AVX2 only)
emulates at many times the cost of a whole training step; so `Muon` below is the library's
optimizer (its update rule, coefficients, learning-rate scale and state) with the iterations in
bf16 where the device computes it natively, float32 elsewhere (model.device.fast_matmul_dtype),
where the wide matrices (the MLP's, the qkv) take a cheaper route to the same result.
"""

import math

import torch


def newton_schulz(g, coefficients, steps, eps, dtype):
    """orth(g) by `steps` quintic Newton–Schulz iterations computed in `dtype`. On the wide side
    (rows <= cols) X = g / ‖g‖, then each step A = X Xᵀ, Q = aI + bA + cA², X = QX. In bf16 these
    are the library's operations in the library's order, bit for bit its result; in float32 a
    matrix over twice as wide as tall goes through its small Gram matrix (_through_gram), the same
    iteration in fewer multiplications."""
    a, b, c = coefficients
    x = g.to(dtype)
    wide = g.size(0) <= g.size(1)
    if not wide:
        x = x.T
    x = x / x.norm().clamp(min=eps)  # not in place: g.to(dtype) may be g itself
    if dtype == torch.float32 and x.size(1) > 2 * x.size(0):
        x = _through_gram(x, a, b, c, steps)
    else:
        for _ in range(steps):
            gram = x @ x.T
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x if wide else x.T


def _through_gram(x, a, b, c, steps):
    """The iteration on an r x n matrix with n > 2r, on r x r matrices only: X_k = M X_0 with
    M = Q_{k-1} ... Q_0, and A_{k+1} = X_{k+1} X_{k+1}ᵀ = Q_k A_k Q_k. Four r³ products a step
    instead of 2r²n + r³, and two r²n products in all."""
    gram = x @ x.T  # (r, r)
    m = torch.eye(gram.size(0), dtype=x.dtype, device=x.device)
    for _ in range(steps):
        q = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        q.diagonal().add_(a)  # Q = aI + bA + cA²
        m = q @ m
        gram = q @ gram @ q
    return m @ x


class Muon(torch.optim.Muon):
    """torch.optim.Muon whose Newton–Schulz iterations run in `orth_dtype`."""

    def __init__(self, params, orth_dtype=torch.bfloat16, **kwargs):
        super().__init__(params, **kwargs)
        self.orth_dtype = orth_dtype

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, buffers = [], [], []
            self._init_group(group, params, grads, buffers)
            lr, momentum = group["lr"], group["momentum"]
            for p, grad, buf in zip(params, grads, buffers):
                buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                update = newton_schulz(
                    update,
                    group["ns_coefficients"],
                    group["ns_steps"],
                    group["eps"],
                    self.orth_dtype,
                )
                p.mul_(1 - lr * group["weight_decay"])
                rows, cols = p.shape[:2]  # the "original" scale: a tall matrix takes larger steps
                p.add_(update, alpha=-lr * math.sqrt(max(1, rows / cols)))
        return loss


class MuonWithAdamW:
    """Muon (above) over the param groups marked use_muon=True, torch.optim.AdamW over the
    others. It offers what the training loop and torch.amp.GradScaler use of an optimizer:
    param_groups (both optimizers' groups, the same dicts, so setting "lr" reaches them), step,
    zero_grad, state, state_dict and load_state_dict. The state is the library's either way, so
    a checkpoint written with one `orth_dtype` resumes with the other."""

    def __init__(self, param_groups, fused=False, orth_dtype=torch.float32):
        muon = [g for g in param_groups if g.get("use_muon")]
        adamw = [g for g in param_groups if not g.get("use_muon")]
        self.muon = Muon(muon, orth_dtype=orth_dtype, adjust_lr_fn="original")
        self.adamw = torch.optim.AdamW(adamw, fused=fused)

    @property
    def param_groups(self):
        return self.muon.param_groups + self.adamw.param_groups

    @property
    def state(self):
        return {**self.muon.state, **self.adamw.state}

    @torch.no_grad()
    def step(self, closure=None):
        self.muon.step()
        self.adamw.step()

    def zero_grad(self, set_to_none=True):
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state):
        if set(state) != {"muon", "adamw"}:
            raise ValueError("not a Muon + AdamW optimizer state")
        self.muon.load_state_dict(state["muon"])
        self.adamw.load_state_dict(state["adamw"])

"""Muon: momentum SGD whose update for each weight matrix is orthogonalised.

For a matrix W with momentum buffer M, the step is W -= lr · scale · orth(M), where orth(M) keeps
M's singular vectors and sets every singular value to (about) one. All directions of the update
then move at the same rate, instead of a few dominant ones: the same data trains faster. orth is
computed with a few Newton–Schulz iterations, in matmuls only. Meant for the hidden 2-D matrices;
embeddings, the LM head, biases and gains stay with AdamW (Keller Jordan's modded-nanogpt).
"""

import torch

# Coefficients of the quintic iteration p(x) = a·x + b·x³ + c·x⁵, tuned so that five steps push
# every singular value in (0, 1] to within about ±30% of 1, fast rather than exactly.
NS_COEFFS = (3.4445, -4.7750, 2.0315)


def orthogonalize(g, steps=5):
    """Approximately U·Vᵀ for g = U·S·Vᵀ; g is (..., m, n), a stack of matrices done together."""
    a, b, c = NS_COEFFS
    x = g / (g.norm(dim=(-2, -1), keepdim=True) + 1e-7)  # spectral norm <= Frobenius norm <= 1
    transposed = x.size(-2) > x.size(-1)
    if transposed:  # iterate on the smaller Gram matrix x·xᵀ
        x = x.mT
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.mT if transposed else x


class Muon(torch.optim.Optimizer):
    """Muon for param groups marked use_muon=True, AdamW for the others, in one optimizer so that
    the loop, the GradScaler and checkpoints treat it like any other.

    Muon groups take lr, momentum, weight_decay; AdamW groups take lr, betas, eps, weight_decay.
    """

    def __init__(self, param_groups):
        for group in param_groups:
            group.setdefault("use_muon", False)
            group.setdefault("weight_decay", 0.0)
            if group["use_muon"]:
                group.setdefault("momentum", 0.95)
            else:
                group.setdefault("betas", (0.9, 0.95))
                group.setdefault("eps", 1e-8)
        super().__init__(param_groups, {})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            params = [p for p in group["params"] if p.grad is not None]
            if wd:
                for p in params:
                    p.mul_(1 - lr * wd)  # decoupled weight decay, as in AdamW
            if group["use_muon"]:
                self._muon(params, lr, group["momentum"])
            else:
                for p in params:
                    self._adam(p, self.state[p], lr, *group["betas"], group["eps"])

    def _muon(self, params, lr, mu):
        updates = []
        for p in params:
            state = self.state[p]
            if "momentum" not in state:
                state["momentum"] = torch.zeros_like(p)
            buf = state["momentum"]
            buf.mul_(mu).add_(p.grad)
            updates.append(p.grad.add(buf, alpha=mu))  # Nesterov momentum
        # Matrices of one shape (the same weight in every block) are orthogonalised as one stack:
        # a few batched matmuls instead of many small ones.
        by_shape = {}
        for p, u in zip(params, updates):
            by_shape.setdefault(p.shape, []).append((p, u))
        for shape, pairs in by_shape.items():
            orth = orthogonalize(torch.stack([u for _, u in pairs]))
            # An orthogonal (m, n) update has RMS 1/sqrt(max(m, n)); rescaling tall matrices
            # makes the step size mean the same whatever the shape.
            scale = max(1.0, shape[0] / shape[1]) ** 0.5
            for (p, _), o in zip(pairs, orth):
                p.add_(o, alpha=-lr * scale)

    @staticmethod
    def _adam(p, state, lr, beta1, beta2, eps):
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(p.grad, 1 - beta1)
        v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        denom = (v / (1 - beta2**t)).sqrt_().add_(eps)
        p.addcdiv_(m, denom, value=-lr / (1 - beta1**t))

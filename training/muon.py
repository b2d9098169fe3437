"""Muon for the blocks' matrices, fused AdamW for everything else: the library's optimizers,
paired so that the loop, the GradScaler and checkpoints treat them as one.

Muon's step for a matrix W with momentum buffer M is W -= lr · scale · orth(M): orth keeps M's
singular vectors and sets every singular value to (about) one, so all directions of the update
move at the same rate, instead of a few dominant ones, and the same data trains faster. orth is a
few Newton–Schulz iterations, matmuls only (torch.optim.Muon, Keller Jordan's recipe with its
"original" scale sqrt(max(1, rows/cols))). Embeddings, the LM head, biases and gains stay with
AdamW, as in modded-nanogpt.
"""

import torch


class MuonWithAdamW:
    """torch.optim.Muon over the param groups marked use_muon=True, torch.optim.AdamW over the
    others. It offers what the training loop and torch.amp.GradScaler use of an optimizer:
    param_groups (both optimizers' groups, the same dicts, so setting "lr" reaches them), step,
    zero_grad, state, state_dict and load_state_dict."""

    def __init__(self, param_groups, fused=False):
        muon = [g for g in param_groups if g.get("use_muon")]
        adamw = [g for g in param_groups if not g.get("use_muon")]
        self.muon = torch.optim.Muon(muon, adjust_lr_fn="original")
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

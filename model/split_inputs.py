"""TransformerLens's split q/k/v inputs (its use_split_qkv_input), a layer above the model.

    blocks.{l}.hook_q_input, hook_k_input, hook_v_input   (B, T, H, C) each head's own copy of
                                                          the stream for its query, key, value

A hook on any of the three gives each head of that layer its own copy of the stream for its
query, key and value, each normalised by ln1 on its own, so that path patching can change one
head's query without touching its key or another head; ln1 then runs three times, on
(B, T, H, C). With none of them hooked the block computes what a GPT's does. `split_inputs`
gives a GPT's blocks the three points in place: its state dict, and its forward while they are
unhooked, stay a GPT's. HookedGPT (model.hooked) has them from the start; the circuit analysis
gives them to the model it studies.
"""

import torch
from torch import nn

from model.attention import CausalSelfAttention
from model.gpt import Block
from model.hook_point import HookPoint, name_points

SPLIT_INPUTS = ("hook_q_input", "hook_k_input", "hook_v_input")


class SplitAttention(CausalSelfAttention):
    """CausalSelfAttention that also takes split inputs: a triple of (B, T, H, C), one copy of
    the stream per head for each of q, k and v; head h's query then reads q_input[:, :, h]."""

    def project(self, x):
        if isinstance(x, torch.Tensor):
            return super().project(x)
        H, D = self.n_head, self.head_size
        weights = self.w_qkv.weight.view(3, H, D, H * D)  # (3C, C) -> W_Q, W_K, W_V by head
        biases = self.w_qkv.bias.view(3, H, D) if self.w_qkv.bias is not None else None
        out = []
        for i, inputs in enumerate(x):  # (B, T, H, C) @ (H, D, C)ᵀ -> (B, T, H, D)
            t = torch.einsum("bthc,hdc->bthd", inputs, weights[i])
            if biases is not None:
                t = t + biases[i]
            out.append(t.transpose(1, 2))  # (B, T, H, D) -> (B, H, T, D)
        return out


class SplitBlock(Block):
    """Block whose attention reads split inputs while one of hook_q_input, hook_k_input,
    hook_v_input is hooked (never for a library watching every module, as nnsight does)."""

    def attn_input(self, x):
        split = [getattr(self, name) for name in SPLIT_INPUTS]
        if not any(point.hooked for point in split):
            return super().attn_input(x)
        copies = x[:, :, None, :].expand(-1, -1, self.attn.n_head, -1)  # (B, T, H, C)
        return [self.ln_1(point(copies)) for point in split]


def split_inputs(model: nn.Module) -> nn.Module:
    """`model` (a GPT) with the split inputs on each block, in place (a block that has them is
    left as it is), the points named and placed where they fire, after hook_resid_pre."""
    for block in model.blocks:
        if isinstance(block, SplitBlock):
            continue
        if type(block) is not Block or type(block.attn) is not CausalSelfAttention:
            raise TypeError(f"split_inputs takes a GPT's blocks, not a {type(block).__name__}")
        block.__class__, block.attn.__class__ = SplitBlock, SplitAttention
        modules = list(block._modules.items())
        block._modules.clear()
        for key, module in modules:
            block._modules[key] = module
            if key == "hook_resid_pre":
                block._modules.update((name, HookPoint()) for name in SPLIT_INPUTS)
    name_points(model)
    return model

"""The decoder: token + position embeddings, a stack of pre-LayerNorm blocks, a tied LM head.

That is GPT-2's architecture, and the default. GPTConfig also offers four changes from the
speedrun records, each one switch: relu² in the MLP, QK-norm and rotary positions in attention
(model.attention), and an LM head with its own matrix.

Letters used in shape comments: B batch, T time, C channels (n_embd), V vocabulary, L layers.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from checks import positive_int
from model.attention import CausalSelfAttention, KVCache
from model.hook_point import HookPoint, name_points


@dataclass
class GPTConfig:
    """The model's sizes and options. The defaults are the model train.py builds when its config
    leaves the model section alone (configs.schema.ModelConfig takes them from here), with the
    vocabulary the tokenizer gives; GPT-2 small is vocab_size=50257, block_size=1024, n_layer=12,
    n_head=12, n_embd=768."""

    vocab_size: int = 50304
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    # The embedding table is padded to a multiple of this: GPUs multiply 50,304 columns faster
    # than GPT-2's 50,257. Padded ids are never scored or sampled (forward drops their logits).
    vocab_multiple: int = 64
    # GELU exactly ("none"), or its tanh approximation ("tanh"), which GPT-2 was trained with
    # (Hugging Face's "gelu_new"): F.gelu's `approximate` argument.
    gelu_approximate: str = "none"
    # Changes from the speedrun records (modded-nanogpt). Each is off by default, which is GPT-2.
    mlp_activation: str = "gelu"  # or "relu2": relu(x)², the MLP of modded-nanogpt
    qk_norm: bool = False  # RMS-normalise each head's q and k before QKᵀ (model.attention)
    rotary: bool = False  # rotate q and k by their positions instead of adding a position table
    tie_embeddings: bool = True  # the LM head is the token embedding matrix; False: its own
    # Layer 0's heads see only their last local_window positions (themselves included); 0: all.
    # A local first layer reads each word's neighbours and leaves looking far to the layers
    # above (docs/findings/reasons.md: what it does to the pronoun's reasons).
    local_window: int = 0

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "vocab_multiple"):
            positive_int(name, getattr(self, name))
        if self.n_embd % self.n_head != 0:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}): "
                "each head gets n_embd / n_head channels"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.gelu_approximate not in ("none", "tanh"):
            raise ValueError(
                f"gelu_approximate must be 'none' or 'tanh', got {self.gelu_approximate!r}"
            )
        if self.mlp_activation not in ACTIVATIONS:
            raise ValueError(
                f"mlp_activation must be 'gelu' or 'relu2', got {self.mlp_activation!r}"
            )
        if not (isinstance(self.local_window, int) and self.local_window >= 0):
            raise ValueError(
                f"local_window must be 0 (layer 0 sees everything) or a number of positions, "
                f"got {self.local_window!r}"
            )
        if self.rotary and (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"rotary needs an even head size; n_embd / n_head is {self.n_embd // self.n_head}"
            )

    @classmethod
    def from_saved(cls, saved: dict):
        """The GPTConfig of a checkpoint's `model_config`. A key it lacks was written before the
        key existed and keeps the meaning it had then: an unpadded vocabulary (vocab_multiple 1)
        and GPT-2's architecture (the options' defaults)."""
        return cls(**{"vocab_multiple": 1, **saved})

    @property
    def padded_vocab_size(self):
        return -(-self.vocab_size // self.vocab_multiple) * self.vocab_multiple


def relu2(x):
    """relu(x)²: zero for x ≤ 0, x² above."""
    return F.relu(x).square()


ACTIVATIONS = ("gelu", "relu2")
# The GPTConfig options that change what the model computes without changing its sizes: a
# checkpoint resumed or fine-tuned must keep them.
ARCHITECTURE_KEYS = ("mlp_activation", "qk_norm", "rotary", "tie_embeddings", "local_window")
# The keys that make two models the same model: their sizes and what they compute. A resumed
# checkpoint must keep them all; a fine-tuning source all but block_size.
SHAPE_KEYS = ("block_size", "n_layer", "n_head", "n_embd", "bias") + ARCHITECTURE_KEYS


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.w_in = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()
        self.w_out = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.activation = config.mlp_activation
        self.gelu_approximate = config.gelu_approximate

    def forward(self, x):
        h = self.hook_pre(self.w_in(x))  # (B, T, C) -> (B, T, 4C)
        h = relu2(h) if self.activation == "relu2" else F.gelu(h, approximate=self.gelu_approximate)
        return self.dropout(self.w_out(self.hook_post(h)))


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm with TransformerLens's two points: hook_scale sees the divisor √(var + eps)
    (..., 1), hook_normalized x normalised before the gain and bias. With neither watched, it is
    nn.LayerNorm's own fused call."""

    def __init__(self, n_embd, bias=True):
        super().__init__(n_embd, bias=bias)
        self.hook_scale = HookPoint()
        self.hook_normalized = HookPoint()

    def forward(self, x):
        if not (self.hook_scale.active or self.hook_normalized.active):
            return super().forward(x)
        if self.hook_scale.active:
            centred = x - x.mean(-1, keepdim=True)
            divisor = (centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()  # (..., 1)
            normalized = centred / self.hook_scale(divisor)
        else:
            normalized = F.layer_norm(x, self.normalized_shape, eps=self.eps)
        x = self.hook_normalized(normalized) * self.weight
        return x + self.bias if self.bias is not None else x


class Block(nn.Module):
    """x + attention(LN(x)), then x + MLP(LN(x)): normalise before each sub-layer (GPT-2).
    Its hook points are registered in the order they fire (model.hooks lists them)."""

    def __init__(self, config, layer=0):
        super().__init__()
        self.hook_resid_pre = HookPoint()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(
            config.n_embd,
            config.n_head,
            config.dropout,
            config.bias,
            qk_norm=config.qk_norm,
            rotary_positions=config.block_size if config.rotary else 0,
            window=config.local_window if layer == 0 else 0,
        )
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_in = HookPoint()
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)
        self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x, cache=None):
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.attn_input(x), cache=cache)))
        x = x + self.hook_mlp_out(self.mlp(self.ln_2(self.hook_mlp_in(x))))
        return self.hook_resid_post(x)

    def attn_input(self, x):
        """What attention reads: the stream through ln_1 (model.split_inputs splits it by head)."""
        return self.ln_1(x)


class GPT(nn.Module):
    """The decoder. TransformerLens's calls (run_with_cache, to_tokens, cfg, ...) are a layer
    above it: model.hooked.HookedGPT, what runs.loading.load_run gives."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.padded_vocab_size, config.n_embd)
        # Rotary attention layers rotate q and k by position themselves: no table to add.
        self.pos_emb = None if config.rotary else nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.hook_embed = HookPoint()
        self.hook_pos_embed = HookPoint()
        self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # tied: one matrix reads and writes tokens
        # Positions 0 .. block_size-1, built once rather than on every forward.
        self.register_buffer("positions", torch.arange(config.block_size), persistent=False)
        name_points(self)
        self.reset_parameters()

    def reset_parameters(self):
        """GPT-2 init: N(0, 0.02) everywhere, zero biases, and the projections that write into
        the residual stream scaled by 1/√(2·n_layer), since 2·n_layer of them add up there."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            nn.init.normal_(block.attn.w_out.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.mlp.w_out.weight, mean=0.0, std=residual_std)

    def forward(self, idx, targets=None, caches=None):
        """idx (B, T) token ids -> logits (B, T, V), the next token's scores at every position;
        with targets (B, T), the next ids, (logits, loss) with the mean cross-entropy.

        `caches` (one KVCache per layer, from `new_caches`) makes idx the continuation of the
        positions already cached (sampling). To see or change what the model computes inside,
        hook its named points (model.hooks).
        """
        logits = self.unembed(self.residual(idx, caches))
        return logits if targets is None else (logits, lm_loss(logits, targets))

    def residual(self, idx: torch.Tensor, caches: list | None = None) -> torch.Tensor:
        """idx (B, T) -> the residual stream leaving the last block (B, T, C), which only the
        final LayerNorm reads: the forward pass without its unembedding (for a reader of one
        position, such as the logit lens or the circuit, where unembedding every position
        would cost a third of a GPT-2-sized model's work)."""
        B, T = idx.shape
        start = caches[0].length if caches is not None else 0
        if start + T > self.config.block_size:
            raise ValueError(
                f"input of {start + T} tokens is longer than block_size "
                f"({self.config.block_size}); crop it to the last block_size tokens"
            )
        x = self.hook_embed(self.tok_emb(idx))  # (B, T, C)
        if self.pos_emb is not None:
            pos = self.pos_emb(self.positions[start : start + T])  # (T, C)
            if self.hook_pos_embed.active:  # TransformerLens's shape: one row per batch row
                pos = self.hook_pos_embed(pos.expand(B, T, -1))  # (B, T, C)
            x = x + pos
        return self.blocks_from(self.drop(x), 0, caches)

    def blocks_from(self, x: torch.Tensor, layer: int, caches: list | None = None) -> torch.Tensor:
        """The stream x (B, T, C) entering block `layer` through that block and every one after
        it: the stream leaving the last (TransformerLens's start_at_layer)."""
        for i in range(layer, len(self.blocks)):
            x = self.blocks[i](x, caches[i] if caches is not None else None)
        return x

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """The residual stream x (..., C) -> logits (..., V): the final LayerNorm (through its
        hook point, ln_final.hook_normalized), then the LM head, the padded vocabulary's extra
        rows cropped (they are no tokens)."""
        logits = self.lm_head(self.ln_f(x))  # (..., padded V)
        if self.config.padded_vocab_size != self.config.vocab_size:
            logits = logits[..., : self.config.vocab_size]  # (..., V)
        return logits

    def new_caches(self, batch_size):
        """One empty KVCache per layer, on the model's device, in the dtype keys and values are
        computed in: the autocast dtype where autocast is on (half the memory of float32), else
        the model's."""
        c = self.config
        p = self.tok_emb.weight
        kind = p.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else p.dtype
        return [
            KVCache(batch_size, c.n_head, c.block_size, c.n_embd // c.n_head, p.device, dtype)
            for _ in range(c.n_layer)
        ]

    def num_params(self, non_embedding=True):
        """Parameter count; by default without the tables that are only looked up and do no
        matmul: the position table, and the token table when the LM head has its own matrix.
        (Tied to the LM head, the token table does the largest matmul and is counted.)"""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.pos_emb is not None:
            n -= self.pos_emb.weight.numel()
        if non_embedding and not self.config.tie_embeddings:
            n -= self.tok_emb.weight.numel()
        return n

    def flops_per_token(self, seq_len=None):
        """Training FLOPs (forward + backward) per token at context seq_len (default block_size):
        6 per parameter-token for the matmuls, plus 12·L·C·T for QKᵀ and weights·V."""
        T = seq_len or self.config.block_size
        c = self.config
        return 6 * self.num_params() + 12 * c.n_layer * c.n_embd * T


def lm_loss(logits, targets, reduction="mean"):
    """Cross-entropy of logits (B, T, V) against next-token targets (B, T): the mean, or with
    reduction="none" each position's loss (B, T). The one next-token loss of the project."""
    loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction=reduction)
    return loss if reduction != "none" else loss.view(targets.shape)

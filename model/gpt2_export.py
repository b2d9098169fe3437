"""Our GPT as a Hugging Face GPT-2: config.json and the weights in GPT-2's names, the inverse of
model/gpt2_import.py (its docstring has the name table). Conv1D stores (in, out), so the four
matrices of each block are transposed back; the padded rows of the token table are dropped; the
head is tied to the token table, as GPT-2's is.

Exact forms where GPT-2 spells a choice differently: a model without biases (`bias: false`) has
zero biases in GPT-2's layers (x·W + 0 is x·W), and GELU without approximation is GPT-2's
activation_function "gelu". What GPT-2 cannot express at all is refused: rotary positions,
QK-norm, relu², an untied head, a local first layer.
"""

import torch

from model.gpt import GPTConfig
from model.gpt2_import import BLOCK_NAMES

# Our options GPT-2 has no form for: (config key, the value GPT-2 needs, what to say).
NOT_GPT2 = (
    ("rotary", False, "rotary positions"),
    ("qk_norm", False, "QK-norm"),
    ("mlp_activation", "gelu", "the relu² MLP"),
    ("tie_embeddings", True, "an untied LM head"),
    ("local_window", 0, "a local first layer"),
)


def gpt2_config_json(
    config: GPTConfig, bos: int | None = None, eos: list[int] | None = None
) -> dict:
    """The config.json of `config` as a GPT-2, with `bos` (an id) and `eos` (the ids that end
    a sample); ValueError (one line naming the option) for a model GPT-2 cannot express."""
    for key, needed, what in NOT_GPT2:
        if getattr(config, key) != needed:
            raise ValueError(
                f"model.{key}={getattr(config, key)!r} ({what}) has no GPT-2 form, so this "
                "run cannot be exported as a GPT-2; only a GPT-2-shaped model can"
            )
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_ctx": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,
        "activation_function": "gelu_new" if config.gelu_approximate == "tanh" else "gelu",
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
    }


def generation_config_json(bos: int, eos: list[int]) -> dict:
    """generation_config.json, which transformers' generate reads: it stops at any of `eos`
    and pads a finished sample of a batch with `bos`."""
    return {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": bos}


def gpt2_state_dict(config: GPTConfig, state: dict) -> dict:
    """Our state dict -> GPT-2's names and layout: contiguous float32 tensors on the CPU, no two
    sharing memory (as safetensors needs), the token table unpadded, no lm_head (tied)."""
    gpt2_config_json(config)  # refuses what GPT-2 cannot express
    C = config.n_embd

    def own(name):
        return state[name].detach().to("cpu", torch.float32)

    out = {
        "transformer.wte.weight": own("tok_emb.weight")[: config.vocab_size],
        "transformer.wpe.weight": own("pos_emb.weight"),
    }
    for name in ("weight", "bias"):
        out[f"transformer.ln_f.{name}"] = (
            own(f"ln_f.{name}") if f"ln_f.{name}" in state else torch.zeros(C)
        )
    for i in range(config.n_layer):
        for theirs, ours, conv in BLOCK_NAMES:
            weight = own(f"blocks.{i}.{ours}.weight")
            out[f"transformer.h.{i}.{theirs}.weight"] = (
                weight.t() if conv else weight
            )  # Linear -> Conv1D
            bias = state.get(f"blocks.{i}.{ours}.bias")
            size = C * conv[1] if conv else C
            out[f"transformer.h.{i}.{theirs}.bias"] = (
                torch.zeros(size) if bias is None else own(f"blocks.{i}.{ours}.bias")
            )
    return {k: v.contiguous().clone() for k, v in out.items()}

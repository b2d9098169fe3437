"""Our GPT as a Hugging Face model: GPT-2, or GPT-Neo where layer 0 is local. config.json and
the weights in that model's names; model/gpt2_import.py reads a GPT-2 back (its docstring has
the name table).

GPT-2 is our architecture. GPT-Neo is GPT-2 with two differences, both expressible: a layer
may be "local" (`attention_types`, `window_size`: a query sees its last window_size positions,
itself included, as our `local_window` does), and its attention neither scales the scores by
1/√d_k nor has biases on q, k and v. So W_Q goes out already multiplied by 1/√d_k, and a local
model with biases (model.bias) is refused: GPT-Neo has nowhere to put q's.

Exact forms where a choice is spelled differently: a model without biases (`bias: false`) has
zero biases in the layers that have them (x·W + 0 is x·W); GELU without approximation is
activation_function "gelu", its tanh form "gelu_new", relu² "relu2". Conv1D (GPT-2) stores
(in, out), so GPT-2's four matrices of each block are transposed; GPT-Neo's Linear layers store
(out, in), as ours do. The padded rows of the token table are dropped; the head is tied to the
token table in both. What neither can express is refused in one line naming the option.
"""

import math

import torch

from model.gpt import GPTConfig
from model.gpt2_import import BLOCK_NAMES

# Our options neither GPT-2 nor GPT-Neo has a form for: (config key, the value needed, what).
NO_HF_FORM = (
    ("rotary", False, "rotary positions"),
    ("qk_norm", False, "QK-norm"),
    ("tie_embeddings", True, "an untied LM head"),
)
ACTIVATION_NAMES = {
    ("gelu", "none"): "gelu",
    ("gelu", "tanh"): "gelu_new",
    ("relu2", "none"): "relu2",
}


def hf_architecture(config: GPTConfig) -> str:
    """The Hugging Face model `config` exports as: "gpt2", or "gpt_neo" for a local first
    layer. ValueError (one line naming the option) for a model neither can express."""
    for key, needed, what in NO_HF_FORM:
        if getattr(config, key) != needed:
            raise ValueError(
                f"model.{key}={getattr(config, key)!r} ({what}) has no form in GPT-2 or GPT-Neo, "
                "so this run cannot be exported; train without it to export"
            )
    if not config.local_window:
        return "gpt2"
    if config.bias:
        raise ValueError(
            "model.bias=True with model.local_window (a local first layer): GPT-Neo, the "
            "Hugging Face model with local layers, has no bias on its queries; train with "
            "model.bias=false to export"
        )
    return "gpt_neo"


def hf_config_json(config: GPTConfig, bos: int | None = None, eos: list | None = None) -> dict:
    """The config.json of `config` as GPT-2 or GPT-Neo (hf_architecture), with `bos` (an id)
    and `eos` (the ids that end a sample); ValueError for a model neither can express."""
    architecture = hf_architecture(config)
    activation = ACTIVATION_NAMES[config.mlp_activation, config.gelu_approximate]
    common = {
        "vocab_size": config.vocab_size,
        "activation_function": activation,
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
    }
    if architecture == "gpt_neo":
        rest = config.n_layer - 1  # layer 0 local, the others global
        return {
            "model_type": "gpt_neo",
            "architectures": ["GPTNeoForCausalLM"],
            "max_position_embeddings": config.block_size,
            "hidden_size": config.n_embd,
            "num_layers": config.n_layer,
            "num_heads": config.n_head,
            "intermediate_size": 4 * config.n_embd,
            "attention_types": [[["local"], 1]] + ([[["global"], rest]] if rest else []),
            "window_size": config.local_window,
            "resid_dropout": config.dropout,
            "embed_dropout": config.dropout,
            "attention_dropout": config.dropout,
            **common,
        }
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_positions": config.block_size,
        "n_ctx": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        **common,
    }


def generation_config_json(bos: int, eos: list[int]) -> dict:
    """generation_config.json, which transformers' generate reads: it stops at any of `eos`
    and pads a finished sample of a batch with `bos`."""
    return {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": bos}


def hf_state_dict(config: GPTConfig, state: dict) -> dict:
    """Our state dict -> the names and layout of hf_architecture(config): contiguous float32
    tensors on the CPU, no two sharing memory (as safetensors needs), the token table unpadded,
    no lm_head (tied)."""
    architecture = hf_architecture(config)  # refuses what neither can express
    C = config.n_embd

    def own(name, size=C):
        if name not in state:  # a model without biases: GPT-2's and GPT-Neo's are zero
            return torch.zeros(size)
        return state[name].detach().to("cpu", torch.float32)

    out = {
        "transformer.wte.weight": own("tok_emb.weight")[: config.vocab_size],
        "transformer.wpe.weight": own("pos_emb.weight"),
        "transformer.ln_f.weight": own("ln_f.weight"),
        "transformer.ln_f.bias": own("ln_f.bias"),
    }
    blocks = _neo_block if architecture == "gpt_neo" else _gpt2_block
    for i in range(config.n_layer):
        out |= blocks(config, i, lambda name, size=C, i=i: own(f"blocks.{i}.{name}", size))
    return {k: v.contiguous().clone() for k, v in out.items()}


def _gpt2_block(config, i, own):
    """Block i in GPT-2's names: Conv1D matrices are stored (in, out), our Linear's transposed."""
    out = {}
    for theirs, ours, conv in BLOCK_NAMES:
        weight = own(f"{ours}.weight")
        out[f"transformer.h.{i}.{theirs}.weight"] = weight.t() if conv else weight
        out[f"transformer.h.{i}.{theirs}.bias"] = own(
            f"{ours}.bias", config.n_embd * conv[1] if conv else config.n_embd
        )
    return out


def _neo_block(config, i, own):
    """Block i in GPT-Neo's names (Linear layers, as ours): q, k and v apart, without biases
    (hf_architecture refused a model with them), W_Q times 1/√d_k since GPT-Neo does not scale
    the scores."""
    C = config.n_embd
    q, k, v = own("attn.w_qkv.weight").split(C)  # (3C, C) -> three (C, C)
    p = f"transformer.h.{i}"
    return {
        f"{p}.ln_1.weight": own("ln_1.weight"),
        f"{p}.ln_1.bias": own("ln_1.bias"),
        f"{p}.attn.attention.q_proj.weight": q / math.sqrt(C // config.n_head),
        f"{p}.attn.attention.k_proj.weight": k,
        f"{p}.attn.attention.v_proj.weight": v,
        f"{p}.attn.attention.out_proj.weight": own("attn.w_out.weight"),
        f"{p}.attn.attention.out_proj.bias": own("attn.w_out.bias"),
        f"{p}.ln_2.weight": own("ln_2.weight"),
        f"{p}.ln_2.bias": own("ln_2.bias"),
        f"{p}.mlp.c_fc.weight": own("mlp.w_in.weight"),
        f"{p}.mlp.c_fc.bias": own("mlp.w_in.bias", 4 * C),
        f"{p}.mlp.c_proj.weight": own("mlp.w_out.weight"),
        f"{p}.mlp.c_proj.bias": own("mlp.w_out.bias"),
    }

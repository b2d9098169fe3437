"""GPT-2 in the Hugging Face format, read into our own GPT (model/gpt.py).

A Hugging Face GPT-2 folder holds config.json and the weights, model.safetensors or
pytorch_model.bin (its vocab.json and merges.txt are data/tokenizer.py's business). GPT-2 is our
decoder exactly — pre-LayerNorm blocks, learned positions, a head tied to the token embedding —
once three things agree: GELU's tanh approximation ("gelu_new"), LayerNorm's eps (1e-5, torch's
default and ours), and the weight layout. GPT-2's Conv1D layers compute x·W + b with W stored
(in, out), the transpose of nn.Linear's (out, in):

    transformer.wte, wpe           -> tok_emb, pos_emb         (lm_head is tok_emb)
    transformer.h.N.ln_1, ln_2     -> blocks.N.ln_1, ln_2
    transformer.h.N.attn.c_attn    -> blocks.N.attn.w_qkv      transposed
    transformer.h.N.attn.c_proj    -> blocks.N.attn.w_out      transposed
    transformer.h.N.mlp.c_fc       -> blocks.N.mlp.w_in        transposed
    transformer.h.N.mlp.c_proj     -> blocks.N.mlp.w_out       transposed
    transformer.ln_f               -> ln_f

Older files name the keys without "transformer." and hold attn.bias / attn.masked_bias, the
causal mask as a buffer, which are skipped.

Loading is cheap: safetensors maps the file instead of reading it, the transposes are views (a
transposed view multiplies as fast as a copy), and the only copy is the token table, padded with
zero rows to a multiple of vocab_multiple.
"""

import json
from pathlib import Path

import torch

from model.checkpoint import load_checkpoint
from model.gpt import GPTConfig
from storage.hub import MODEL_FILES, WEIGHT_FILES

# Hugging Face's activation names -> F.gelu's approximation.
GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}
# GPT-2 options our decoder implements in one way only: (key, what a file may say, its default).
FIXED = (
    ("layer_norm_epsilon", (1e-5,), 1e-5),
    ("scale_attn_weights", (True,), True),
    ("scale_attn_by_inverse_layer_idx", (False,), False),
    ("add_cross_attention", (False,), False),
    ("tie_word_embeddings", (True,), True),
)
# Per block: (Hugging Face name, ours, the Conv1D's (in, out) in units of n_embd; None: LayerNorm).
BLOCK_NAMES = (
    ("ln_1", "ln_1", None),
    ("attn.c_attn", "attn.w_qkv", (1, 3)),
    ("attn.c_proj", "attn.w_out", (1, 1)),
    ("ln_2", "ln_2", None),
    ("mlp.c_fc", "mlp.w_in", (1, 4)),
    ("mlp.c_proj", "mlp.w_out", (4, 1)),
)
SKIPPED = (".attn.bias", ".attn.masked_bias")  # the causal mask, stored as a buffer


def read_gpt2(folder, vocab_multiple=64) -> tuple[GPTConfig, dict]:
    """A Hugging Face GPT-2 folder -> (GPTConfig, state_dict in our names), float32, on the CPU.

    The state dict loads into GPT(config) as it is (model.checkpoint.build_gpt does it without
    a random init). ValueError (one line, saying what to do) for a folder without config.json or
    weights, a model_type other than gpt2 or a GPT-2 variant we do not implement, and weights
    whose names or shapes do not match config.json.
    """
    folder = Path(folder)
    config = gpt2_config(folder, vocab_multiple)
    return config, _our_names(_read_weights(folder), config, folder)


def gpt2_config(folder, vocab_multiple=64) -> GPTConfig:
    """GPTConfig of a Hugging Face GPT-2 folder's config.json (n_positions is block_size)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise ValueError(
            f"{folder} has no config.json; a Hugging Face model folder holds "
            f"{', '.join(MODEL_FILES)} and {' or '.join(WEIGHT_FILES)}"
        )
    try:
        hf = json.loads(path.read_text(encoding="utf-8"))
        model_type = hf.get("model_type")
    except (ValueError, OSError, AttributeError):
        raise ValueError(f"{path} is not a JSON object; download it again") from None
    if model_type != "gpt2":
        raise ValueError(
            f"{path} describes a {model_type!r} model; only model_type 'gpt2' "
            f"(GPT-2 and its fine-tunes) can be loaded"
        )
    activation = hf.get("activation_function", "gelu_new")
    for key, allowed, default in (("activation_function", tuple(GELU), "gelu_new"), *FIXED):
        if hf.get(key, default) not in allowed:
            raise ValueError(
                f"{path}: {key} {hf.get(key)!r} is a GPT-2 variant this model does not "
                f"implement (it can load {key} {' or '.join(map(repr, allowed))})"
            )
    try:
        if hf.get("n_inner") not in (None, 4 * hf["n_embd"]):
            raise ValueError(f"n_inner {hf['n_inner']} is not 4 * n_embd, the only MLP width here")
        return GPTConfig(
            vocab_size=hf["vocab_size"],
            block_size=hf["n_positions"],
            n_layer=hf["n_layer"],
            n_head=hf["n_head"],
            n_embd=hf["n_embd"],
            dropout=0.0,
            bias=True,
            vocab_multiple=vocab_multiple,
            gelu_approximate=GELU[activation],
        )
    except KeyError as e:
        raise ValueError(
            f"{path} lacks {e}; a GPT-2 config.json names vocab_size, n_positions, "
            f"n_layer, n_head and n_embd"
        ) from None
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None


def _read_weights(folder: Path) -> dict:
    safetensors_path, bin_path = (folder / name for name in WEIGHT_FILES)
    if safetensors_path.is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(safetensors_path)  # maps the file: pages are read when first used
        except (SafetensorError, OSError) as e:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ValueError(
                f"{safetensors_path} is truncated or not a safetensors file ({reason}); "
                f"download it again"
            ) from None
    if bin_path.is_file():
        # weights_only: a file that carries pickled code is refused, and nothing in it runs.
        return load_checkpoint(bin_path, fix="download it again")
    raise ValueError(f"{folder} has no weights: download {' or '.join(WEIGHT_FILES)} into it")


def _our_names(hf: dict, config: GPTConfig, folder: Path) -> dict:
    """Rename, transpose (as views) and pad; ValueError naming the first weight that is missing,
    left over, or of another shape than config.json implies."""
    hf = {
        k.removeprefix("transformer."): v
        for k, v in hf.items()
        if not k.endswith(SKIPPED) and k != "lm_head.weight"
    }  # lm_head is wte (tied)
    C = config.n_embd
    # (their name, our name, their shape, transposed)
    names = [
        ("wte.weight", "tok_emb.weight", (config.vocab_size, C), False),
        ("wpe.weight", "pos_emb.weight", (config.block_size, C), False),
        ("ln_f.weight", "ln_f.weight", (C,), False),
        ("ln_f.bias", "ln_f.bias", (C,), False),
    ]
    for i in range(config.n_layer):
        for theirs, ours, conv in BLOCK_NAMES:
            weight, bias = ((C * conv[0], C * conv[1]), (C * conv[1],)) if conv else ((C,), (C,))
            names += [
                (f"h.{i}.{theirs}.weight", f"blocks.{i}.{ours}.weight", weight, conv is not None),
                (f"h.{i}.{theirs}.bias", f"blocks.{i}.{ours}.bias", bias, False),
            ]
    where = f"the weights in {folder} do not match its config.json"
    state = {}
    for theirs, ours, shape, transposed in names:
        if theirs not in hf:
            raise ValueError(f"{where}: there is no {theirs}; download the weights again")
        tensor = hf.pop(theirs)
        if tuple(tensor.shape) != shape:
            raise ValueError(
                f"{where}: {theirs} is {tuple(tensor.shape)}, config.json implies "
                f"{shape}; the config and the weights come from different models"
            )
        tensor = tensor.float()  # a no-op for GPT-2's float32 files
        state[ours] = tensor.t() if transposed else tensor  # Conv1D (in, out) -> Linear (out, in)
    if hf:
        raise ValueError(
            f"{where}: {len(hf)} weights have no place in a GPT-2 of this shape, e.g. "
            f"{next(iter(hf))}; the config and the weights come from different models"
        )
    state["tok_emb.weight"] = _padded_rows(state["tok_emb.weight"], config.padded_vocab_size)
    state["lm_head.weight"] = state["tok_emb.weight"]
    return state


def _padded_rows(table: torch.Tensor, rows: int) -> torch.Tensor:
    """`table` with zero rows appended up to `rows`: ids that are no token embed to nothing."""
    if rows == table.size(0):
        return table
    padded = torch.empty((rows, table.size(1)), dtype=table.dtype)
    padded[: table.size(0)] = table
    padded[table.size(0) :] = 0
    return padded

"""nanoGPT's checkpoints read into our GPT.

nanoGPT's train.py saves ckpt.pt as {"model", "optimizer", "model_args", "iter_num",
"best_val_loss", "config"}: model_args holds n_layer, n_head, n_embd, block_size, bias,
vocab_size and dropout; the state dict's keys carry "_orig_mod." when the run was compiled. Its
decoder is ours — pre-LayerNorm blocks, nn.Linear layers (no transposes), exact GELU, LayerNorm
eps 1e-5, learned positions, the head tied to the token table — with other names:

    transformer.wte, wpe        -> tok_emb, pos_emb       lm_head -> lm_head (tied)
    transformer.h.N.attn.c_attn -> blocks.N.attn.w_qkv    attn.c_proj -> attn.w_out
    transformer.h.N.mlp.c_fc    -> blocks.N.mlp.w_in      mlp.c_proj  -> mlp.w_out
    transformer.h.N.ln_1, ln_2  -> blocks.N.ln_1, ln_2    transformer.ln_f -> ln_f

A run without flash attention also saved the causal mask as attn.bias, which is skipped.
Its GPT-2 runs pad the vocabulary to 50,304 rows, as our vocab_multiple 64 does.
"""

from model.gpt import GPTConfig

RENAMES = (
    ("transformer.wte.", "tok_emb."),
    ("transformer.wpe.", "pos_emb."),
    ("transformer.ln_f.", "ln_f."),
    ("transformer.h.", "blocks."),
    (".attn.c_attn.", ".attn.w_qkv."),
    (".attn.c_proj.", ".attn.w_out."),
    (".mlp.c_fc.", ".mlp.w_in."),
    (".mlp.c_proj.", ".mlp.w_out."),
)
MODEL_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size")


def is_nanogpt(ckpt) -> bool:
    """Whether a loaded checkpoint is nanoGPT's (ours records model_config, nanoGPT model_args)."""
    return isinstance(ckpt, dict) and "model_args" in ckpt and "model_config" not in ckpt


def read_nanogpt(ckpt: dict, vocab_size: int) -> tuple[GPTConfig, dict]:
    """(GPTConfig, state dict in our names) of a nanoGPT checkpoint whose tokenizer has
    `vocab_size` tokens; ValueError (one line) when its rows cannot be that vocabulary, or its
    weights do not fit its model_args."""
    try:
        args = {key: ckpt["model_args"][key] for key in MODEL_ARGS}
    except (KeyError, TypeError) as e:
        raise ValueError(
            f"the nanoGPT checkpoint's model_args lack {e}; it is not a checkpoint nanoGPT wrote"
        ) from None
    rows = args.pop("vocab_size")
    if rows == vocab_size:
        multiple = 1
    elif rows % 64 == 0 and 0 < rows - vocab_size < 64:
        multiple = 64  # nanoGPT's GPT-2 runs: 50,257 tokens in 50,304 rows
    else:
        raise ValueError(
            f"the nanoGPT model has {rows} token rows, which do not fit a tokenizer of "
            f"{vocab_size} tokens; give the meta.pkl of the data it was trained on"
        )
    config = GPTConfig(vocab_size=vocab_size, vocab_multiple=multiple, dropout=0.0, **args)
    state = {}
    for name, tensor in ckpt["model"].items():
        name = name.removeprefix("_orig_mod.")
        if name.endswith(".attn.bias") and tensor.dim() == 4:  # the causal mask, a buffer
            continue
        for theirs, ours in RENAMES:
            name = name.replace(theirs, ours)
        state[name] = tensor.float()
    if "tok_emb.weight" in state:
        state["lm_head.weight"] = state["tok_emb.weight"]  # tied
    return config, state

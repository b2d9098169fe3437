"""A head's weights read alone, without a sentence: the QK circuit (which key tokens a query
token attends to, from their token embeddings) and the OV circuit (what a head writes to the
logits when it reads a token), the views of Elhage et al.'s "A Mathematical Framework for
Transformer Circuits", natural for a 2-layer model.

Both start from the token embedding through the head's block's first LayerNorm, as a token with
no position and nothing before it would reach the head (the position embedding is left out:
these are the token's parts of the scores and of the write):

    QK: score(q, k) = (ln1(E[q]) W_Q + b_Q) · (ln1(E[k]) W_K + b_K) / √d_head
    OV: logits(k) = ln_f(v_h(ln1(E[k])) W_O,h) W_U, the head's write read through the final
        LayerNorm and the unembedding, as if nothing else wrote to the stream (the direct path).

The projections are the model's own (CausalSelfAttention.project, the head's slice of W_O).
A model with rotary positions or QK-norm is refused: its scores are not a product of the two.
"""

import math

import torch


def _head(model, layer: int, head: int):
    cfg = model.config
    if not (0 <= layer < cfg.n_layer and 0 <= head < cfg.n_head):
        raise ValueError(
            f"L{layer} H{head} is not a head of this model ({cfg.n_layer} layers x "
            f"{cfg.n_head} heads)"
        )
    if cfg.rotary or cfg.qk_norm:
        raise ValueError(
            "the QK and OV views read a head's weights alone; with rotary positions or "
            "QK-norm its scores depend on more than two token embeddings"
        )
    return model.blocks[layer]


def _one_token(tokenizer, word: str) -> int:
    ids = tokenizer.encode(word)
    if len(ids) != 1:
        raise ValueError(
            f"{word!r} is {len(ids)} tokens; these views read one token (a word's leading "
            "space is part of it: ' dog')"
        )
    return ids[0]


@torch.no_grad()
def qk_view(model, tokenizer, query: str, keys: list[str], layer: int, head: int) -> dict:
    """JSON-ready: "scores" {key: score} of `query` against each of `keys` (one token each) for
    head `head` of `layer`, and "weights" {key: softmax of the scores over `keys`}: which of
    them the query token would attend to most, from the tokens alone."""
    block = _head(model, layer, head)
    ids = [_one_token(tokenizer, w) for w in [query, *keys]]
    device = next(model.parameters()).device
    x = block.ln_1(model.tok_emb(torch.tensor([ids], device=device)))  # (1, N, C)
    q, k, _ = block.attn.project(x)  # each (1, H, N, D)
    scores = (k[0, head, 1:] @ q[0, head, 0]) / math.sqrt(q.size(-1))  # (len(keys),)
    weights = scores.softmax(-1)
    return {
        "head": {"layer": layer, "head": head},
        "query": query,
        "scores": dict(zip(keys, scores.tolist())),
        "weights": dict(zip(keys, weights.tolist())),
    }


@torch.no_grad()
def ov_view(model, tokenizer, word: str, layer: int, head: int, top: int = 10) -> dict:
    """JSON-ready: the `top` tokens whose logits head `head` of `layer` raises most when it
    reads `word` (one token) with all its attention: "top" [{"token", "logit"}], the logits of
    the direct path, centred (their mean over the vocabulary subtracted)."""
    block = _head(model, layer, head)
    token = _one_token(tokenizer, word)
    device = next(model.parameters()).device
    x = block.ln_1(model.tok_emb(torch.tensor([[token]], device=device)))  # (1, 1, C)
    _, _, v = block.attn.project(x)  # (1, H, 1, D)
    H, D = block.attn.n_head, block.attn.head_size
    w_o = block.attn.w_out.weight.view(-1, H, D)[:, head]  # (C, D): this head's slice of W_O
    write = v[0, head, 0] @ w_o.T  # (C,)
    logits = model.lm_head(model.ln_f(write))[: tokenizer.vocab_size]
    logits = logits - logits.mean()
    best = logits.topk(min(top, logits.numel()))
    return {
        "head": {"layer": layer, "head": head},
        "word": word,
        "top": [
            {"token": tokenizer.decode([t]), "logit": x}
            for t, x in zip(best.indices.tolist(), best.values.tolist())
        ],
    }

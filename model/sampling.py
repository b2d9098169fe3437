"""Sampling from a GPT: the one generation loop, with a KV cache and a sliding context window.

Letters used in shape comments: B batch, T time, V vocabulary, N block_size.

The model sees at most block_size (N) tokens. While prompt plus output fit in N, the KV cache
encodes the prompt once (prefill) and then one new token per step. Beyond N the window slides:
the model sees the last N tokens at positions 0..N-1. Every cached key belongs to one position
(a learned absolute position, or one rotary angle); once the window moves they are all stale
and the window is re-encoded from scratch (a fresh prefill of N tokens each step). That is
exactly what the uncached path computes, so both give the same tokens.
"""

import torch

from checks import positive_int
from model.gpt import GPT


def filter_top_k(logits, k):
    """logits (..., V) with all but the k highest of each row set to -inf.

    Exactly k survive even when logits tie (torch.topk breaks the tie); k >= V keeps all.
    """
    if k >= logits.size(-1):
        return logits
    top = torch.topk(logits, k, dim=-1).indices  # (..., k)
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, top, True)
    return logits.masked_fill(~keep, float("-inf"))


def filter_top_p(logits, p):
    """logits (..., V) restricted to the nucleus: the smallest set of most likely tokens whose
    probability mass reaches p. The top token is always kept; p = 1 keeps every token."""
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    # A token is needed while the mass of the tokens ranked above it is still short of p.
    mass_before = torch.cumsum(probs, dim=-1) - probs
    keep_sorted = mass_before < p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Pick one token per row from next-token logits (B, V) -> ids (B,).

    temperature 0 is greedy (argmax); otherwise logits / temperature, then top-k, then top-p,
    then a draw from the softmax with `generator` (a torch.Generator on the logits' device).
    """
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    logits = logits / temperature
    if top_k is not None:
        logits = filter_top_k(logits, top_k)
    if top_p is not None:
        logits = filter_top_p(logits, top_p)
    probs = torch.softmax(logits.float(), dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


class ContextWindow:
    """The tokens the model currently sees (the last block_size of them) and its logits for
    the next token. `push` appends one token per row and recomputes the logits.

    With use_cache, tokens that fit in block_size cost one position each; when the window
    slides, every position changes and the window is re-encoded. Without, every push runs the
    whole window: the reference the cached path must match.
    """

    def __init__(self, model: GPT, idx, use_cache=True):
        self.model = model
        self.block_size = model.config.block_size
        self.use_cache = use_cache
        self.tokens = idx[:, -self.block_size :]  # (B, T) with T <= N
        self.logits = self._encode_window()  # (B, V)

    def _run(self, idx, caches=None):
        """Next-token logits (B, V) for the last position of idx. The forward pass runs in
        inference mode (far less per-op overhead than no_grad, which decoding's many tiny ops
        feel); the logits are cloned out of it so callers get an ordinary tensor."""
        with torch.inference_mode():
            logits = self.model(idx, caches=caches)[:, -1]
        return logits.clone()

    def _encode_window(self):
        if self.use_cache:
            with torch.inference_mode():  # the cache lives and is used only in inference mode
                self.caches = self.model.new_caches(self.tokens.size(0))
            return self._run(self.tokens, self.caches)
        return self._run(self.tokens)

    def push(self, next_ids):
        """Append next_ids (B,) to every row; return the new next-token logits (B, V)."""
        next_ids = next_ids.view(-1, 1)  # (B,) -> (B, 1)
        slides = self.tokens.size(1) == self.block_size
        self.tokens = torch.cat([self.tokens, next_ids], dim=1)[:, -self.block_size :]
        if self.use_cache and not slides:
            self.logits = self._run(next_ids, self.caches)
        else:
            self.logits = self._encode_window()
        return self.logits


def generate(
    model: GPT,
    idx,
    max_new_tokens,
    temperature=1.0,
    top_k=None,
    top_p=None,
    generator=None,
    use_cache=True,
):
    """Yield max_new_tokens new token ids, one (B,) tensor per step, for prompts idx (B, T).

    Tokens stream: each is yielded as soon as it is chosen. A prompt longer than block_size is
    cropped to its last block_size tokens (the model cannot see more). The KV cache
    (use_cache=True) speeds up every step while prompt plus output fit in block_size; beyond
    it the window slides and each step re-encodes the last block_size tokens, as use_cache=False
    does on every step. Sampling is described in `sample_next`; pass a seeded torch.Generator
    for reproducible samples. The caller chooses the mode: call model.eval() to turn dropout off.

    Arguments are checked here, before the first token, not at the first next().
    """
    if idx.dim() != 2 or idx.size(1) == 0:
        raise ValueError(f"prompt ids must have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature}")
    if top_k is not None:
        positive_int("top_k", top_k, note="or None to keep all tokens")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (or None to keep all tokens), got {top_p}")
    return _generate(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache)


def _generate(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache):
    if max_new_tokens == 0:
        return
    window = ContextWindow(model, idx, use_cache)
    for step in range(max_new_tokens):
        next_ids = sample_next(window.logits, temperature, top_k, top_p, generator)
        yield next_ids
        if step + 1 < max_new_tokens:  # the last token needs no logits after it
            window.push(next_ids)

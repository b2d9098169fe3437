"""Text in and out of the model, as TransformerLens's models take it: to_tokens, to_str_tokens,
to_string, to_single_token and generate (TextMixin, which model.hooked's HookedMixin extends).

model/ knows no tokenizer: runs.loading attaches the run's (set_tokenizer), and anything with
encode(text) -> ids and decode(ids) -> text will do; a bare model's text methods say how to get
one. Where the model takes tokens, it takes (B, T) ids, (T,) ids as a batch of one (as
TransformerLens makes them: the logits are (1, T, V)), a text, or a list of texts of one token
length.

prepend_bos: our tokenizers have no BOS token, and a run learns from windows that start anywhere
in its text, so nothing is prepended by default (cfg.default_prepend_bos is False; TransformerLens
prepends <|endoftext|> to GPT-2's input). prepend_bos=True prepends the tokenizer's end-of-text
token, which is GPT-2's BOS, and is a ValueError for a tokenizer that has none.
"""

import torch

from model.keywords import keywords_checked
from model.sampling import generate as sample_tokens


def _tokens_of(texts, tokenizer, prepend_bos):
    if tokenizer is None:
        raise ValueError(
            "this model has no tokenizer to turn text into tokens: load it with "
            "runs.loading.load_run, or call model.set_tokenizer(tokenizer), or give token ids"
        )
    if prepend_bos and getattr(tokenizer, "eot_id", None) is None:
        raise ValueError(
            "prepend_bos=True, but this tokenizer has no BOS (end-of-text) token to prepend; "
            "leave prepend_bos unset"
        )
    ids = [([tokenizer.eot_id] if prepend_bos else []) + tokenizer.encode(t) for t in texts]
    if len({len(row) for row in ids}) > 1:
        raise ValueError(
            f"the texts are {sorted({len(row) for row in ids})} tokens long and this model has "
            "no padding token: give texts of one token length, or one text at a time"
        )
    return ids


class TextMixin:
    """The methods of the module docstring, for a GPT (model.gpt)."""

    tokenizer = None  # set_tokenizer's; runs.loading attaches the run's

    def set_tokenizer(self, tokenizer) -> None:
        """Attach the tokenizer that to_tokens and string inputs use: anything with
        encode(text) -> list of ids and decode(ids) -> text."""
        if not all(callable(getattr(tokenizer, f, None)) for f in ("encode", "decode")):
            raise TypeError(f"a tokenizer needs encode and decode; got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer

    @keywords_checked
    def to_tokens(
        self,
        input: str | list[str],
        prepend_bos: bool | None = None,
        move_to_device: bool = True,
        truncate: bool = True,
    ) -> torch.Tensor:
        """(B, T) token ids of a text (B = 1) or a list of texts of one token length, cut to
        the first n_ctx tokens unless truncate=False; see the module docstring for
        prepend_bos."""
        texts = [input] if isinstance(input, str) else list(input)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise TypeError("to_tokens takes a text or a list of texts")
        tokens = torch.tensor(_tokens_of(texts, self.tokenizer, prepend_bos), dtype=torch.long)
        if truncate:
            tokens = tokens[:, : self.config.block_size]
        return tokens.to(self.tok_emb.weight.device) if move_to_device else tokens

    @keywords_checked
    def to_str_tokens(self, input, prepend_bos: bool | None = None) -> list[str] | list[list[str]]:
        """Each token's text: of a text, of ids ((T,), (1, T) or a list of ints), or, for a
        list of texts, one list per text."""
        if isinstance(input, list) and input and isinstance(input[0], str):
            return [self.to_str_tokens(text, prepend_bos) for text in input]
        if isinstance(input, str):
            input = self.to_tokens(input, prepend_bos, move_to_device=False)
        ids = torch.as_tensor(input)
        if ids.dim() == 2 and ids.size(0) == 1:
            ids = ids[0]
        if ids.dim() != 1:
            raise ValueError(f"to_str_tokens takes one sequence; got shape {tuple(ids.shape)}")
        if self.tokenizer is None:
            _tokens_of([], None, False)  # the no-tokenizer error
        return [self.tokenizer.decode([i]) for i in ids.tolist()]

    def to_string(self, tokens) -> str | list[str]:
        """The text of one id, of (T,) ids, or one text per row of (B, T)."""
        ids = torch.as_tensor(tokens)
        if ids.dim() == 2:
            return [self.to_string(row) for row in ids]
        ids = ids.reshape(-1)
        if self.tokenizer is None:
            _tokens_of([], None, False)
        return self.tokenizer.decode(ids.tolist())

    def input_tokens(self, input, prepend_bos: bool | None = None) -> torch.Tensor:
        """(B, T) ids of what forward and run_with_* take (the module docstring)."""
        if isinstance(input, torch.Tensor):
            if input.dim() == 2:
                return input
            if input.dim() == 1:
                return input[None]
            raise ValueError(
                f"tokens are (batch, position) ids or (position,) ids; got shape "
                f"{tuple(input.shape)}"
            )
        if isinstance(input, (str, list)):
            return self.to_tokens(input, prepend_bos)
        raise TypeError(f"the model takes token ids or text, not {type(input).__name__}")

    def to_single_token(self, string: str) -> int:
        """The id of a text that is one token; a ValueError where it is more or none."""
        ids = self.to_tokens(string, prepend_bos=False, move_to_device=False)[0]
        if ids.numel() != 1:
            raise ValueError(f"{string!r} is {ids.numel()} tokens for this tokenizer, not one")
        return int(ids.item())

    @torch.no_grad()
    @keywords_checked
    def generate(  # noqa: PLR0913  TransformerLens's signature, keyword for keyword
        self,
        input: str | list[str] | torch.Tensor,
        max_new_tokens: int = 10,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        do_sample: bool = True,
        top_k: int | None = None,
        top_p: float | None = None,
        temperature: float = 1.0,
        use_past_kv_cache: bool = True,
        prepend_bos: bool | None = None,
        return_type: str = "input",
        verbose: bool = True,
    ) -> str | list[str] | torch.Tensor:
        """TransformerLens's model.generate, by model.sampling.generate: the input continued by
        up to max_new_tokens tokens, sampled (greedy with do_sample=False), ending early once
        every row has written the end-of-text token (eos_token_id, else the tokenizer's where
        it has one; a finished row is padded with it). return_type "input" gives text for
        text and ids for ids, "str" or "tokens" one of them. verbose prints nothing here."""
        if return_type not in ("input", "str", "tokens"):
            raise ValueError(f"return_type must be 'input', 'str' or 'tokens', got {return_type!r}")
        if isinstance(input, str) and not input:
            raise ValueError("give generate a prompt: this model has no BOS token to start from")
        idx = self.input_tokens(input, prepend_bos)
        eos = eos_token_id if eos_token_id is not None else getattr(self.tokenizer, "eot_id", None)
        rows, done = [idx], torch.zeros(idx.size(0), dtype=torch.bool, device=idx.device)
        temperature = temperature if do_sample else 0.0
        for ids in sample_tokens(
            self, idx, max_new_tokens, temperature, top_k, top_p, None, use_past_kv_cache
        ):
            if stop_at_eos and eos is not None:
                ids = torch.where(done, eos, ids)
                done |= ids == eos
            rows.append(ids[:, None])
            if done.all():
                break
        tokens = torch.cat(rows, 1)
        if return_type == "tokens" or (return_type == "input" and isinstance(input, torch.Tensor)):
            return tokens
        texts = self.to_string(tokens)
        return texts[0] if isinstance(input, str) else texts

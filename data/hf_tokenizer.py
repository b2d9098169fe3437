"""A byte-level BPE of ours (`bpe` or `gpt2`) as Hugging Face tokenizer files: vocab.json and
merges.txt (GPT-2's format), and tokenizer.json, which also carries the split pattern, so that
`AutoTokenizer` gives exactly our ids: GPT-4's pattern for `bpe`, GPT-2's for `gpt2`.

tiktoken keeps ranks, not merges: a token's rank is its id, and encoding merges the adjacent pair
whose merged token has the lowest rank. The merge that makes each token is recovered by running
that same procedure on the token's own bytes with only lower ranks allowed, which stops at the
two parts tiktoken would join; merges.txt lists them in rank order. A `char` tokenizer has no
byte-level form and is refused.

Tools that prepend a beginning-of-text token (TransformerLens does by default) need bos, eos and
pad ids inside the vocabulary, or they add one past its end and the embedding lookup fails.
`gpt2` has `<|endoftext|>`; our `bpe` has no special token, so its boundary is the newline byte's
token, which every byte-level vocabulary holds (`boundary_token`). Where generation stops is
another matter (`end_ids`): where our own sampler does, at `<|endoftext|>` only; a sample of
one line stops at `break_ids` (a BPE merges a newline with the punctuation before it: ".\\n" is
one token, so the newline's own token rarely comes out of a model).
"""

import json

from data.bpe import GPT4_SPLIT_PATTERN
from data.gpt2_files import EOT, GPT2_SPLIT_PATTERN, gpt2_byte_chars

NEWLINE = "\u010a"  # the newline byte as GPT-2's byte map writes it in vocab.json ("Ċ")


def _ranks(tokenizer) -> dict[bytes, int]:
    """{token's bytes: id} of a byte-level tokenizer, ours or GPT-2's."""
    return tokenizer.ranks if tokenizer.ranks is not None else tokenizer.encoding._mergeable_ranks


def boundary_token(tokenizer) -> tuple[str, int]:
    """(its text in vocab.json, its id): the export's bos and pad, and its tokenizer's one eos
    token: `<|endoftext|>` where the vocabulary has one (`gpt2`), else the newline byte's
    token. (Generation stops at the ids of end_ids, which config.json declares.)"""
    if tokenizer.eot_id is not None:
        return EOT, tokenizer.eot_id
    return NEWLINE, _ranks(tokenizer)[b"\n"]


def end_ids(tokenizer) -> list[int]:
    """The ids where generation on the export stops (its eos), by our sampler's own rule
    (model.sampling, generate.py, HookedGPT.generate): `<|endoftext|>` where the vocabulary has
    it, else none, so that transformers' generate writes on to max_new_tokens as ours does.
    (Where a sample should end at its first line, break_ids are the ids to pass.)"""
    return [tokenizer.eot_id] if tokenizer.eot_id is not None else []


def break_ids(tokenizer) -> list[int]:
    """Every token whose bytes hold a line break ("\\n", ".\\n", "!\\n\\n", ...): the eos to
    pass to transformers' generate (or --stop "\\n" to ours) for a sample of one line."""
    return sorted(rank for token, rank in _ranks(tokenizer).items() if b"\n" in token)


def hf_tokenizer_files(tokenizer, model_max_length: int) -> dict[str, str]:
    """{file name: text} of the Hugging Face form of `tokenizer`; ValueError for `char`."""
    if tokenizer.kind not in ("bpe", "gpt2"):
        raise ValueError(
            f"a {tokenizer.kind} tokenizer has no Hugging Face GPT-2 form (only byte-level "
            "BPE has), so this run cannot be exported; train with tokenizer.kind=bpe"
        )
    vocab, merges = _vocab_and_merges(_ranks(tokenizer))
    added = []
    if (
        tokenizer.eot_id is not None
    ):  # GPT-2's <|endoftext|>: a special token, as in GPT-2's own files
        vocab[EOT] = tokenizer.eot_id
        added = [_special_token(tokenizer.eot_id, EOT)]
    pattern = GPT4_SPLIT_PATTERN if tokenizer.kind == "bpe" else GPT2_SPLIT_PATTERN
    fast = _tokenizer_json(pattern, vocab, merges, added)
    config = _tokenizer_config(tokenizer, model_max_length)
    return {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
        "tokenizer.json": json.dumps(fast, ensure_ascii=False),
        "tokenizer_config.json": json.dumps(config, indent=2),
    }


def _vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[str]]:
    """vocab.json's {token: id} and merges.txt's lines, each token in GPT-2's byte characters."""
    chars = gpt2_byte_chars()

    def text(token):
        return "".join(chars[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [
        f"{text(a)} {text(b)}"
        for a, b in (
            _parts(token, ranks)
            for token, _ in sorted(ranks.items(), key=lambda kv: kv[1])
            if len(token) > 1
        )
    ]
    return vocab, merges


def _special_token(token_id: int, content: str) -> dict:
    """tokenizer.json's entry of an added special token."""
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def _tokenizer_json(pattern: str, vocab: dict, merges: list, added: list) -> dict:
    """tokenizer.json: the split `pattern`, then byte-level BPE over `vocab` and `merges`."""
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    split = {
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Isolated",
        "invert": False,
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        # ignore_merges: a piece that is a whole token is that token, as tiktoken encodes it.
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def _tokenizer_config(tokenizer, model_max_length: int) -> dict:
    """tokenizer_config.json: the fast tokenizer, no prefix space, and the boundary token as bos,
    eos and pad (boundary_token), with <|endoftext|> as unk where the vocabulary has it."""
    boundary, _ = boundary_token(tokenizer)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
        "bos_token": boundary,
        "eos_token": boundary,
        "pad_token": boundary,
    }
    if tokenizer.eot_id is not None:
        config["unk_token"] = EOT
    return config


def _parts(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """The two tokens tiktoken joins last to make `token`: its bytes merged pair by pair, the
    pair of lowest rank first, with only ranks below the token's own."""
    limit = ranks[token]
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        pairs = [(ranks.get(parts[i] + parts[i + 1], limit), i) for i in range(len(parts) - 1)]
        rank, i = min(pairs)
        if rank >= limit:
            raise ValueError(
                f"token {token!r} cannot be built from lower-ranked tokens; the ranks are not a BPE"
            )
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts[0], parts[1]

"""GPT-2's tokenizer files: its vocab.json and merges.txt (from a Hugging Face GPT-2 folder or the
hub's cache), or tiktoken's copy, turned into the tiktoken Encoding that data.tokenizer runs.

vocab.json writes each token's bytes through GPT-2's byte -> character table (gpt2_byte_chars);
merges.txt lists the merges in the order they were learned. A folder that this project exported
(runs/export.py) carries GPT-4's split pattern in its tokenizer.json, and is read with it.
"""

import os
from pathlib import Path

import tiktoken

from data.bpe import GPT4_SPLIT_PATTERN
from storage.hub import cached_model_file
from storage.json_read import parse_json

# GPT-2's pre-tokenisation pattern, as published with its encoder (and used by Hugging Face's
# ByteLevel pre-tokenizer): merges never cross these pieces.
GPT2_SPLIT_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
EOT = "<|endoftext|>"
GPT2_FILES = ("vocab.json", "merges.txt")
GPT2_REPOS = ("openai-community/gpt2", "gpt2")  # the hub's name for GPT-2, and its old alias


def gpt2_encoding(folder=None) -> tuple[tiktoken.Encoding, dict | None]:
    """GPT-2's Encoding, and the vocabulary and merges it was read from (None for tiktoken's
    copy): from `folder` if given, else from the hub's cache, else tiktoken's download; ValueError
    saying how to get the files."""
    if folder is not None:
        return _from_folder(folder)
    for repo_id in GPT2_REPOS:  # the hub's cache first: it never needs the network
        paths = [cached_model_file(repo_id, name) for name in GPT2_FILES]
        if all(paths):
            return _from_folder(paths[0].parent)
    try:
        return tiktoken.get_encoding("gpt2"), None
    except (OSError, ImportError) as e:  # requests' errors are OSErrors; ImportError: no requests
        cache = os.environ.get("TIKTOKEN_CACHE_DIR", "<unset: tiktoken uses a temp folder>")
        raise ValueError(
            f"could not get the gpt2 tokenizer files ({type(e).__name__}): the Hugging Face cache "
            f"has no {GPT2_REPOS[0]}, and tiktoken downloads them once: run once with internet "
            f"access, or copy a filled tiktoken cache into TIKTOKEN_CACHE_DIR (now {cache}), or "
            f"use the 'bpe' or 'char' tokenizer instead"
        ) from None


def _from_folder(folder) -> tuple[tiktoken.Encoding, dict]:
    """The byte-level BPE of a folder's vocab.json and merges.txt, with its split pattern."""
    paths = [Path(folder) / name for name in GPT2_FILES]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(
            f"{folder} has no {' or '.join(missing)}: GPT-2's tokenizer needs both "
            f"{' and '.join(GPT2_FILES)}; download them from the model's hub page into it"
        )
    try:
        vocab = parse_json(paths[0].read_text(encoding="utf-8"))
        merges = [
            line
            for line in paths[1].read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#version")
        ]
    except (ValueError, OSError) as e:
        raise ValueError(
            f"cannot read the tokenizer files in {folder} ({e}); download them again"
        ) from None
    pattern = split_pattern(Path(folder) / "tokenizer.json")
    files = {"vocab": vocab, "merges": merges} | (
        {"pattern": pattern} if pattern != GPT2_SPLIT_PATTERN else {}
    )
    return encoding_of_files(vocab, merges, folder, pattern), files


def split_pattern(tokenizer_json) -> str:
    """The split pattern of a Hugging Face tokenizer.json where it is GPT-4's (what this
    project's `bpe` exports with: runs/export.py), else GPT-2's."""
    try:
        steps = parse_json(Path(tokenizer_json).read_text(encoding="utf-8"))["pre_tokenizer"][
            "pretokenizers"
        ]
        regexes = [step["pattern"]["Regex"] for step in steps if step.get("type") == "Split"]
    except (OSError, ValueError, KeyError, TypeError):
        return GPT2_SPLIT_PATTERN
    return GPT4_SPLIT_PATTERN if regexes == [GPT4_SPLIT_PATTERN] else GPT2_SPLIT_PATTERN


def encoding_of_files(vocab, merges, origin, pattern=GPT2_SPLIT_PATTERN) -> tiktoken.Encoding:
    """vocab.json maps tokens to ids, merges.txt lists the merges in the order they were
    learned. tiktoken merges by the rank of the merged token, so the ids must grow in merge
    order: then the two give the same ids."""
    char_to_byte = {c: b for b, c in gpt2_byte_chars().items()}
    try:
        ranks = {
            bytes(char_to_byte[c] for c in token): i for token, i in vocab.items() if token != EOT
        }
        merged = [vocab[a + b] for a, b in (merge.split(" ") for merge in merges)]
    except (KeyError, ValueError, TypeError, AttributeError):
        raise ValueError(
            f"the vocab.json and merges.txt in {origin} are not GPT-2's byte-level BPE "
            f"format (or do not belong together); download them again"
        ) from None
    n_bytes = sum(len(token) == 1 for token in ranks)
    ids_unique = len(set(vocab.values())) == len(vocab)
    if (
        n_bytes != 256
        or merged != sorted(set(merged))
        or len(ranks) != 256 + len(merged)
        or not ids_unique
    ):
        raise ValueError(
            f"the vocab.json and merges.txt in {origin} do not form a byte-level BPE "
            f"that tiktoken can run (every byte, each merge a new token, ids in merge "
            f"order); only GPT-2-style tokenizer files are supported"
        )
    special = {EOT: vocab[EOT]} if EOT in vocab else {}
    return tiktoken.Encoding(
        f"gpt2-files-{len(vocab)}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special
    )


def gpt2_byte_chars() -> dict[int, str]:
    """GPT-2's byte -> character table: printable bytes stand for themselves, the others for the
    characters from U+0100 on, so every token is printable text in vocab.json."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}

"""Tokenizer tests: round trips, hand-checked merges and offsets, file formats, error messages.

Hermetic: nothing here reaches the internet. gpt2 tests run only if tiktoken's cache already
holds the GPT-2 files, and the offline test points every proxy at a closed loopback port.
"""

import random
import re

import numpy as np
import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from data.tokenizer import gpt2_tokenizer, load_tokenizer, train_tokenizer

TORTURE = (
    "\ufeffBOM at the start\r\n"
    "tabs\tand\t\tCRLF\r\nlone CR\rend\n"
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 flag \U0001f3f3\ufe0f\u200d"
    "\U0001f308 thumb \U0001f44d\U0001f3fd\n"
    "combining: e\u0301 n\u0303 a\u0308\u0304 Z\u0351\u0334\u0353\n"
    "CJK: 日本語のテキスト 中文 한국어\n"
    "RTL: العربية שָׁלוֹם \u200fmixed\u200e 123\n"
    "unseen: Xylophone quizzically 1234567 ~`|^ <|endoftext|> \x00\x7f\n"
    "nbsp\u00a0zero\u200bwidth, trailing spaces   \n\n\n  "
)

WORDS = (
    "the a cat dog sat ran on under mat house garden quickly slowly because it was hungry "
    "tired happy and then they we saw big small red old new"
).split()


def english(n_sentences: int, seed: int) -> str:
    """Deterministic toy English: enough repetition for BPE to learn real merges."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n_sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 10))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ","]))
    return " ".join(sentences) + "\n"


@pytest.fixture(scope="module")
def bpe():
    return train_tokenizer("bpe", english(400, seed=0), vocab_size=350)


def utf8_starts(text: str) -> list[int]:
    """Byte offset where each character of `text` starts, plus the total length."""
    starts, pos = [], 0
    for ch in text:
        starts.append(pos)
        pos += len(ch.encode("utf-8"))
    return starts + [pos]


# --- char -------------------------------------------------------------------------------------


def test_char_round_trip_unicode():
    tok = train_tokenizer("char", TORTURE)
    ids = tok.encode(TORTURE)
    assert tok.decode(ids) == TORTURE
    assert len(ids) == len(TORTURE)  # one id per code point, ZWJ and combining marks included
    assert tok.vocab_size == len(set(TORTURE))
    assert tok.chars == sorted(set(TORTURE))
    assert tok.encode_with_offsets("日本") == (tok.encode("日本"), [0, 1])


def test_char_unknown_character_names_it_and_suggests_bpe():
    tok = train_tokenizer("char", "hello world")
    assert tok.encode("hello") == [3, 2, 4, 4, 5]  # ids: " "0 d1 e2 h3 l4 o5 r6 w7
    with pytest.raises(ValueError, match=r"'z'.*U\+007A.*offset 2.*'bpe'"):
        tok.encode("lozenge")
    with pytest.raises(ValueError, match=r"U\+1F600"):
        tok.encode("hello \U0001f600")


def test_char_vocab_size_is_set_by_the_corpus():
    with pytest.raises(ValueError, match="leave vocab_size unset"):
        train_tokenizer("char", "abc", vocab_size=10)
    with pytest.raises(ValueError, match="non-empty corpus"):
        train_tokenizer("char", "")


# --- bpe --------------------------------------------------------------------------------------


def test_bpe_hand_checked_merges():
    # Wikipedia's example, one pre-token. Pairs: aa=4 -> rank 256. Then "aa a b d aa a b a c":
    # (aa,a)=2 ties (a,b)=2, and ids (97,98) < (256,97) so "ab" is 257. Then (aa,ab)=2 -> 258.
    tok = train_tokenizer("bpe", "aaabdaaabac", vocab_size=259)
    merges = sorted((r, t) for t, r in tok.ranks.items() if r >= 256)
    assert merges == [(256, b"aa"), (257, b"ab"), (258, b"aaab")]
    assert tok.encode("aaabdaaabac") == [258, ord("d"), 258, ord("a"), ord("c")]
    assert tok.vocab_size == 259


def test_bpe_tie_break_and_early_stop():
    # Chunks "ab", " ab", " cd", " cd"... : (a,b), (" ",c), (c,d) all occur twice; the smallest
    # id pair (32, 99) wins, then (97, 98) beats (256, 100). Afterwards every pair occurs once,
    # so training stops at 259 although 1000 was asked.
    tok = train_tokenizer("bpe", "ab ab cd cd", vocab_size=1000)
    merges = sorted((r, t) for t, r in tok.ranks.items() if r >= 256)
    assert merges == [(256, b" c"), (257, b"ab"), (258, b" cd")]
    assert tok.vocab_size == 259


def test_bpe_vocab_size_below_256_is_an_error():
    with pytest.raises(ValueError, match=">= 256"):
        train_tokenizer("bpe", "some text", vocab_size=255)


def test_bpe_round_trip_unicode_unseen_in_training(bpe):
    ids = bpe.encode(TORTURE)
    assert bpe.decode(ids) == TORTURE
    assert all(0 <= i < bpe.vocab_size for i in ids)
    for line in TORTURE.splitlines(keepends=True):
        assert bpe.decode(bpe.encode(line)) == line


def test_bpe_learns_english_and_treats_special_text_as_text(bpe):
    assert bpe.vocab_size == 350
    held_out = english(20, seed=1)
    assert len(bpe.encode(held_out)) < len(held_out.encode("utf-8")) / 2.5
    assert len(bpe.encode(" the")) == 1
    ids = bpe.encode("<|endoftext|>")
    assert len(ids) > 1 and bpe.decode(ids) == "<|endoftext|>"


def test_bpe_training_is_deterministic():
    text = english(100, seed=2)
    assert train_tokenizer("bpe", text, 300).ranks == train_tokenizer("bpe", text, 300).ranks


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_encode_array_gives_the_ids_of_encode(kind, bpe):
    tok = bpe if kind == "bpe" else train_tokenizer("char", TORTURE)
    ids = tok.encode_array(TORTURE)
    assert ids.dtype == np.uint32 and ids.tolist() == tok.encode(TORTURE)
    assert tok.encode_array("").tolist() == []


def test_bpe_rejects_lone_surrogates_and_bad_ids(bpe):
    with pytest.raises(ValueError, match=r"surrogate.*U\+D800.*character 2"):
        bpe.encode("ab\ud800c")
    with pytest.raises(ValueError, match=r"surrogate.*U\+D800.*character 2"):
        bpe.encode_array("ab\ud800c")
    with pytest.raises(ValueError, match=r"token id 350.*\[0, 350\)"):
        bpe.decode([1, 350])


# --- offsets ----------------------------------------------------------------------------------


def test_offsets_hand_checked():
    tok = train_tokenizer("bpe", "aaabdaaabac", vocab_size=259)
    assert tok.encode_with_offsets("aaabdaaabac") == ([258, 100, 258, 97, 99], [0, 4, 5, 9, 10])
    bytes_only = train_tokenizer("bpe", "", vocab_size=256)
    # a: 1 byte; é: C3 A9; 😀: F0 9F 98 80 -> continuation bytes keep their character's offset.
    ids, starts = bytes_only.encode_with_offsets("aé\U0001f600")
    assert ids == [0x61, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80]
    assert starts == [0, 1, 1, 2, 2, 2, 2]


def test_offsets_ascii_tokens_sit_at_their_offset(bpe):
    text = "The cat sat on the mat because it was tired.\n  Then\tthey ran!"
    ids, starts = bpe.encode_with_offsets(text)
    assert ids == bpe.encode(text)
    pieces = [bpe.decode([i]) for i in ids]
    assert [text[s : s + len(p)] for s, p in zip(starts, pieces)] == pieces
    assert starts[0] == 0 and starts == sorted(starts)


def test_offsets_unicode_point_at_the_character_holding_the_first_byte(bpe):
    ids, starts = bpe.encode_with_offsets(TORTURE)
    char_bytes = utf8_starts(TORTURE)
    byte_pos = 0
    for i, start in zip(ids, starts):
        assert char_bytes[start] <= byte_pos < char_bytes[start + 1]
        byte_pos += len(bpe.encoding.decode_single_token_bytes(i))
    assert byte_pos == char_bytes[-1]


# --- files ------------------------------------------------------------------------------------


def test_bpe_file_is_tiktoken_rank_format(bpe, tmp_path, monkeypatch):
    path = tmp_path / "tok.bpe"
    bpe.save(path)
    lines = path.read_text(encoding="ascii").splitlines()
    assert lines[0] == "AA== 0" and lines[97] == "YQ== 97" and len(lines) == 350
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # "" = read the file, don't copy it to a cache
    assert tiktoken.load.load_tiktoken_bpe(str(path)) == bpe.ranks


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_save_load_round_trip(kind, tmp_path):
    text = english(50, seed=3)
    tok = train_tokenizer(kind, text, 300 if kind == "bpe" else None)
    path = tmp_path / "tokenizer"
    tok.save(path)
    loaded = load_tokenizer(path)
    assert (loaded.kind, loaded.vocab_size) == (kind, tok.vocab_size)
    assert loaded.encode(text) == tok.encode(text)
    assert loaded.decode(tok.encode(text)) == text


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        load_tokenizer(tmp_path / "missing")
    (tmp_path / "junk").write_text("hello there\n")
    with pytest.raises(ValueError, match=rf"{re.escape(str(tmp_path / 'junk'))}.*tokenizer file"):
        load_tokenizer(tmp_path / "junk")
    (tmp_path / "other.json").write_text('{"kind": "sentencepiece"}')
    with pytest.raises(ValueError, match="'sentencepiece'.*char, bpe, gpt2"):
        load_tokenizer(tmp_path / "other.json")
    with pytest.raises(ValueError, match="'wordpiece'.*char, bpe, gpt2"):
        train_tokenizer("wordpiece", "text")


# --- gpt2 -------------------------------------------------------------------------------------


def block_network(monkeypatch):
    """Send every HTTP(S) request to a closed loopback port, so downloads fail at once."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_gpt2_offline_without_cache_says_what_to_do(tmp_path, monkeypatch):
    block_network(monkeypatch)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    # tiktoken keeps loaded encodings in a module dict; empty it so the download is attempted.
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    with pytest.raises(ValueError) as err:
        train_tokenizer("gpt2", "ignored")
    message = str(err.value)
    assert "\n" not in message
    assert "internet" in message  # the three ways out: a download, a filled cache, another kind
    assert "TIKTOKEN_CACHE_DIR" in message and str(tmp_path) in message
    assert "'bpe'" in message and "'char'" in message


def test_gpt2_save_load_if_cached(tmp_path, monkeypatch):
    block_network(monkeypatch)
    try:
        tok = gpt2_tokenizer()
    except ValueError:
        pytest.skip("gpt2 files not in tiktoken's cache (TIKTOKEN_CACHE_DIR); tests stay offline")
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode("<|endoftext|>") != [50256]  # special tokens are plain text here
    tok.save(tmp_path / "gpt2.json")
    loaded = load_tokenizer(tmp_path / "gpt2.json")
    assert (loaded.kind, loaded.vocab_size) == ("gpt2", 50257)
    assert loaded.decode(loaded.encode(TORTURE)) == TORTURE

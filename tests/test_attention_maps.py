"""Attention maps in the terminal: tokens to words, the query word, exact rendering, errors."""

import io
import re

import pytest
import torch

import generate
from analysis.terminal import (
    colour_mode, display_token, render_sentence, render_token_grid, render_word_rows,
)
from analysis.words import find_query_span, group_tokens, sentence_attention
from data.tokenizer import train_tokenizer
from model.checkpoint import Run
from model.gpt import GPT, GPTConfig

SENTENCE = "The animal went out because it was hungry."


def starts_of(pieces):
    """Start offsets of tokens given as their text pieces (which join to the sentence)."""
    starts, at = [], 0
    for piece in pieces:
        starts.append(at)
        at += len(piece)
    return starts


def uniform_model(vocab_size, block_size=64):
    """A GPT whose every head attends uniformly: W_Q = W_K = 0 makes every score 0."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=2, n_head=2, n_embd=16))
    for block in model.blocks:
        torch.nn.init.zeros_(block.attn.w_qkv.weight)
        torch.nn.init.zeros_(block.attn.w_qkv.bias)
    return model.eval()


@pytest.fixture(scope="module")
def char_run():
    tokenizer = train_tokenizer("char", SENTENCE + "abcdefghijklmnopqrstuvwxyzIT")
    return Run(uniform_model(tokenizer.vocab_size), tokenizer, meta={}, ckpt={})


# --- words -------------------------------------------------------------------------------

def test_bpe_style_tokens_group_into_words_with_leading_spaces_and_punctuation():
    pieces = ["The", " cat", "'s", " to", "y", ",", " it", " fell", "."]
    text = "".join(pieces)
    words, spans, token_word = group_tokens(text, starts_of(pieces))
    assert words == ["The", "cat's", "toy", ",", "it", "fell", "."]
    assert token_word == [0, 1, 1, 2, 2, 3, 4, 5, 6]
    assert spans[1] == (4, 9)


def test_a_token_spanning_two_words_joins_them_and_whitespace_goes_to_the_next_word():
    pieces = ["(the", ")", "\n", " ", "it"]
    words, _, token_word = group_tokens("".join(pieces), starts_of(pieces))
    assert words == ["(the", ")", "it"]
    assert token_word == [0, 1, 2, 2, 2]


def test_byte_tokens_inside_one_character_share_its_word():
    text = "é it"  # a byte-level tokenizer may give é's two bytes two tokens, both at offset 0
    words, _, token_word = group_tokens(text, [0, 0, 1, 2])
    assert words == ["é", "it"] and token_word == [0, 0, 1, 1]


@pytest.mark.parametrize("text, word, span", [
    ("It was hungry.", None, (0, 2)),  # the first word
    ("The theme: they left.", None, (11, 15)),  # "he" inside "The"/"theme" is not a word
    ("So he saw it", None, (3, 5)),  # the first pronoun
    ("The dog said it's late", None, (13, 15)),  # "it" of "it's"
    ("The hit man left; she stayed", None, (18, 21)),  # "it" inside "hit" is not a word
    ("The Animal went out", "animal", (4, 10)),  # --word, case-insensitive
    ("Stop, it ran.", ",", (4, 5)),  # --word can be punctuation
])
def test_find_query_span(text, word, span):
    assert find_query_span(text, word) == span


@pytest.mark.parametrize("text, word, message", [
    ("", None, "empty"),
    ("   ", None, "empty"),
    ("The dog barked.", None, "no pronoun"),
    ("The dog barked.", "cat", "not in"),
    ("The dog barked.", " ", "--word is empty"),
])
def test_find_query_span_errors(text, word, message):
    with pytest.raises(ValueError, match=message):
        find_query_span(text, word)


# --- a model whose attention we know ---------------------------------------------------

def test_uniform_attention_gives_each_word_its_share_of_tokens(char_run):
    sa = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)
    # Char tokens, spaces with the next word: The 3, " animal" 7, " went" 5, " out" 4,
    # " because" 8, " it" 3; the query ("t" of "it", token 29) sees 30 tokens, 1/30 each.
    assert sa.words == ["The", "animal", "went", "out", "because", "it"]
    assert sa.query_token == 29
    for layer in sa.rows:
        for row in layer:
            assert row == pytest.approx([3 / 30, 7 / 30, 5 / 30, 4 / 30, 8 / 30, 3 / 30], abs=1e-6)
    text = render_sentence(sa)
    lines = text.splitlines()
    assert lines[0] == SENTENCE
    assert lines[2] == "       The   animal went  out   because it"
    for label in ("L0 H0", "L0 H1", "L1 H0", "L1 H1"):
        assert f"{label}   .10  ░.23   ░.17  ░.13  ░.27▲    .10" in lines


def test_a_pronoun_first_gets_all_of_its_own_attention(char_run):
    sa = sentence_attention(char_run.model, char_run.tokenizer, "It was hungry.")
    assert sa.words == ["It"] and sa.query_token == 1
    assert render_word_rows(sa.words, [("L0 H0", sa.rows[0][0])]).splitlines()[1] == "L0 H0  █1.0▲"


def test_word_option_moves_the_query(char_run):
    sa = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE, word="animal")
    assert sa.words == ["The", "animal"] and sa.query_token == 9
    assert sa.rows[1][0] == pytest.approx([0.3, 0.7])


def test_no_attention_is_lost_with_a_real_bpe_tokenizer():
    text = "The soldiers followed the dog until they marched."
    tokenizer = train_tokenizer("bpe", text * 20, 280)
    torch.manual_seed(1)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=1, n_head=2, n_embd=16)
    model = GPT(config).eval()
    sa = sentence_attention(model, tokenizer, text)
    assert sa.words == ["The", "soldiers", "followed", "the", "dog", "until", "they"]
    for row in sa.rows[0]:
        assert sum(row) == pytest.approx(1.0, abs=1e-6)  # causal: all of it lands on these words


def test_a_sentence_longer_than_block_size_is_refused(char_run):
    small = uniform_model(char_run.tokenizer.vocab_size, block_size=16)
    with pytest.raises(ValueError, match="longer than the model's block_size"):
        sentence_attention(small, char_run.tokenizer, SENTENCE)


# --- rendering ---------------------------------------------------------------------------

def test_word_rows_render_exactly():
    rows = [("L0 H0", [0.1, 0.8, 0.1]), ("L1 H3", [0.5, 0.25, 0.25])]
    assert render_word_rows(["The", "animal", "it"], rows) == (
        "       The   animal it\n"
        "L0 H0   .10  ▓.80▲   .10\n"
        "L1 H3  ▒.50▲ ░.25   ░.25"
    )


def test_long_sentences_wrap_into_blocks_that_fit():
    rows = [("L0 H0", [0.1, 0.2, 0.3, 0.4]), ("L0 H1", [0.7, 0.1, 0.1, 0.1])]
    text = render_word_rows(["alpha", "beta", "gamma", "delta"], rows, width=20)
    blocks = text.split("\n\n")
    assert len(blocks) == 2
    assert blocks[0].splitlines()[0].split() == ["alpha", "beta"]
    assert blocks[1].splitlines()[0].split() == ["gamma", "delta"]
    assert all(len(line) <= 20 for line in text.splitlines())
    assert text.count("▲") == 2  # one per head, across the blocks


def test_token_grid_renders_exactly():
    weights = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.1, 0.2, 0.7]]
    assert render_token_grid(["a", " b", "\n"], weights) == (
        "   a ␣ ↵\n"
        "     b\n"
        "a  ██\n"
        "␣b ▒▒▒▒\n"
        "↵  · ░░▓▓"
    )


def test_display_token_makes_spaces_and_control_characters_visible():
    assert display_token(" a\tb\n\x00\x7f\u200b", 40) == "␣a⇥b↵\\x00\\x7f\\u200b"
    assert display_token("abcdefghij", 5) == "abcd…"
    assert display_token("a b", spaces=False) == "a b"


def test_plain_output_has_no_escape_codes_and_colour_output_does(char_run):
    sa = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)
    plain = render_sentence(sa, None, layer=1, head=0)
    assert "\x1b" not in plain and "▲" in plain
    true = render_sentence(sa, "truecolor", layer=1, head=0)
    assert "\x1b[48;2;" in true and "\x1b[1;4m" in true and "▲" in true
    assert "\x1b[48;5;" in render_sentence(sa, "256")


class Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("tty, env, mode", [
    (True, {"COLORTERM": "truecolor"}, "truecolor"),
    (True, {"COLORTERM": "24bit"}, "truecolor"),
    (True, {}, "256"),
    (False, {"COLORTERM": "truecolor"}, None),  # piped
    (True, {"NO_COLOR": "", "COLORTERM": "truecolor"}, None),  # NO_COLOR: any value
    (True, {"NO_COLOR": "1"}, None),
    (True, {"TERM": "dumb"}, None),
])
def test_colour_mode(tty, env, mode):
    assert colour_mode(Stream(tty), env) == mode


# --- the generate.py options ---------------------------------------------------------------

def attention_cli(run, argv):
    args = generate.build_parser().parse_args(argv)
    generate.check_args(args)
    out = io.StringIO()
    generate.show_attention(run, args, out)
    return out.getvalue()


def test_cli_prints_one_line_per_head_and_the_grid(char_run):
    text = attention_cli(char_run, ["--attention", SENTENCE, "--layer", "1", "--head", "0"])
    assert sum(bool(re.match(r"L\d H\d  ", line)) for line in text.splitlines()) == 4
    assert "L1 H0, token by token" in text


@pytest.mark.parametrize("argv, message", [
    (["--attention", SENTENCE, "--layer", "2", "--head", "0"], "--layer must be in 0..1"),
    (["--attention", SENTENCE, "--layer", "-1", "--head", "0"], "--layer must be in 0..1"),
    (["--attention", SENTENCE, "--layer", "0", "--head", "2"], "--head must be in 0..1"),
    (["--attention", SENTENCE, "--layer", "0"], "together"),
    (["--attention", SENTENCE, "--head", "0"], "together"),
    (["--attention", "The dog barked."], "no pronoun"),
    (["--attention", SENTENCE, "--word", "zebra"], "not in"),
    (["--attention", ""], "empty"),
    (["--word", "it"], "go with --attention"),
])
def test_cli_errors(char_run, argv, message):
    with pytest.raises(ValueError, match=message):
        attention_cli(char_run, argv)

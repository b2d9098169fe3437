"""Attention maps in the terminal: tokens to words, the query word, exact rendering, errors."""

import io
import re
from itertools import pairwise

import pytest
import torch

import generate
from analysis.errors import NoQueryWord
from analysis.flat import flat_heads
from analysis.items import encode_item
from analysis.words import (
    find_query_span,
    group_tokens,
    model_window,
    sentence_attention,
)
from data.pronouns import Example
from data.tokenizer import train_tokenizer
from generation.attention_mode import show_attention
from model.gpt import GPT, GPTConfig
from reports.sentence_view import render_sentence
from reports.term_colour import colour_mode
from reports.terminal import (
    RESET,
    display_token,
    render_token_grid,
    render_top_heads,
    render_word_rows,
    sgr_colours,
    visible_len,
    weight_legend,
    wrap,
)
from runs.loading import Run
from tests.helpers import patterns

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
    model = GPT(
        GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=2, n_head=2, n_embd=16)
    )
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


@pytest.mark.parametrize(
    "text, word, span",
    [
        ("It was hungry.", None, (0, 2)),  # the first word
        ("The theme: they left.", None, (11, 15)),  # "he" inside "The"/"theme" is not a word
        ("So he saw it", None, (3, 5)),  # the first pronoun
        ("The dog said it's late", None, (13, 15)),  # "it" of "it's"
        ("The dog said it's late", "it's", (13, 15)),  # --word "it's" is read at "it", not "'s"
        ("The dogs said THEY'RE late", "they're", (14, 18)),  # any case, any of the clitics
        ("The dog said it’ll go", "it’ll", (13, 15)),  # the typographic apostrophe too
        ("Tell 'em", "'em", (5, 8)),  # not a clitic of ours: kept whole
        ("The hit man left; she stayed", None, (18, 21)),  # "it" inside "hit" is not a word
        ("The Animal went out", "animal", (4, 10)),  # --word, case-insensitive
        ("Stop, it ran.", ",", (4, 5)),  # --word can be punctuation
    ],
)
def test_find_query_span(text, word, span):
    assert find_query_span(text, word) == span


@pytest.mark.parametrize(
    "text, word, message",
    [
        ("", None, "empty"),
        ("   ", None, "empty"),
        ("The dog barked.", None, "no pronoun"),
        ("The dog barked.", "cat", "not in"),
        ("The dog barked.", " ", "query word is empty"),
    ],
)
def test_find_query_span_errors(text, word, message):
    with pytest.raises(NoQueryWord, match=message) as raised:
        find_query_span(text, word)
    assert "--" not in str(raised.value)  # no CLI flag below the CLI: generation/ adds them


# --- a model whose attention we know ---------------------------------------------------


def test_uniform_attention_gives_each_word_its_share_of_tokens(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)
    # Char tokens, spaces with the next word: The 3, " animal" 7, " went" 5, " out" 4,
    # " because" 8, " it" 3; the query ("t" of "it", token 29) sees 30 tokens, 1/30 each.
    assert sentence.words == ["The", "animal", "went", "out", "because", "it"]
    assert sentence.query_token == 29
    for layer in sentence.rows:
        for row in layer:
            assert row == pytest.approx([3 / 30, 7 / 30, 5 / 30, 4 / 30, 8 / 30, 3 / 30], abs=1e-6)
    text = render_sentence(sentence)
    lines = text.splitlines()
    assert lines[0] == SENTENCE
    assert lines[2] == "       The   animal went  out   because it"
    # Uniform attention is flat: summed, the word of most tokens ("because") would get the most
    # by its length alone, so no word is marked, and the map says it is flat.
    assert flat_heads(sentence) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    for label in ("L0 H0", "L0 H1", "L1 H0", "L1 H1"):
        assert f"{label}   .10  ░.23   ░.17  ░.13  ░.27     .10" in lines
    assert lines[-1].startswith("flat: every head shown spread the attention almost evenly")
    assert "▲" not in "".join(lines[2:])


def test_a_sharp_head_beside_flat_ones_keeps_its_mark(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)
    sentence.weights[1][0][29] = torch.eye(len(sentence.tokens))[4]  # L1 H0 looks at one token
    assert flat_heads(sentence) == {(0, 0), (0, 1), (1, 0), (1, 1)} - {(1, 0)}
    lines = render_sentence(sentence).splitlines()
    assert [line[:5] for line in lines if "▲" in line and line.startswith("L")] == ["L1 H0"]
    assert "L0 H0, L0 H1, L1 H1 spread" in lines[-1]


def test_a_pronoun_first_gets_all_of_its_own_attention(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, "It was hungry.")
    assert sentence.words == ["It"] and sentence.query_token == 1
    assert (
        render_word_rows(sentence.words, [("L0 H0", sentence.rows[0][0])]).splitlines()[1]
        == "L0 H0  █1.0▲"
    )


def test_word_option_moves_the_query(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE, word="animal")
    assert sentence.words == ["The", "animal"] and sentence.query_token == 9
    assert sentence.rows[1][0] == pytest.approx([0.3, 0.7])


def test_its_is_read_at_it_by_attention_and_by_the_probes_items():
    """GPT-2's split pattern makes "it's" two tokens, " it" and "'s": the pronoun is " it"."""
    text = "The dog said it's late."
    tokenizer = train_tokenizer("bpe", text * 20, 280)
    ids = tokenizer.encode(text)
    it = [tokenizer.decode([i]) for i in ids].index(" it")
    assert tokenizer.decode([ids[it + 1]]) == "'s"
    model = random_model(tokenizer.vocab_size, 64)
    for word in (None, "it's"):
        sentence = sentence_attention(model, tokenizer, text, word)
        assert sentence.query_token == it and sentence.words[-1] == "it's"
    # A labelled example whose pronoun span covers the whole "it's" (13, 17).
    example = Example(text, (13, 17), (4, 7), ((0, 3),))
    item = encode_item(tokenizer, example, 64)
    assert item.query == it and tokenizer.decode([item.next_id]) == "'s"


def test_no_attention_is_lost_with_a_real_bpe_tokenizer():
    text = "The soldiers followed the dog until they marched."
    tokenizer = train_tokenizer("bpe", text * 20, 280)
    torch.manual_seed(1)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=64, n_layer=1, n_head=2, n_embd=16
    )
    model = GPT(config).eval()
    sentence = sentence_attention(model, tokenizer, text)
    assert sentence.words == ["The", "soldiers", "followed", "the", "dog", "until", "they"]
    for row in sentence.rows[0]:
        assert sum(row) == pytest.approx(1.0, abs=1e-6)  # causal: all of it lands on these words


# --- sentences longer than the model's window ---------------------------------------------


def random_model(vocab_size, block_size, n_layer=2, n_head=2, n_embd=16):
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd
    )
    return GPT(config).eval()


def test_the_window_is_the_last_block_size_tokens_up_to_the_query():
    assert model_window(40, 29, 8) == (22, 30)  # cut in front, ends at the query
    assert model_window(40, 5, 8) == (0, 8)  # the query fits: the first block_size
    assert model_window(6, 5, 8) == (0, 6)  # the whole text fits


@pytest.mark.parametrize(
    "block_size, note",
    [
        # "cause it": the window starts inside "because" (the space before "it" is its token).
        (
            8,
            'the model sees 8 tokens up to "it" (its block_size): the first 4 words are outside '
            'its window, and only part of "because" is inside it',
        ),
        # " because it": the window starts at a word.
        (
            11,
            'the model sees 11 tokens up to "it" (its block_size): the first 4 words are outside '
            "its window",
        ),
    ],
)
def test_a_sentence_longer_than_block_size_is_read_in_the_window_the_query_sees(
    char_run, block_size, note
):
    model, tokenizer = random_model(char_run.tokenizer.vocab_size, block_size), char_run.tokenizer
    sentence = sentence_attention(model, tokenizer, SENTENCE)
    ids = tokenizer.encode(SENTENCE)
    cropped = ids[30 - block_size : 30]  # token 29 is "t" of "it"
    with torch.no_grad():
        attn = patterns(model, torch.tensor([cropped]))
    assert sentence.window_start == 30 - block_size and sentence.query_token == block_size - 1
    assert sentence.tokens == [tokenizer.decode([i]) for i in cropped]
    assert sentence.words == ["because", "it"] and sentence.window_note == note
    n_because = block_size - 3  # " it" is the last three tokens
    for l in range(2):
        for h in range(2):
            assert torch.equal(sentence.weights[l][h], attn[l][0, h])
            row = attn[l][0, h, -1]
            assert sentence.rows[l][h] == pytest.approx(
                [row[:n_because].sum().item(), row[n_because:].sum().item()], abs=1e-6
            )
    text = render_sentence(sentence)
    assert text.splitlines()[1] == f"note: {note}"


def test_a_long_sentence_whose_query_fits_is_read_from_its_start(char_run):
    model = random_model(char_run.tokenizer.vocab_size, 8)
    sentence = sentence_attention(model, char_run.tokenizer, "It was hungry.")  # 14 tokens
    assert (sentence.window_start, sentence.window_note, len(sentence.tokens), sentence.words) == (
        0,
        None,
        8,
        ["It"],
    )
    assert sentence.rows[0][0] == pytest.approx([1.0])
    assert "note:" not in render_sentence(sentence)


def test_the_cli_prints_the_window_note_and_a_token_map_of_the_window(char_run):
    small = Run(random_model(char_run.tokenizer.vocab_size, 8), char_run.tokenizer, {}, {})
    text = attention_cli(small, ["--attention", SENTENCE, "--layer", "0", "--head", "1"])
    assert 'note: the model sees 8 tokens up to "it" (its block_size): the first 4 words' in text
    grid = text.split("token by token")[1].splitlines()[1:]
    assert grid[0].split() == list("01234567") and len(grid) == 1 + 8  # keys, then 8 rows
    # each row: its key and its token, read horizontally (not stacked letter by letter)
    assert [row.split()[:2] for row in grid[1:]] == [[str(i), t] for i, t in enumerate("cause␣it")]


# --- rendering ---------------------------------------------------------------------------


def test_word_rows_render_exactly():
    rows = [("L0 H0", [0.1, 0.8, 0.1]), ("L1 H3", [0.5, 0.25, 0.25])]
    assert render_word_rows(["The", "animal", "it"], rows) == (
        "       The   animal it\nL0 H0   .10  ▓.80▲   .10\nL1 H3  ▒.50▲ ░.25   ░.25"
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
        "     0 1 2\n0 a  ██\n1 ␣b ▒▒▒▒\n2 ↵  · ░░▓▓"
    )
    # Past ten tokens the columns are numbered in decimal as the rows are, a number written
    # downwards (1 over 1: column 11) so that a column stays two characters wide.
    many = render_token_grid([f" w{i}" for i in range(12)], [[1.0] * 12] * 12).splitlines()
    tens, units = many[0], many[1]
    assert units.split() == [*"0123456789", "0", "1"] and tens.split() == ["1", "1"]
    assert tens.index("1") == units.rindex("0") and many[13].startswith("11 ␣w11 ")
    assert many[13].index("█") == units.index("0")  # column 0 under its number


def test_colour_cells_under_an_eighth_keep_the_terminals_background_and_light_ones_run_dark():
    weights = [[1.0, 0.0], [0.05, 0.95]]
    for mode in ("256", "truecolor", "256-light", "truecolor-light"):
        rows = render_token_grid(["a", "b"], weights, mode).splitlines()[1:]
        assert rows[1].split(RESET)[0].startswith("1 b · \x1b[48;"), (mode, rows)  # no colour
        assert (
            render_word_rows(["x", "y"], [("L0 H0", [0.05, 0.95])], mode)
            .splitlines()[1]
            .startswith("L0 H0   .05  \x1b[48;")
        )
    # On a light terminal more weight is darker: the 256 greys and the white-to-blue ramp.
    assert sgr_colours(0.2, "256-light").startswith("\x1b[48;5;251m")
    assert sgr_colours(1.0, "256-light").startswith("\x1b[48;5;234m")
    assert sgr_colours(0.0, "truecolor-light").startswith("\x1b[48;2;255;255;255m")
    assert sgr_colours(1.0, "truecolor-light").startswith("\x1b[48;2;8;48;107m")


def test_wrap_breaks_prose_at_spaces_and_never_inside_a_coloured_scale():
    legend = "L0 H1, token by token (" + weight_legend("truecolor") + ")"
    lines = wrap(legend, 40).splitlines()
    assert all(visible_len(line) <= 40 for line in lines if "\x1b" not in line)
    assert [line for line in lines if "\x1b" in line][0].count("\x1b[48;2;") == 5  # one line
    assert " ".join(line.strip() for line in lines) == legend  # nothing lost, no word cut
    assert wrap("short line", 40) == "short line"


def test_display_token_makes_spaces_and_control_characters_visible():
    assert display_token(" a\tb\n\x00\x7f\u200b", 40) == "␣a⇥b↵\\x00\\x7f\\u200b"
    assert display_token("abcdefghij", 5) == "abcd…"
    assert display_token("a b", spaces=False) == "a b"


def test_plain_output_has_no_escape_codes_and_colour_output_does(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)
    sentence.weights[1][0][29] = torch.eye(len(sentence.tokens))[4]  # not flat: a word marked
    plain = render_sentence(sentence, None, layer=1, head=0)
    assert "\x1b" not in plain and "▲" in plain
    true = render_sentence(sentence, "truecolor", layer=1, head=0)
    assert "\x1b[48;2;" in true and "\x1b[1;4m" in true and "▲" in true
    assert "\x1b[48;5;" in render_sentence(sentence, "256")


def xterm_rgb(index):
    """(r, g, b) of a 256-colour palette index above 15, as xterm defines the palette: a
    6 x 6 x 6 colour cube (16-231), then 24 greys (232-255)."""
    if index >= 232:
        return (8 + 10 * (index - 232),) * 3
    levels = (0, 95, 135, 175, 215, 255)
    n = index - 16
    return levels[n // 36], levels[n // 6 % 6], levels[n % 6]


def background_brightness(w):
    """Relative luminance (Rec. 709, 0-255) of the background sgr_colours gives weight w."""
    index = int(re.match(r"\x1b\[48;5;(\d+)m", sgr_colours(w, "256")).group(1))
    r, g, b = xterm_rgb(index)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_256_colour_brightness_rises_steadily_with_the_weight():
    brightness = [background_brightness(i / 1000) for i in range(1001)]
    assert all(a <= b for a, b in pairwise(brightness))  # never darker for more
    assert background_brightness(0.04) < background_brightness(0.21)  # once one grey
    assert background_brightness(0.025) == background_brightness(0.03)  # no purple in between
    assert len(set(brightness)) >= 20 and brightness[-1] - brightness[0] > 180


def test_the_token_grids_legend_says_what_each_colour_mode_shows(char_run):
    sentence = sentence_attention(char_run.model, char_run.tokenizer, SENTENCE)

    def legend(colour):
        text = render_sentence(sentence, colour, layer=0, head=1)
        return next(line for line in text.splitlines() if "token by token" in line)

    assert legend(None) == (
        "L0 H1, token by token (rows: query tokens; columns: key tokens, numbered "
        "as the rows, downwards; weight ░▒▓█ to the nearest quarter, · under 1/8)"
    )
    grey = legend("256")
    assert "256 colours" in grey and "░" not in grey
    assert re.findall(r"\x1b\[48;5;(\d+)m[^ ]* (\S+) ", grey) == [
        ("234", "0"),
        ("239", ".25"),
        ("244", ".5"),
        ("250", ".75"),
        ("255", "1"),
    ]
    heat = legend("truecolor")
    assert "24-bit" in heat and heat.count("\x1b[48;2;") == 5 and "░" not in heat


class Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize(
    "tty, env, mode",
    [
        (True, {"COLORTERM": "truecolor"}, "truecolor"),
        (True, {"COLORTERM": "24bit"}, "truecolor"),
        (True, {}, "256"),
        (False, {"COLORTERM": "truecolor"}, None),  # piped
        # no-color.org: a non-empty NO_COLOR turns colour off; an empty one does not
        (True, {"NO_COLOR": "", "COLORTERM": "truecolor"}, "truecolor"),
        (True, {"NO_COLOR": ""}, "256"),
        (True, {"NO_COLOR": "1"}, None),
        (True, {"NO_COLOR": "0"}, None),
        (True, {"TERM": "dumb"}, None),
        # COLORFGBG's background: 15 or 7 light, 0 or 8 dark (as vim reads it)
        (True, {"COLORFGBG": "0;15"}, "256-light"),
        (True, {"COLORFGBG": "0;default;7", "COLORTERM": "truecolor"}, "truecolor-light"),
        (True, {"COLORFGBG": "15;0"}, "256"),
        (True, {"COLORFGBG": "7;8"}, "256"),
        (True, {"COLORFGBG": "rubbish"}, "256"),
        # force-color.org: a non-empty FORCE_COLOR colours a pipe too; NO_COLOR still wins
        (False, {"FORCE_COLOR": "1"}, "256"),
        (False, {"FORCE_COLOR": "1", "COLORTERM": "truecolor"}, "truecolor"),
        (False, {"FORCE_COLOR": ""}, None),
        (True, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, None),
    ],
)
def test_colour_mode(tty, env, mode):
    assert colour_mode(Stream(tty), env) == mode


@pytest.mark.parametrize(
    "choice, tty, env, mode",
    [
        ("always", False, {"NO_COLOR": "1"}, "256"),  # the flag over the environment
        ("always", False, {"COLORFGBG": "0;15"}, "256-light"),
        ("never", True, {"FORCE_COLOR": "1", "COLORTERM": "truecolor"}, None),
        ("auto", True, {}, "256"),
    ],
)
def test_the_color_flag_decides_before_the_environment(choice, tty, env, mode):
    assert colour_mode(Stream(tty), env, choice) == mode
    with pytest.raises(ValueError, match="sometimes"):
        colour_mode(Stream(tty), env, "sometimes")


# --- the generate.py options ---------------------------------------------------------------


def attention_cli(run, argv):
    args = generate.build_parser().parse_args(argv)
    generate.check_args(args)
    out = io.StringIO()
    show_attention(run, args, out)
    return out.getvalue()


def test_cli_prints_one_line_per_head_and_with_layer_and_head_the_grid(char_run):
    text = attention_cli(char_run, ["--attention", SENTENCE])
    assert sum(bool(re.match(r"L\d H\d  ", line)) for line in text.splitlines()) == 4
    assert "token by token" not in text and "note:" not in text  # 4 heads: no compact view
    text = attention_cli(char_run, ["--attention", SENTENCE, "--layer", "1", "--head", "0"])
    assert sum(bool(re.match(r"L1 H\d  ", line)) for line in text.splitlines()) == 2
    assert "L1 H0, token by token" in text


def test_a_table_too_wide_splits_its_words_evenly_the_query_word_never_alone():
    words = "The animal in the jungle went out on a hunt because it".split()
    rows = [("L0 H0", [1 / len(words)] * len(words))]
    for width in (80, 60, 40):
        blocks = [
            b.splitlines()[0].split()
            for b in render_word_rows(words, rows, None, width).split("\n\n")
        ]
        assert [w for b in blocks for w in b] == words
        sizes = [len(b) for b in blocks]
        assert sizes == sorted(sizes) and sizes[-1] - sizes[0] <= 1, (width, sizes)
        assert all(
            len(line) <= width for line in render_word_rows(words, rows, None, width).splitlines()
        )
    assert "\n\n" not in render_word_rows(words, rows, None, 100)  # fits: one block


def test_a_query_moved_off_the_pronoun_says_where_it_reads(char_run):
    at_pronoun = attention_cli(char_run, ["--attention", SENTENCE])
    assert 'attention of "it" (its last token, #' in at_pronoun
    moved = attention_cli(char_run, ["--attention", SENTENCE, "--query", "next"])
    assert '(the token after "it", #' in moved and "its last token" not in moved
    last = attention_cli(char_run, ["--attention", SENTENCE, "--query", "last", "--top-heads", "1"])
    assert '(the last token, after "it", #' in last


def test_color_always_or_force_color_colours_a_pipe_and_never_keeps_it_plain(char_run, monkeypatch):
    for name in ("NO_COLOR", "FORCE_COLOR", "COLORTERM", "COLORFGBG"):
        monkeypatch.delenv(name, raising=False)
    piped = attention_cli(char_run, ["--attention", SENTENCE])
    assert "\x1b[" not in piped
    always = attention_cli(char_run, ["--attention", SENTENCE, "--color", "always"])
    assert "\x1b[48;5;" in always  # 256 colours' backgrounds, without COLORTERM
    assert always.count("▲") == piped.count("▲")  # the same heads marked, coloured
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert attention_cli(char_run, ["--attention", SENTENCE]) == always
    assert "\x1b[" not in attention_cli(char_run, ["--attention", SENTENCE, "--color", "never"])
    with pytest.raises(ValueError, match="--color goes with --attention"):
        generate.check_args(generate.build_parser().parse_args(["--color", "always"]))


def test_attention_file_gives_one_sentence_a_line_and_skips_blank_ones(char_run, tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text(f"\n{SENTENCE}\n   \r\nIt was hungry.\r\n\n", encoding="utf-8")
    from_file = attention_cli(char_run, ["--attention-file", str(path)])
    assert from_file == attention_cli(char_run, ["--attention", SENTENCE, "It was hungry."])
    assert from_file.count("attention of") == 2


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        (b"\n  \n", "blank lines"),
        (b"", "empty"),
        (b"It \xe9tait.", "not valid UTF-8"),
    ],
)
def test_attention_file_errors(char_run, tmp_path, content, message):
    path = tmp_path / "sentences.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        attention_cli(char_run, ["--attention-file", str(path)])


def test_layer_alone_shows_that_layers_heads(char_run):
    text = attention_cli(char_run, ["--attention", SENTENCE, "--layer", "1"])
    heads = [line[:5] for line in text.splitlines() if re.match(r"L\d H\d  ", line)]
    assert heads == ["L1 H0", "L1 H1"] and "token by token" not in text


# --- many heads: the compact view ---------------------------------------------------------


def test_top_heads_render_exactly_and_skip_punctuation():
    rows = [("L0 H0", [0.1, 0.6, 0.3]), ("L0 H1", [0.5, 0.2, 0.3]), ("L1 H0", [0.2, 0.7, 0.1])]
    assert render_top_heads(["The", "animal", ","], rows, 2) == (
        "The     L0 H1 ▒.50  L1 H0 ░.20\nanimal  L1 H0 ▓.70  L0 H0 ▒.60"
    )
    assert render_top_heads(["The", "animal"], rows[:1], 5).splitlines()[0] == "The     L0 H0  .10"


@pytest.fixture(scope="module")
def gpt2_shaped_run(char_run):
    """12 layers x 12 heads, GPT-2 small's grid of heads, at width 48."""
    return Run(
        random_model(char_run.tokenizer.vocab_size, 64, 12, 12, 48), char_run.tokenizer, {}, {}
    )


def head_lines(text):
    return [line for line in text.splitlines() if re.match(r"L\d+ H\d+  ", line)]


def test_many_heads_default_to_each_words_top_heads_with_a_hint(gpt2_shaped_run):
    text = attention_cli(gpt2_shaped_run, ["--attention", SENTENCE])
    assert text.startswith("note: 144 heads, so each word lists the 3 that attend most to it;")
    assert head_lines(text) == []  # no 144-line wall
    assert 'the 3 of 144 heads that attend most from "it"' in text
    sentence = sentence_attention(gpt2_shaped_run.model, gpt2_shaped_run.tokenizer, SENTENCE)
    # The heads listed for "animal" are the three with the largest weight on it, largest first.
    ranked = sorted(
        (
            (w[1], f"L{l} H{h}")
            for l, layer in enumerate(sentence.rows)
            for h, w in enumerate(layer)
        ),
        key=lambda x: -x[0],
    )
    animal = next(line for line in text.splitlines() if line.startswith("animal "))
    assert re.findall(r"L\d+ H\d+", animal) == [label for _, label in ranked[:3]]
    words = [line.split()[0] for line in text.splitlines()[-5:]]
    assert words == ["The", "animal", "went", "out", "because"]  # every word before "it"


@pytest.mark.parametrize(
    "argv, lines, top",
    [
        (["--all-heads"], 144, None),
        (["--layer", "3"], 12, None),  # 12 heads: one line each
        (["--top-heads", "5"], 0, 5),
        (["--layer", "3", "--top-heads", "2"], 0, 2),
    ],
)
def test_many_heads_options(gpt2_shaped_run, argv, lines, top):
    text = attention_cli(gpt2_shaped_run, ["--attention", SENTENCE, *argv])
    assert len(head_lines(text)) == lines and "note: 144 heads" not in text
    if top:
        animal = next(line for line in text.splitlines() if line.startswith("animal "))
        assert len(re.findall(r"L\d+ H\d+", animal)) == top
    if "--layer" in argv:
        assert set(re.findall(r"L(\d+) H\d+", text)) == {"3"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--attention", SENTENCE, "--layer", "2", "--head", "0"], r"--layer.*0\.\.1"),
        (["--attention", SENTENCE, "--layer", "2"], r"--layer.*0\.\.1"),
        (["--attention", SENTENCE, "--top-heads", "0"], r"--top-heads.*\b0\b"),
        (["--attention", SENTENCE, "--top-heads", "2", "--all-heads"], "two views"),
        (["--top-heads", "2"], "go with --attention"),
        (["--all-heads"], "go with --attention"),
        (["--attention", SENTENCE, "--layer", "-1", "--head", "0"], r"--layer.*0\.\.1"),
        (["--attention", SENTENCE, "--layer", "0", "--head", "2"], r"--head.*0\.\.1"),
        (["--attention", SENTENCE, "--head", "0"], "--head.*--layer"),
        (["--attention", "The dog barked."], "no pronoun.*name the query word with --word"),
        (["--attention", SENTENCE, "--word", "zebra"], "not in"),
        (["--attention", SENTENCE, "--word", " "], "^--word is empty"),
        (["--attention", ""], "empty"),
        (["--word", "it"], "go with --attention"),
        (["--attention", SENTENCE, "--attention-file", "x.txt"], "--attention .*--attention-file"),
    ],
)
def test_cli_errors(char_run, argv, message):
    with pytest.raises(ValueError, match=message):
        attention_cli(char_run, argv)


def test_the_24_bit_ramp_gets_brighter_in_even_steps_like_the_greys():
    from reports.term_colour import grey_index, heat

    def lightness(rgb):  # relative luminance, 0..255
        r, g, b = rgb
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    steps = [lightness(heat(w / 8)) for w in range(9)]
    rises = [b - a for a, b in zip(steps, steps[1:])]
    assert all(r > 5 for r in rises)  # every quarter and eighth a visible step up (no two browns)
    assert max(rises) < 3 * min(rises)  # roughly even
    greys = [grey_index(w / 8) for w in range(9)]
    assert greys == sorted(greys)  # the 256-colour greys tell the same story: brighter for more


def cielab(rgb):
    """CIE L*a*b* (D65 white) of an sRGB colour given as 0..255 integers."""

    def linear(c):
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = map(linear, rgb)
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    fx, fy, fz = (t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1, lab2):
    """The CIEDE2000 colour difference (Sharma, Wu and Dalal 2005), the one that says how far
    apart two colours look; about 1 is the smallest difference people see."""
    from math import atan2, cos, degrees, exp, hypot, radians, sin, sqrt

    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c7 = ((hypot(a1, b1) + hypot(a2, b2)) / 2) ** 7
    g = 0.5 * (1 - sqrt(c7 / (c7 + 25**7)))
    (c1, h1), (c2, h2) = [
        (hypot((1 + g) * a, b), degrees(atan2(b, (1 + g) * a)) % 360)
        for a, b in ((a1, b1), (a2, b2))
    ]
    dh = 0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    dl, dc, dhh = l2 - l1, c2 - c1, 2 * sqrt(c1 * c2) * sin(radians(dh / 2))
    lm, cm = (l1 + l2) / 2, (c1 + c2) / 2
    hm = h1 + h2 if c1 * c2 == 0 else (h1 + h2) / 2 + (180 if abs(h1 - h2) > 180 else 0)
    t = (
        1
        - 0.17 * cos(radians(hm - 30))
        + 0.24 * cos(radians(2 * hm))
        + 0.32 * cos(radians(3 * hm + 6))
        - 0.2 * cos(radians(4 * hm - 63))
    )
    sl, sc, sh = (
        1 + 0.015 * (lm - 50) ** 2 / sqrt(20 + (lm - 50) ** 2),
        1 + 0.045 * cm,
        1 + 0.015 * cm * t,
    )
    rt = (
        -2
        * sqrt(cm**7 / (cm**7 + 25**7))
        * sin(radians(60 * exp(-((((hm % 360) - 275) / 25) ** 2))))
    )
    return sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dhh / sh) ** 2 + rt * (dc / sc) * (dhh / sh))


@pytest.mark.parametrize(
    "lab1, lab2, expected",
    [  # pairs 1, 7, 17 and 25 of Sharma et al.'s table
        ((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
        ((50, 0, 0), (50, -1, 2), 2.3669),
        ((50, 2.5, 0), (73, 25, -18), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ],
)
def test_ciede2000_gives_the_published_differences(lab1, lab2, expected):
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


def legend_colours(run, monkeypatch, colorterm):
    """The weight legend's (label, sRGB) pairs as generate.py --attention prints them on a
    terminal with COLORTERM=colorterm."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLORTERM", colorterm)
    out = Stream(tty=True)
    args = generate.build_parser().parse_args(
        ["--attention", SENTENCE, "--layer", "0", "--head", "1"]
    )
    generate.check_args(args)
    show_attention(run, args, out)
    text = out.getvalue().split("token by token", 1)[1]
    legend = text[: text.index("1/8)\n")]  # wrapped to the terminal's width: maybe a few lines
    found = re.findall(r"\x1b\[48;(?:2;(\d+);(\d+);(\d+)|5;(\d+))m\x1b\[[\d;]+m (\S+) ", legend)

    # xterm's greys 232..255
    def grey(n):
        return (8 + 10 * (int(n) - 232),) * 3

    return [(label, (int(r), int(g), int(b)) if r else grey(n)) for r, g, b, n, label in found]


def test_the_24_bit_ramp_as_printed_steps_evenly_and_brightens_with_the_greys(
    char_run, monkeypatch
):
    truecolour = legend_colours(char_run, monkeypatch, "truecolor")
    greys = legend_colours(char_run, monkeypatch, "")
    assert (
        [label for label, _ in truecolour]
        == [label for label, _ in greys]
        == ["0", ".25", ".5", ".75", "1"]
    )
    steps = [ciede2000(cielab(a), cielab(b)) for (_, a), (_, b) in pairwise(truecolour)]
    # Evenly distinguishable: no quarter step looks much closer than the widest one. The straight
    # navy-to-yellow ramp's steps shrank towards yellow (28.8, 21.1, 17.9, 13.6: .47 of the widest).
    assert min(steps) >= 0.6 * max(steps), steps
    # Both modes tell one story: more weight, more light, at every step.
    for colours in (truecolour, greys):
        lightness = [cielab(rgb)[0] for _, rgb in colours]
        assert lightness == sorted(lightness) and len(set(lightness)) == 5, colours

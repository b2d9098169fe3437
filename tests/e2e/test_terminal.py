"""What a person sees on a real terminal: train.py and generate.py run in a pseudo-terminal of a
given width (its size set before the process starts, as a terminal window's is), and their
output read back as the terminal receives it, carriage returns and all."""

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios

import pytest

from tests.helpers import ROOT, TINY_MODEL, run_main, tiny_config, write_yaml

ESCAPES = re.compile(r"\x1b\[[\d;?]*[A-Za-z]")


def in_terminal(args, columns, env=None, timeout=120, cwd=ROOT):
    """(exit code, the bytes the terminal got as text) of `python ARGS` in `cwd` with stdout and
    stderr on a pseudo-terminal `columns` wide."""
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TERM": "xterm-256color", **(env or {})}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    proc = subprocess.Popen(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 1 << 16)
        except OSError:  # EIO: the process and its terminal have gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return proc.wait(timeout=timeout), b"".join(chunks).decode("utf-8", "replace")


def drawn(text):
    """Every line the terminal drew: each segment between carriage returns and newlines, its
    colour and cursor escapes removed (they take no columns)."""
    text = text.replace("\r\n", "\n")  # the terminal's own newline
    return [ESCAPES.sub("", part) for line in text.split("\n") for part in line.split("\r")]


# warmup_iters past max_iters: the run says so in a note longer than 80 columns.
WARMUP_PAST_THE_END = ["train.max_iters=30", "train.warmup_iters=40", "train.eval_interval=15"]


@pytest.fixture(scope="module")
def piped_note(corpus, tmp_path_factory):
    """The warmup note of a WARMUP_PAST_THE_END run piped, as one line: the same run's, whatever
    the width of the terminal the tests below draw it on."""
    folder = tmp_path_factory.mktemp("piped")
    cfg = write_yaml(tiny_config(corpus, folder / "p", *WARMUP_PAST_THE_END), folder / "c.yaml")
    piped = subprocess.run(
        [sys.executable, "train.py", cfg],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert piped.returncode == 0, piped.stderr[-2000:]
    [note] = [line for line in piped.stdout.splitlines() if "warmup_iters" in line]
    return note


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_training_on_a_terminal_fits_its_width_dropping_bar_fields_and_wrapping_notes(
    corpus, tmp_path, columns, piped_note
):
    cfg = write_yaml(
        tiny_config(corpus, tmp_path / "run", *WARMUP_PAST_THE_END), tmp_path / "c.yaml"
    )
    code, text = in_terminal(["train.py", cfg], columns)
    assert code == 0, text[-2000:]
    lines = drawn(text)
    assert max(len(line) for line in lines) <= columns, [ln for ln in lines if len(ln) > columns]
    bars = [line for line in lines if line.startswith("train ") and "|" in line]
    assert bars and all(line.rstrip().endswith("]") for line in bars), bars  # never cut
    fields = [b for b in bars if "loss " in b]
    assert fields, bars
    if columns >= 120:  # room for all of them
        assert all("lr " in b and "tok/s" in b and "MFU" in b for b in fields), fields
    else:  # lr goes first, whole
        assert not any("lr " in b for b in fields) and all("loss " in b for b in fields), fields
    # The note, wrapped at spaces: put together, its words are the piped run's, none cut.
    note = piped_note
    assert len(note) > 80
    start = next(i for i, line in enumerate(lines) if line.startswith("note: train.warmup_iters"))
    shown = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        shown.append(line)
    assert " ".join(part.strip() for part in shown) == note
    assert (len(shown) > 1) == (len(note) > columns)
    # The whole val split's evaluation, at the end, shows its progress as the training bar does.
    assert any(line.startswith("val text.txt") and "window" in line for line in lines), lines[-20:]


def note_at(lines, start):
    """The note whose first line starts with `start`, its wrapped lines put together."""
    at = next(i for i, line in enumerate(lines) if line.startswith(start))
    shown = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.startswith("  "):
            break
        shown.append(line.strip())
    return " ".join(shown), len(shown)


@pytest.mark.slow
def test_the_first_note_wraps_too_and_a_bpe_smaller_than_asked_says_its_size(corpus, tmp_path):
    """The note on where your own text's run goes came before the run's console and broke
    mid-word at 80 columns; a BPE that learned 549 of 4096 tokens said nothing."""
    (tmp_path / "story.txt").write_text((corpus / "text.txt").read_text()[:3000])
    overrides = [o for o in TINY_MODEL if not o.startswith("tokenizer.")]
    code, text = in_terminal(
        [
            ROOT / "train.py",
            f"data.source={tmp_path / 'story.txt'}",  # no out_dir: the run goes to out/story
            f"data.cache_dir={tmp_path / 'cache'}",
            "tokenizer.kind=bpe",
            "tokenizer.vocab_size=4096",
            *overrides,
            "train.max_iters=4",
            "train.warmup_iters=1",
            "train.eval_interval=4",
            "train.eval_iters=1",
        ],
        80,
        cwd=tmp_path,
    )
    assert code == 0, text[-2000:]
    lines = drawn(text)
    # Wrapped at spaces: only a word longer than the terminal (a deep tmp path) may stand alone
    # on a longer line, whole.
    long = [ln for ln in lines if len(ln) > 80]
    assert all(len(ln.split()) == 1 for ln in long), long
    where, parts = note_at(lines, "note: data.source is")
    assert parts > 1 and where == (
        f"note: data.source is {tmp_path / 'story.txt'}, so the run goes to out_dir=out/story "
        "(set out_dir to choose)"
    )
    learned = json.loads((tmp_path / "out/story/meta.json").read_text())["vocab_size"]
    said, _ = note_at(lines, "note: the BPE learned")
    assert learned < 4096 and said.startswith(
        f"note: the BPE learned {learned:,} tokens, fewer than tokenizer.vocab_size=4,096"
    ), said


@pytest.mark.slow
def test_eval_only_shows_a_bar_on_a_terminal_and_plain_lines_in_a_pipe(corpus, tmp_path):
    cfg = write_yaml(tiny_config(corpus, tmp_path / "run"), tmp_path / "c.yaml")
    trained = run_main("train.py", cfg)  # the run to evaluate, trained in this process
    assert trained.returncode == 0, trained.stderr
    code, text = in_terminal(["train.py", cfg, "--eval-only"], 80)
    assert code == 0 and "nats/token" in text
    assert re.search(r"val text\.txt: +\d+%\|", text), text[-1000:]
    piped = subprocess.run(
        [sys.executable, "train.py", cfg, "--eval-only"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and "\r" not in piped.stdout + piped.stderr
    # Piped, no bar: a plain line as it starts (issue 60: a long evaluation said nothing).
    assert re.fullmatch(r"val text\.txt: evaluating \d+ windows\n", piped.stderr), piped.stderr


@pytest.mark.slow
@pytest.mark.parametrize("no_color, coloured", [("", True), ("1", False), (None, True)])
def test_an_empty_no_color_leaves_the_terminals_colour_on(char_run_folder, no_color, coloured):
    env = {"COLORTERM": "truecolor"}
    if no_color is not None:
        env["NO_COLOR"] = no_color
    code, text = in_terminal(
        [
            "generate.py",
            "--ckpt",
            char_run_folder,
            "--attention",
            "The dog saw it.",
            "--layer",
            "0",
            "--head",
            "0",
        ],
        80,
        env,
    )
    assert code == 0, text
    assert ("\x1b[48;2;" in text) == coloured
    lines = drawn(text)
    assert max(len(line) for line in lines) <= 80  # the legend and prose wrapped at spaces
    # The columns' numbers, written downwards: tens over units, 0 to 14 for the 15 tokens.
    start = lines.index(next(ln for ln in lines if "1/8)" in ln)) + 1
    tens, units = lines[start], lines[start + 1]
    assert tens.split() == ["1"] * 5 and units.split() == list("0123456789") + list("01234")


@pytest.fixture(scope="module")
def char_run_folder(tmp_path_factory):
    from tests.helpers import make_run

    folder = tmp_path_factory.mktemp("char_run")
    make_run(folder, "char", 32)
    return folder


@pytest.mark.slow
def test_at_80_columns_the_headline_table_keeps_the_pronoun_with_the_words_before_it(tmp_path):
    from tests.helpers import make_run

    make_run(tmp_path / "run", "bpe", 64)
    sentence = "The animal in the jungle went out on a hunt because it was hungry."
    code, text = in_terminal(
        ["generate.py", "--ckpt", tmp_path / "run", "--attention", sentence, "--color", "never"],
        80,
    )
    assert code == 0, text
    lines = drawn(text)
    assert max(len(line) for line in lines) <= 80
    headers = [ln.split() for ln in lines if ln.startswith(" " * 6) and ln.strip()]
    assert len(headers) == 2, headers  # two blocks of words, the same sentence
    assert [w for h in headers for w in h] == sentence.split()[:12]  # every word once, in order
    assert len(headers[1]) >= len(headers[0]) > 1 and headers[1][-2:] == ["because", "it"]

"""generate.py's attention maps: their flags and checks, each sentence's maps in the terminal and,
with --html, every head's map on one page (generation/attention_page.py), the probe's best head
outlined."""

import os
import sys

from analysis.errors import NoQueryWord
from analysis.probe import beats_chance
from analysis.words import QUERY_POSITIONS, sentence_attention
from checks import positive_int
from cli import terminal_width
from data.pronouns import ATTENTION_EXAMPLES
from generation.attention_page import page_path, page_probe, write_page
from generation.user_text import read_user_text
from reports.html import best_pair
from reports.probe_report import NO_HEAD
from reports.sentence_view import render_sentence
from reports.term_colour import COLOR_CHOICES, colour_mode
from reports.terminal import DEFAULT_TOP, MANY_HEADS
from runs.folder import METRICS_FILE, PROBE_FILE, saved_probe


def add_flags(parser):
    """The attention maps' group of generate.py's flags."""
    add = parser.add_argument_group("attention maps").add_argument
    add(
        "--attention",
        nargs="*",
        metavar="SENTENCE",
        help="print each head's attention from a pronoun to the words before it "
        "(default sentences: data.pronouns.ATTENTION_EXAMPLES)",
    )
    add(
        "--attention-file",
        metavar="PATH",
        help="as --attention, for the sentences of a UTF-8 file, one a line (blank lines skipped)",
    )
    add("--word", help="the query word (default: the first it/he/she/they)")
    add(
        "--occurrence",
        type=int,
        metavar="N",
        help="read at the Nth occurrence of the query word (of --word, --query WORD, or the "
        "Nth pronoun without them) in each sentence; default 1, the first",
    )
    add(
        "--query",
        metavar="WHERE",
        help="where attention is read from, for --attention and --probe: pronoun (the query "
        "word's last token, the default), next (the token after it), last (the sentence's "
        "last token); for --attention also a word of the sentence, as --word WORD",
    )
    add(
        "--layer",
        type=int,
        metavar="L",
        help="show only layer L's heads; with --head H also that head's token-by-token map",
    )
    add("--head", type=int, metavar="H", help="with --layer L: print that head's token map")
    _add_view_flags(add)


def _add_view_flags(add):
    """How the maps are shown: the compact view or a line per head, colour, the page."""
    add(
        "--top-heads",
        type=int,
        metavar="N",
        help="compact view: for each word before the query, the N heads that attend most to it "
        f"(the default, with N = {DEFAULT_TOP}, when more than {MANY_HEADS} heads are shown)",
    )
    add(
        "--all-heads",
        action="store_true",
        help=f"one line per head even when more than {MANY_HEADS} heads are shown",
    )
    add(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        help="colour the maps: auto (a terminal only; NO_COLOR turns it off, FORCE_COLOR on), "
        "always (into a pipe or a pager too: less -R), never",
    )
    add(
        "--html",
        metavar="FILE",
        help="with --attention: also write every head's map to one "
        f"self-contained page, with the run's facts, the probe's best head outlined and its "
        f"causal tests, from the run folder's {PROBE_FILE} (saved by --probe) when it is this "
        "checkpoint's, else the probe runs first (saying so on stderr) and saves it there; and "
        f"the probe's training curve from the run folder's {METRICS_FILE}",
    )
    add(
        "--no-probe",
        action="store_true",
        help="with --html: do not run the probe; the page outlines no head unless "
        f"{PROBE_FILE} has one",
    )


def chosen(args):
    """Whether the flags ask for attention maps (--attention or --attention-file)."""
    return args.attention is not None or args.attention_file is not None


def check(args, mode):
    """ValueError for the maps' flags that do not go together, or go with no maps, or with maps
    when `mode` is another."""
    if args.head is not None and args.layer is None:
        raise ValueError(
            "--head goes with --layer: give --layer L --head H for that head's token-by-token map"
        )
    if args.top_heads is not None:
        positive_int("--top-heads", args.top_heads)
    if args.top_heads is not None and args.all_heads:
        raise ValueError(
            "--top-heads (each word's top heads) and --all-heads (a line per head) "
            "are two views; give one of them"
        )
    if args.attention and args.attention_file is not None:
        raise ValueError(
            "--attention SENTENCE and --attention-file both give the sentences; give one of them"
        )
    if args.occurrence is not None:
        positive_int("--occurrence", args.occurrence)
    if args.html is not None and not args.html.strip():
        raise ValueError("--html is empty; give the page's file, such as attention.html")
    attention_only = (args.word, args.occurrence, args.layer, args.head, args.html, args.top_heads)
    if not chosen(args) and (attention_only != (None,) * 6 or args.all_heads):
        raise ValueError(
            "--word, --occurrence, --layer, --head, --top-heads, --all-heads and --html go with "
            "--attention"
        )
    _check_query(args, mode)
    if args.color != "auto" and not chosen(args):
        raise ValueError("--color goes with --attention: only the maps are coloured")
    if args.no_probe and args.html is None:
        raise ValueError("--no-probe goes with --html")
    if args.summary and mode == "attention" and args.html is None:
        raise ValueError(
            "--summary with --attention prints the first sentence's maps and leaves every "
            "sentence's to the page: give --html FILE"
        )
    if chosen(args) and mode != "attention":
        other = "--pairs" if mode == "pairs" else "--probe"
        raise ValueError(f"{other} and --attention are separate runs; give one of them")


def _check_query(args, mode):
    """ValueError for a --query that the mode cannot read at."""
    if args.query is None:
        return
    if mode == "sampling":
        raise ValueError("--query goes with --attention or --probe")
    if args.query in QUERY_POSITIONS:
        return
    if mode == "probe":
        raise ValueError(
            f"--query {args.query}: with --probe, read at one of "
            f"{', '.join(QUERY_POSITIONS)}; a word differs from example to "
            "example (--attention --query WORD reads at a word)"
        )
    if args.word is not None:
        raise ValueError("--word and --query WORD both name the query word; give one of them")


def attention_sentences(args):
    """The sentences --attention shows: its arguments, a file's lines, or the built-in ones."""
    if args.attention_file is None:
        return args.attention or ATTENTION_EXAMPLES
    lines = read_user_text(args.attention_file, "--attention-file").splitlines()
    sentences = [line.strip() for line in lines if line.strip()]
    if not sentences:
        raise ValueError(
            f"--attention-file {args.attention_file}: no sentences, only blank "
            "lines; write one sentence a line"
        )
    return sentences


def show_attention(run, args, out, err=None, ckpt=None):
    """Attention maps for attention_sentences(args), checked before printing (with --summary the
    first sentence's only); with args.html also the page of them all, for the run at `ckpt`
    (its facts; its saved probe result)."""
    analysed = analyse(run, args)
    saved = saved_probe(run, ckpt) if ckpt else None
    if args.html:  # the page's probe first (run now if none is saved), so the maps mark its head
        page_path(args, ckpt)
        saved = page_probe(run, ckpt, args, err or sys.stderr, saved)
    best = best_pair(saved["best_head"]) if saved and beats_chance(saved) else None
    write_maps(run, args, analysed[:1] if args.summary else analysed, out, best)
    if saved and best is None:
        out.write(f"note: {NO_HEAD[0].lower()}{NO_HEAD[1:]}\n")
    if args.html:
        write_page(run, args, analysed, ckpt, out, saved)


def analyse(run, args):
    """Each sentence's attention from its query word, after checking --layer and --head against
    the model."""
    sentences = attention_sentences(args)
    n_layer, n_head = run.model.config.n_layer, run.model.config.n_head
    if args.layer is not None and not 0 <= args.layer < n_layer:
        raise ValueError(
            f"--layer must be in 0..{n_layer - 1} (the model has {n_layer} layers), "
            f"got {args.layer}"
        )
    if args.head is not None and not 0 <= args.head < n_head:
        raise ValueError(
            f"--head must be in 0..{n_head - 1} (the model has {n_head} heads), got {args.head}"
        )
    analysed = []
    for n, sentence in enumerate(sentences, start=1):
        try:
            analysed.append(
                sentence_attention(
                    run.model, run.tokenizer, sentence, *query_of(args), args.occurrence or 1
                )
            )
        except ValueError as e:  # say which sentence: a file may hold hundreds
            where = (
                f"--attention-file {args.attention_file}, sentence {n}: "
                if args.attention_file
                else ""
            )
            raise ValueError(f"{where}{flagged(e)}") from None
    return analysed


def flagged(error):
    """An analysis error as the CLI says it: a missing query word names --word."""
    if isinstance(error, NoQueryWord) and error.missing == "pronoun":
        return f"{error} with --word"
    if isinstance(error, NoQueryWord) and error.missing == "occurrence":
        return f"{error} with --occurrence"
    if isinstance(error, NoQueryWord) and error.missing == "empty word":
        return "--word is empty; give the word whose attention to show"
    return str(error)


def query_of(args):
    """(word, position) for sentence_attention: --query WORD means --word WORD, read at it."""
    if args.query is None or args.query in QUERY_POSITIONS:
        return args.word, args.query or "pronoun"
    return args.query, "pronoun"


def write_maps(run, args, analysed, out, best=None):
    """The terminal maps of the analysed sentences: a line per head, the (layer, head) `best`
    marked (the saved probe's), or each word's top heads."""
    n_layer, n_head = run.model.config.n_layer, run.model.config.n_head
    colour = colour_mode(out, os.environ, args.color)
    terminal = bool(getattr(out, "isatty", None) and out.isatty())
    width = terminal_width(out)
    shown = n_head if args.layer is not None else n_layer * n_head
    top = args.top_heads
    if top is None and not args.all_heads and shown > MANY_HEADS:
        top = DEFAULT_TOP  # a line per head would be a wall of text for every sentence
        out.write(
            f"note: {shown} heads, so each word lists the {top} that attend most to it; "
            "--all-heads prints a line per head, --layer L one layer's, "
            "--top-heads N more heads per word\n\n"
        )
    text = "\n\n".join(
        render_sentence(a, colour, width, args.layer, args.head, top, terminal, best)
        for a in analysed
    )
    out.write(text + "\n")

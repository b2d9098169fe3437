"""Sample text from a trained run, or show where its pronouns look.

    python generate.py --prompt "The owl" --num-samples 3 --max-new-tokens 100 --top-p 0.9
    python generate.py --prompt-file story.txt --stop "\n\n"   # up to the first blank line
    python generate.py --attention                      # the built-in pronoun sentences
    python generate.py --attention-file sentences.txt   # one sentence a line
    python generate.py --attention "The dog ate because it was hungry." --layer 1 --head 2
    python generate.py --attention --top-heads 5        # each word's 5 most attending heads
    python generate.py --attention --html attention.html   # the same maps as a page
    python generate.py --probe [FILE.jsonl] [--json]       # which head finds the antecedent,
                                                           # and does the model use it?

Errors are one line on stderr (`error: ...`) and exit code 2; Ctrl-C prints `interrupted` and
exits 130, as a shell reports SIGINT.
"""

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

import torch

from analysis.coreference import study
from analysis.reports import study_report
from analysis.html import sentence_page, write_html
from analysis.terminal import DEFAULT_TOP, MANY_HEADS, colour_mode, render_sentence
from analysis.words import sentence_attention
from checks import positive_int
from configs.schema import load_config
from data.pronouns import ATTENTION_EXAMPLES, DEFAULT_COUNT
from data.sources import Source
from model.device import inference_precision, pick_device
from runs.folder import METRICS_FILE, PROBE_FILE, probe_path, read_metrics, save_probe, saved_probe
from runs.load import load_run
from runs.stream import continuation

ROOT = Path(__file__).resolve().parent
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes 0 .. 2**64-1 (negatives wrap around)
MIN_TEMPERATURE = 1e-6  # below it, float32 logits / temperature can overflow to inf
# Sampling runs one token per step, and the causal tests one query per intervention: below GPT-2
# small's width such matmuls are too small to share out, and on a busy machine a second thread
# waits (spinning) for a core instead of helping; the measurements are in the README ("Threads").
ONE_THREAD_BELOW_WIDTH = 768


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; the house style is one `error:` line, exit 2, with
    what to type instead of another tool's flag (nanoGPT's sample.py: --num_samples=3)."""

    def error(self, message):
        hint = ""
        if message.startswith("unrecognized arguments:"):
            hint = flag_hint(message.split(":", 1)[1].split()[0], self)
        self.exit(2, f"error: {message}{hint} (see --help)\n")


# nanoGPT's sample.py flags that mean something else here.
NANOGPT_FLAGS = {"start": "--prompt TEXT (or --prompt-file PATH for FILE:...)", "out_dir": "--ckpt DIR",
                 "init_from": "--ckpt DIR (a run folder; hf:gpt2 for GPT-2)"}


def flag_hint(arg, parser):
    """; did you mean ... for an unknown flag: nanoGPT's spelling (underscores, key=value), or
    a flag of ours it is close to."""
    import difflib

    name = arg.lstrip("-").split("=", 1)[0]
    if name in NANOGPT_FLAGS:
        return f"; nanoGPT's --{name} is {NANOGPT_FLAGS[name]} here"
    ours = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    close = difflib.get_close_matches("--" + name.replace("_", "-"), ours, n=1, cutoff=0.75)
    return f"; did you mean {close[0]}? (flags take dashes: --num-samples 3)" if close else ""


def unescaped(text):
    """--stop's value with \\n, \\t and \\\\ read as a newline, a tab and a backslash: a shell
    passes "\\n" through as a backslash and an n."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def default_out_dir(config_path=DEFAULT_CONFIG):
    """The default config's out_dir, so `generate.py` finds what `train.py` wrote by default."""
    return load_config(config_path).out_dir


def build_parser():
    """The flags, in groups; a new mode adds its group here and its branch in main()."""
    p = OneLineErrorParser(description="Sample from a trained run, or print its attention maps.")
    add = p.add_argument
    add("--ckpt", metavar="DIR",
        help="run folder written by train.py (default: out_dir of configs/default.yaml), a Hugging Face "
             "GPT-2 folder, hf:OWNER/NAME, or a nanoGPT run folder")
    add("--meta", metavar="FILE",
        help="a nanoGPT run's meta.pkl (its character vocabulary), where it is not beside its ckpt.pt")
    add("--device", default="auto", metavar="D",
        help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    add("--threads", type=int, metavar="N",
        help=f"CPU threads for torch (default: 1 for models under {ONE_THREAD_BELOW_WIDTH} wide, "
             "else torch's default; OMP_NUM_THREADS is respected)")

    add = p.add_argument_group("sampling").add_argument
    add("--prompt", metavar="TEXT", help="text to continue (default: a newline)")
    add("--prompt-file", metavar="PATH", help="continue the UTF-8 text of this file instead")
    add("--num-samples", type=int, default=1, metavar="N",
        help="samples to draw, one after another (default 1)")
    add("--max-new-tokens", type=int, default=200, metavar="N",
        help="tokens to add per sample (default 200)")
    add("--temperature", type=float, default=0.8, metavar="T",
        help="0 is greedy, above 1 is wilder (default 0.8)")
    add("--top-k", type=int, metavar="K", help="sample from the k most likely tokens only")
    add("--top-p", type=float, metavar="P",
        help="sample from the smallest set of tokens whose probability reaches p, in (0, 1]")
    add("--seed", type=int, metavar="S", help="seed for reproducible samples (default: random)")
    add("--no-cache", action="store_true",
        help="recompute the whole context every token instead of using the KV cache")
    add("--stop", action="append", default=[], metavar="STRING", type=unescaped,
        help="end a sample as soon as its text after the prompt contains STRING; the sample "
             "is printed up to it, without it (repeatable: the first one met ends it). \\n and "
             "\\t in STRING mean a newline and a tab (--stop '\\n\\n': a blank line; \\\\ is a "
             "backslash). A tokenizer with an end-of-text token (gpt2) also ends a sample there")

    add = p.add_argument_group("attention maps").add_argument
    add("--attention", nargs="*", metavar="SENTENCE",
        help="print each head's attention from a pronoun to the words before it "
             "(default sentences: data.pronouns.ATTENTION_EXAMPLES)")
    add("--attention-file", metavar="PATH",
        help="as --attention, for the sentences of a UTF-8 file, one a line (blank lines skipped)")
    add("--word", help="the query word (default: the first it/he/she/they)")
    add("--layer", type=int, metavar="L",
        help="show only layer L's heads; with --head H also that head's token-by-token map")
    add("--head", type=int, metavar="H", help="with --layer L: print that head's token map")
    add("--top-heads", type=int, metavar="N",
        help="compact view: for each word before the query, the N heads that attend most to it "
             f"(the default, with N = {DEFAULT_TOP}, when more than {MANY_HEADS} heads are shown)")
    add("--all-heads", action="store_true",
        help=f"one line per head even when more than {MANY_HEADS} heads are shown")
    add("--html", metavar="FILE", help="with --attention: also write every head's map to one "
        f"self-contained page, with the run's facts, the probe's best head outlined and its "
        f"causal tests, from the run folder's {PROBE_FILE} (saved by --probe) when it is this "
        "checkpoint's, else the probe runs first (saying so on stderr) and saves it there; and "
        f"the probe's training curve from the run folder's {METRICS_FILE}")
    add("--no-probe", action="store_true",
        help="with --html: do not run the probe; the page outlines no head unless "
             f"{PROBE_FILE} has one")

    add = p.add_argument_group("coreference probe").add_argument
    add("--probe", nargs="?", const="", metavar="FILE",
        help="score every head: how often does the pronoun attend most to its antecedent? "
             "(default: the built-in dev and test sets, the result saved to the run folder's "
             f"{PROBE_FILE}; natural: the hand-written natural sentences, the head chosen on the "
             "built-in dev set; FILE: your JSONL examples; neither saved)")
    add("--json", action="store_true", help="with --probe: print one JSON object")
    add("--patch", action="store_true",
        help="with --probe: also activation patching on corrupted twins (each head's output and the "
             "residual stream at the antecedent, between, and the pronoun, patched clean -> corrupted)")
    add("--no-causal", action="store_true",
        help="with --probe (or --html when it runs the probe): skip the causal tests "
             "(antecedent and distractor knockout, head ablation; about a second for the default "
             "model)")
    add("--permutations", type=int, default=1000, metavar="N",
        help="label shuffles for the probe's p-value (default 1000)")
    return p


def check_args(args):
    """ValueError for values argparse's types let through."""
    positive_int("--num-samples", args.num_samples)
    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be 0 or more, got {args.max_new_tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature must be 0 (greedy) or more, and finite, "
                         f"got {args.temperature}")
    if 0 < args.temperature < MIN_TEMPERATURE:
        raise ValueError(f"--temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, "
                         f"got {args.temperature:g}; smaller values overflow")
    if args.top_k is not None:
        positive_int("--top-k", args.top_k)
    if args.top_p is not None and not 0 < args.top_p <= 1:  # False for nan too
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.seed is not None and not 0 <= args.seed <= SEED_MAX:
        raise ValueError(f"--seed must be in 0..{SEED_MAX} (2**64 - 1), got {args.seed}")
    if args.head is not None and args.layer is None:
        raise ValueError("--head goes with --layer: give --layer L --head H for that head's "
                         "token-by-token map")
    if args.top_heads is not None:
        positive_int("--top-heads", args.top_heads)
    if args.top_heads is not None and args.all_heads:
        raise ValueError("--top-heads (each word's top heads) and --all-heads (a line per head) "
                         "are two views; give one of them")
    if args.threads is not None:
        positive_int("--threads", args.threads)
    if args.prompt is not None and args.prompt_file is not None:
        raise ValueError("--prompt and --prompt-file both give the prompt; give one of them")
    if "" in args.stop:
        raise ValueError("--stop is empty; give the text that ends a sample")
    if args.attention and args.attention_file is not None:
        raise ValueError("--attention SENTENCE and --attention-file both give the sentences; "
                         "give one of them")
    attention = args.attention is not None or args.attention_file is not None
    attention_only = (args.word, args.layer, args.head, args.html, args.top_heads)
    if not attention and (attention_only != (None,) * 5 or args.all_heads):
        raise ValueError("--word, --layer, --head, --top-heads, --all-heads and --html go with "
                         "--attention")
    if args.no_probe and args.html is None:
        raise ValueError("--no-probe goes with --html")
    if args.probe is not None and attention:
        raise ValueError("--probe and --attention are separate runs; give one of them")
    sampling_only = args.prompt is not None or args.prompt_file is not None or args.stop
    if sampling_only and (attention or args.probe is not None):
        raise ValueError("--prompt, --prompt-file and --stop are for sampling, not for "
                         "--attention or --probe")
    if args.json and args.probe is None:
        raise ValueError("--json goes with --probe")
    if args.no_causal and args.probe is None and args.html is None:
        raise ValueError("--no-causal goes with --probe (or --html)")
    positive_int("--permutations", args.permutations)


def check_run_folder(path):
    """ValueError for a --ckpt that names a file: load_run wants the folder train.py wrote."""
    if Path(path).is_file():
        raise ValueError(f"--ckpt takes the run folder train.py wrote, not a file: {path}; "
                         f"try --ckpt {Path(path).parent}")


def read_user_text(path, flag):
    """The text of the UTF-8 file the user named with `flag`; ValueError (one line) for a missing
    file, a folder, text that is not UTF-8 (with the offset of the first bad byte), or no text."""
    path = Path(path)
    if not path.exists() or path.is_dir():  # a pipe or /dev/stdin is read as it comes
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ValueError(f"{flag} {path}: the file {what}; give a UTF-8 text file")
    text = Source(str(path), (path,)).read_text()
    if not text:
        raise ValueError(f"{flag} {path}: the file is empty; write some text into it")
    return text


def attention_sentences(args):
    """The sentences --attention shows: its arguments, a file's lines, or the built-in ones."""
    if args.attention_file is None:
        return args.attention or ATTENTION_EXAMPLES
    lines = read_user_text(args.attention_file, "--attention-file").splitlines()
    sentences = [line.strip() for line in lines if line.strip()]
    if not sentences:
        raise ValueError(f"--attention-file {args.attention_file}: no sentences, only blank "
                         "lines; write one sentence a line")
    return sentences


def report_width(stream):
    """The columns a report may use: the terminal's, or 80 when the output is piped or a file."""
    isatty = getattr(stream, "isatty", None)
    return shutil.get_terminal_size((80, 24)).columns if isatty and isatty() else 80


def fit_width(text, width):
    """`text` with every prose line longer than `width` wrapped, the continuation indented under
    the line's own indent plus two spaces; lines that fit, and table rows (columns set apart by
    runs of spaces), are left as they are."""
    import textwrap

    out = []
    for line in text.splitlines():
        if len(line) <= width or "   " in line.strip():
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_on_hyphens=False) or [""]
    return "\n".join(out)


def generation_threads(n_embd, requested=None, environ=os.environ):
    """How many CPU threads generate.py should use: `requested` (--threads) when given; None
    (keep torch's default) when OMP_NUM_THREADS says, or for models ONE_THREAD_BELOW_WIDTH wide
    or more; else 1, because a small model's one-token steps (sampling) and one-query passes (the
    causal tests) gain nothing from a second thread and lose much when the cores are busy
    (numbers in the README)."""
    if requested is not None:
        return requested
    if environ.get("OMP_NUM_THREADS") or n_embd >= ONE_THREAD_BELOW_WIDTH:
        return None
    return 1


def sample(run, args, device, out, err):
    """Stream args.num_samples samples of the prompt's continuation to `out`."""
    if args.prompt_file is not None:
        prompt = read_user_text(args.prompt_file, "--prompt-file")
    else:
        prompt = "\n" if args.prompt is None else args.prompt
    if not prompt:
        raise ValueError("--prompt is empty; give some text to continue (the default is a newline)")
    ids = run.tokenizer.encode(prompt)
    block_size = run.model.config.block_size
    if len(ids) > block_size:
        err.write(f"note: the prompt is {len(ids)} tokens; the model sees only its last "
                  f"{block_size} (block_size)\n")
    generator = torch.Generator(device=device)
    if args.seed is None:
        generator.seed()
    else:
        generator.manual_seed(args.seed)
    idx = torch.tensor([ids], dtype=torch.long, device=device)
    with inference_precision(device):
        write_samples(run, args, idx, generator, prompt, out)


def write_samples(run, args, idx, generator, prompt, out):
    """The prompt and its continuation, args.num_samples times, streamed to `out`."""
    for n in range(args.num_samples):
        if n > 0:
            out.write("---\n")
        out.write(prompt)
        last = prompt
        for piece in continuation(run, idx, args.max_new_tokens, args.temperature, args.top_k,
                                  args.top_p, generator, not args.no_cache, args.stop):
            out.write(piece)
            out.flush()
            last = piece or last
        out.write("" if last.endswith("\n") else "\n")
        out.flush()


def show_attention(run, args, out, err=None, ckpt=None):
    """Attention maps for attention_sentences(args), checked before printing; with args.html also
    the page, for the run at `ckpt` (its facts; its saved probe result)."""
    sentences = attention_sentences(args)
    n_layer, n_head = run.model.config.n_layer, run.model.config.n_head
    if args.layer is not None and not 0 <= args.layer < n_layer:
        raise ValueError(f"--layer must be in 0..{n_layer - 1} (the model has {n_layer} layers), "
                         f"got {args.layer}")
    if args.head is not None and not 0 <= args.head < n_head:
        raise ValueError(f"--head must be in 0..{n_head - 1} (the model has {n_head} heads), "
                         f"got {args.head}")
    analysed = []
    for n, sentence in enumerate(sentences, start=1):
        try:
            analysed.append(sentence_attention(run.model, run.tokenizer, sentence, args.word))
        except ValueError as e:  # say which sentence: a file may hold hundreds
            where = f"--attention-file {args.attention_file}, sentence {n}: " if args.attention_file else ""
            raise ValueError(f"{where}{e}") from None
    colour = colour_mode(out, os.environ)
    width = shutil.get_terminal_size((100, 24)).columns if colour else 100
    shown = n_head if args.layer is not None else n_layer * n_head
    top = args.top_heads
    if top is None and not args.all_heads and shown > MANY_HEADS:
        top = DEFAULT_TOP  # a line per head would be a wall of text for every sentence
        out.write(f"note: {shown} heads, so each word lists the {top} that attend most to it; "
                  "--all-heads prints a line per head, --layer L one layer's, "
                  "--top-heads N more heads per word\n\n")
    text = "\n\n".join(render_sentence(a, colour, width, args.layer, args.head, top)
                        for a in analysed)
    out.write(text + "\n")
    if args.html:
        found = page_probe(run, ckpt, args, err or sys.stderr) or {}
        best = found.get("best_head")
        if args.html.endswith(("/", os.sep)):  # a trailing slash means a folder: the page goes in it
            args.html = str(Path(args.html) / "attention.html")
        write_html(args.html, [sentence_page(a) for a in analysed], best_head=best, checkpoint=ckpt,
                   step=run.ckpt.get("step"), val_loss=run.ckpt.get("best_val_loss"),
                   causal=found.get("causal"), records=read_metrics(Path(ckpt) / METRICS_FILE),
                   lens=found.get("logit_lens"), patching=found.get("patching"))
        outlined = f"layer {best['layer']} head {best['head']}" if best else "none (--no-probe)"
        out.write(f"wrote {args.html} (outlined, the probe's best head: {outlined})\n")


def page_probe(run, ckpt, args, err):
    """The probe's result for the page: saved for this checkpoint, else run now (and saved)
    unless --no-probe; None when there is none."""
    saved = saved_probe(run, ckpt)
    if saved is not None or args.no_probe:
        return saved
    path = probe_path(ckpt)
    kept = f", saved to {path} for next time" if path else ""
    tests = "" if args.no_causal else " and its causal tests"
    err.write(f"note: running the probe{tests} on its {2 * DEFAULT_COUNT} built-in sentences "
              f"for the head to outline{kept} (--no-probe skips it)\n")
    # One permutation: the page needs the best head, not its p-value.
    result = study(run.model, run.tokenizer, permutations=1, causal=not args.no_causal)
    keep_probe(run, ckpt, result, err)
    return result


def keep_probe(run, ckpt, result, err):
    """Save the built-in probe's result in the run folder for --html; a folder that cannot take
    it is a note, not an error: the result has been shown."""
    try:
        save_probe(run, ckpt, result)
    except ValueError as e:
        err.write(f"note: the probe's result was not saved: {e}\n")


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        check_args(args)
        device = pick_device(args.device)
        ckpt = args.ckpt or default_out_dir()
        check_run_folder(ckpt)
        run = load_run(ckpt, device, nanogpt_meta=args.meta)
        threads = generation_threads(run.model.config.n_embd, args.threads)
        if threads is not None:
            torch.set_num_threads(threads)
        if args.probe is not None:
            result = study(run.model, run.tokenizer, args.probe, args.permutations,
                           causal=not args.no_causal, patch=args.patch)
            out.write((json.dumps(result) if args.json else fit_width(study_report(result), report_width(out))) + "\n")
            if not args.probe:  # the built-in sets: what --html outlines
                keep_probe(run, ckpt, result, err)
        elif args.attention is not None or args.attention_file is not None:
            show_attention(run, args, out, err, ckpt)
        else:
            sample(run, args, device, out, err)
    except BrokenPipeError:  # `generate.py | head`: the reader left; stop quietly
        sys.stdout = open(os.devnull, "w")  # so the flush at exit does not complain
        return 0
    except (ValueError, OSError) as e:  # OSError: a file or folder the user named
        err.write(f"error: {e}\n")
        return 2
    except KeyboardInterrupt:  # Ctrl-C while loading or sampling: no traceback
        err.write("interrupted\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sample text from a trained run, or show where its pronouns look.

    python generate.py --prompt "The owl" --num-samples 3 --max-new-tokens 100 --top-p 0.9
    python generate.py --attention                      # the built-in pronoun sentences
    python generate.py --attention "The dog ate because it was hungry." --layer 1 --head 2
    python generate.py --attention --top-heads 5        # each word's 5 most attending heads
    python generate.py --attention --html attention.html   # the same maps as a page
    python generate.py --probe [FILE.jsonl] [--json]       # which head finds the antecedent?

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
import yaml

from analysis.html import sentence_page, write_html
from analysis.probe import format_report, run_probe
from analysis.terminal import DEFAULT_TOP, MANY_HEADS, colour_mode, render_sentence
from analysis.words import sentence_attention
from data.pronouns import ATTENTION_EXAMPLES, examples, read_jsonl
from model.checkpoint import load_run
from model.device import pick_device
from model.sampling import generate

ROOT = Path(__file__).resolve().parent
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes 0 .. 2**64-1 (negatives wrap around)
MIN_TEMPERATURE = 1e-6  # below it, float32 logits / temperature can overflow to inf


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; the house style is one `error:` line, exit 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def default_out_dir(config_path=DEFAULT_CONFIG):
    """The default config's out_dir, so `generate.py` finds what `train.py` wrote by default."""
    try:
        out_dir = (yaml.safe_load(Path(config_path).read_text()) or {}).get("out_dir")
    except (OSError, yaml.YAMLError, AttributeError):
        out_dir = None
    return out_dir or "out/default"


def build_parser():
    """The flags, in groups; a new mode adds its group here and its branch in main()."""
    p = OneLineErrorParser(description="Sample from a trained run, or print its attention maps.")
    add = p.add_argument
    add("--ckpt", metavar="DIR",
        help="run folder written by train.py (default: out_dir of configs/default.yaml)")
    add("--device", default="auto", metavar="D",
        help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")

    add = p.add_argument_group("sampling").add_argument
    add("--prompt", default="\n", metavar="TEXT", help="text to continue (default: a newline)")
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

    add = p.add_argument_group("attention maps").add_argument
    add("--attention", nargs="*", metavar="SENTENCE",
        help="print each head's attention from a pronoun to the words before it "
             "(default sentences: data.pronouns.ATTENTION_EXAMPLES)")
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
        "self-contained page, the probe's best head marked")

    add = p.add_argument_group("coreference probe").add_argument
    add("--probe", nargs="?", const="", metavar="FILE",
        help="score every head: how often does the pronoun attend most to its antecedent? "
             "(default: the built-in dev and test sets; FILE: your JSONL examples)")
    add("--json", action="store_true", help="with --probe: print one JSON object")
    add("--permutations", type=int, default=1000, metavar="N",
        help="label shuffles for the probe's p-value (default 1000)")
    return p


def check_args(args):
    """ValueError for values argparse's types let through."""
    if args.num_samples < 1:
        raise ValueError(f"--num-samples must be at least 1, got {args.num_samples}")
    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be 0 or more, got {args.max_new_tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature must be 0 (greedy) or more, and finite, "
                         f"got {args.temperature}")
    if 0 < args.temperature < MIN_TEMPERATURE:
        raise ValueError(f"--temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, "
                         f"got {args.temperature:g}; smaller values overflow")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(f"--top-k must be at least 1, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:  # False for nan too
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.seed is not None and not 0 <= args.seed <= SEED_MAX:
        raise ValueError(f"--seed must be in 0..{SEED_MAX} (2**64 - 1), got {args.seed}")
    if args.head is not None and args.layer is None:
        raise ValueError("--head goes with --layer: give --layer L --head H for that head's "
                         "token-by-token map")
    if args.top_heads is not None and args.top_heads < 1:
        raise ValueError(f"--top-heads must be at least 1, got {args.top_heads}")
    if args.top_heads is not None and args.all_heads:
        raise ValueError("--top-heads (each word's top heads) and --all-heads (a line per head) "
                         "are two views; give one of them")
    attention_only = (args.word, args.layer, args.head, args.html, args.top_heads)
    if args.attention is None and (attention_only != (None,) * 5 or args.all_heads):
        raise ValueError("--word, --layer, --head, --top-heads, --all-heads and --html go with "
                         "--attention")
    if args.probe is not None and args.attention is not None:
        raise ValueError("--probe and --attention are separate runs; give one of them")
    if args.json and args.probe is None:
        raise ValueError("--json goes with --probe")
    if args.permutations < 1:
        raise ValueError(f"--permutations must be at least 1, got {args.permutations}")


def check_run_folder(path):
    """ValueError for a --ckpt that names a file: load_run wants the folder train.py wrote."""
    if Path(path).is_file():
        raise ValueError(f"--ckpt takes the run folder train.py wrote, not a file: {path}; "
                         f"try --ckpt {Path(path).parent}")


class TextStream:
    """Decode tokens as they come. A token may end in the middle of a UTF-8 character (byte
    BPE), which decodes to U+FFFD until the rest arrives, so such a tail is held back."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.pending = []

    def push(self, token_id):
        """Text that is now complete (maybe "")."""
        self.pending.append(token_id)
        text = self.tokenizer.decode(self.pending)
        if text.endswith("\ufffd"):
            return ""
        self.pending = []
        return text

    def flush(self):
        """Whatever is held back, as it decodes (with U+FFFD for bytes that never completed)."""
        text = self.tokenizer.decode(self.pending) if self.pending else ""
        self.pending = []
        return text


def sample(run, args, device, out, err):
    """Stream args.num_samples samples of the prompt's continuation to `out`."""
    if not args.prompt:
        raise ValueError("--prompt is empty; give some text to continue (the default is a newline)")
    ids = run.tokenizer.encode(args.prompt)
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
    for n in range(args.num_samples):
        if n > 0:
            out.write("---\n")
        out.write(args.prompt)
        stream, last = TextStream(run.tokenizer), args.prompt
        for next_ids in generate(run.model, idx, args.max_new_tokens, args.temperature, args.top_k,
                                 args.top_p, generator, use_cache=not args.no_cache):
            piece = stream.push(next_ids.item())
            out.write(piece)
            out.flush()
            last = piece or last
        tail = stream.flush()
        out.write(tail + ("" if (tail or last).endswith("\n") else "\n"))
        out.flush()


def show_attention(run, args, out):
    """Attention maps for args.attention (or the built-in sentences), checked before printing."""
    sentences = args.attention or ATTENTION_EXAMPLES
    n_layer, n_head = run.model.config.n_layer, run.model.config.n_head
    if args.layer is not None and not 0 <= args.layer < n_layer:
        raise ValueError(f"--layer must be in 0..{n_layer - 1} (the model has {n_layer} layers), "
                         f"got {args.layer}")
    if args.head is not None and not 0 <= args.head < n_head:
        raise ValueError(f"--head must be in 0..{n_head - 1} (the model has {n_head} heads), "
                         f"got {args.head}")
    analysed = [sentence_attention(run.model, run.tokenizer, s, args.word) for s in sentences]
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
        best = probe(run, "", permutations=1)["best_head"]
        write_html(args.html, [sentence_page(a) for a in analysed], best_head=best)
        out.write(f"wrote {args.html} (best head on the probe's dev set: "
                  f"layer {best['layer']} head {best['head']})\n")


def probe(run, path, permutations=1000):
    """The coreference probe on a user's JSONL file, or on the built-in dev and test sets."""
    if path:
        try:
            labelled = read_jsonl(path)
        except OSError as e:  # a folder, a missing file, no permission: name the user's path
            raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
        if not labelled:
            raise ValueError(f"{path} holds no examples; write one JSON object per line")
        return run_probe(run.model, run.tokenizer, labelled, permutations=permutations)
    return run_probe(run.model, run.tokenizer, examples("dev"), examples("test"),
                     permutations=permutations)


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        check_args(args)
        device = pick_device(args.device)
        ckpt = args.ckpt or default_out_dir()
        check_run_folder(ckpt)
        run = load_run(ckpt, device)
        if args.probe is not None:
            result = probe(run, args.probe, args.permutations)
            out.write((json.dumps(result) if args.json else format_report(result)) + "\n")
        elif args.attention is not None:
            show_attention(run, args, out)
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

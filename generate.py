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
import os
import sys
from pathlib import Path

import torch

from checks import positive_int
from configs.load import load_config
from generation import attention, probe, sampling
from model.device import pick_device
from runs.load import load_run

ROOT = Path(__file__).resolve().parent
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
# Sampling runs one token per step, and the causal tests one query per intervention: below GPT-2
# small's width such matmuls are too small to share out, and on a busy machine a second thread
# waits (spinning) for a core instead of helping (docs/performance.md, "Generation and threads").
ONE_THREAD_BELOW_WIDTH = 768
MODES = (sampling, attention, probe)  # each adds its flags and checks them, in this order


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


def default_out_dir(config_path=DEFAULT_CONFIG):
    """The default config's out_dir, so `generate.py` finds what `train.py` wrote by default."""
    return load_config(config_path).out_dir


def build_parser():
    """The common flags, then each mode's group: sampling, attention maps, the probe."""
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
    for each in MODES:
        each.add_flags(p)
    return p


def mode_of(args):
    """What the flags ask for: "probe", "attention" (maps) or, by default, "sampling"."""
    if args.probe is not None:
        return "probe"
    return "attention" if attention.chosen(args) else "sampling"


def check_args(args):
    """ValueError for values argparse's types let through, and for flags of a mode that does not
    run; each mode checks its own flags. Returns mode_of(args)."""
    if args.threads is not None:
        positive_int("--threads", args.threads)
    mode = mode_of(args)
    for each in MODES:
        each.check(args, mode)
    return mode


def check_run_folder(path):
    """ValueError for a --ckpt that names a file: load_run wants the folder train.py wrote."""
    if Path(path).is_file():
        raise ValueError(f"--ckpt takes the run folder train.py wrote, not a file: {path}; "
                         f"try --ckpt {Path(path).parent}")


def generation_threads(n_embd, requested=None, environ=os.environ):
    """How many CPU threads generate.py should use: `requested` (--threads) when given; None
    (keep torch's default) when OMP_NUM_THREADS says, or for models ONE_THREAD_BELOW_WIDTH wide
    or more; else 1, because a small model's one-token steps (sampling) and one-query passes (the
    causal tests) gain nothing from a second thread and lose much when the cores are busy
    (docs/performance.md has the numbers)."""
    if requested is not None:
        return requested
    if environ.get("OMP_NUM_THREADS") or n_embd >= ONE_THREAD_BELOW_WIDTH:
        return None
    return 1


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        mode = check_args(args)
        device = pick_device(args.device)
        ckpt = args.ckpt or default_out_dir()
        check_run_folder(ckpt)
        run = load_run(ckpt, device, nanogpt_meta=args.meta)
        threads = generation_threads(run.model.config.n_embd, args.threads)
        if threads is not None:
            torch.set_num_threads(threads)
        if mode == "probe":
            probe.show_probe(run, args, ckpt, out, err)
        elif mode == "attention":
            attention.show_attention(run, args, out, err, ckpt)
        else:
            sampling.sample(run, args, device, out, err)
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

"""Sample text from a trained run, or show where its pronouns look.

    python generate.py --prompt "The owl" --num-samples 3 --max-new-tokens 100 --top-p 0.9
    python generate.py --prompt-file story.txt --stop "\n"     # to the end of the line
    python generate.py --attention                      # the built-in pronoun sentences
    python generate.py --attention-file sentences.txt   # one sentence a line
    python generate.py --attention "The dog ate because it was hungry." --layer 1 --head 2
    python generate.py --attention --top-heads 5        # each word's 5 most attending heads
    python generate.py --attention --html attention.html   # the same maps as a page
    python generate.py --probe [FILE.jsonl] [--json]       # which head finds the antecedent,
                                                           # and does the model use it?
    python generate.py --pairs pairs.jsonl              # patching and the circuit, your pairs

Errors are one line on stderr (`error: ...`) and exit code 2; Ctrl-C prints `interrupted` and
exits 130, as a shell reports SIGINT.
"""

import os
import sys
from pathlib import Path

from checks import positive_int
from cli import OneLineErrorParser, wrap_for
from generation import attention_mode, pairs_mode, probe_mode, prompt_test_mode, sample_mode
from generation.default_run import default_out_dir, default_run_folder
from generation.pronoun_route import pronoun_route
from model.checkpoint import NoCheckpoint
from model.device import ONE_THREAD_BELOW_WIDTH, pick_device, use_generation_threads
from runs.loading import NoNanogptMeta, UnusedNanogptMeta, load_run
from runs.restart import leftover_note

MODES = (
    sample_mode,
    attention_mode,
    pairs_mode,  # before the probe, whose flags it shares: --pairs with --probe is said first
    probe_mode,
    prompt_test_mode,
)  # each adds its flags and checks them, in this order

# nanoGPT's sample.py flags that mean something else here.
NANOGPT_FLAGS = {
    "start": "--prompt TEXT (or --prompt-file PATH for FILE:...)",
    "out_dir": "--ckpt DIR",
    "init_from": "--ckpt DIR (a run folder; hf:gpt2 for GPT-2)",
}


# transformers' generate() keywords as flags, and what they are here.
HF_FLAGS = {
    "do_sample": "generate.py samples by default; --temperature 0 decodes greedily",
    "max_length": "--max-new-tokens N counts only the new tokens",
    "num_return_sequences": "--num-samples N",
}


def flag_hint(option):
    """What nanoGPT's sample.py flag, or transformers' generate() keyword, `option` is here, or
    None (the parser then offers the closest flag of ours: --num_samples=3 -> --num-samples)."""
    name = option.lstrip("-").split("=", 1)[0]
    if name in NANOGPT_FLAGS:
        return f"nanoGPT's --{name} is {NANOGPT_FLAGS[name]} here"
    said = HF_FLAGS.get(name.replace("-", "_"))
    return f"transformers' {name.replace('-', '_')}: {said}" if said else None


def build_parser():
    """The common flags, then each mode's group: sampling, attention maps, the probe."""
    p = OneLineErrorParser(
        description="Sample from a trained run, or print its attention maps.", hint=flag_hint
    )
    add = p.add_argument
    add(
        "--ckpt",
        metavar="DIR",
        help="run folder written by train.py (default: out_dir of configs/default.yaml, in the "
        "current folder, else in the checkout), a "
        "Hugging Face GPT-2 folder, hf:OWNER/NAME, or a nanoGPT run folder",
    )
    add(
        "--meta",
        metavar="FILE",
        help="a nanoGPT run's meta.pkl (its character vocabulary), where it is not beside its "
        "ckpt.pt; refused for any other model, whose tokenizer is its own",
    )
    add(
        "--device",
        default="auto",
        metavar="D",
        help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps",
    )
    add(
        "--threads",
        type=int,
        metavar="N",
        help=f"CPU threads for torch (default: 1 for models under {ONE_THREAD_BELOW_WIDTH} wide, "
        "else torch's default; OMP_NUM_THREADS is respected)",
    )
    for each in MODES:
        each.add_flags(p)
    return p


def mode_of(args):
    """What the flags ask for: "pairs", "probe", "test_prompt", "attention" (maps) or, by
    default, "sampling"."""
    if pairs_mode.chosen(args):
        return "pairs"
    if args.probe is not None:
        return "probe"
    if prompt_test_mode.chosen(args):
        return "test_prompt"
    return "attention" if attention_mode.chosen(args) else "sampling"


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
        raise ValueError(
            f"--ckpt takes the run folder train.py wrote, not a file: {path}; "
            f"try --ckpt {Path(path).parent}"
        )


def worded(error):
    """An error's one line, the packages' typed ones with what to type here instead."""
    if isinstance(error, NoCheckpoint):
        return f"{error} (`python train.py` trains one)"
    if isinstance(error, NoNanogptMeta):
        return f"{error.problem}; give the meta.pkl file of the run's data with --meta"
    if isinstance(error, UnusedNanogptMeta):  # refused: ignoring it would leave the user misled
        return f"--meta is for a nanoGPT run; {error.source} is {error.what}: leave --meta out"
    return str(error)


def main(argv=None, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        mode = check_args(args)
        device = pick_device(args.device)
        where = args.ckpt or default_out_dir()
        if note := leftover_note(where):  # a killed forced restart's folder beside it
            err.write(wrap_for(note, err) + "\n")
        ckpt = args.ckpt or default_run_folder(where)
        check_run_folder(ckpt)
        run = load_run(ckpt, device, nanogpt_meta=args.meta)
        use_generation_threads(run.model, args.threads)
        if mode == "pairs":
            pairs_mode.show_pairs(run, args, out)
        elif mode == "probe":
            probe_mode.show_probe(run, args, ckpt, out, err)
        elif mode == "test_prompt":
            prompt_test_mode.show_test_prompt(run, args, out)
        elif mode == "attention":
            attention_mode.show_attention(run, args, out, err, ckpt)
        else:
            sample_mode.sample(run, args, device, out, err)
        if mode in ("probe", "attention") and (route := pronoun_route(run)):
            err.write(route + "\n")  # one line, after the maps: no pronoun head, how to grow one
    except BrokenPipeError:  # `generate.py | head`: the reader left; stop quietly
        sys.stdout = open(os.devnull, "w")  # so the flush at exit does not complain
        return 0
    except (ValueError, OSError) as e:  # OSError: a file or folder the user named
        err.write(f"error: {worded(e)}\n")
        return 2
    except KeyboardInterrupt:  # Ctrl-C while loading or sampling: no traceback
        err.write("interrupted\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

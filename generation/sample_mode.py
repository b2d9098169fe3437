"""generate.py's sampling: its flags and their checks, and the samples streamed as they come."""

import math

import torch

from checks import positive_int
from generation.user_text import read_user_text
from model.device import inference_precision
from runs.stream import continuation

SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes 0 .. 2**64-1 (negatives wrap around)
MIN_TEMPERATURE = 1e-6  # below it, float32 logits / temperature can overflow to inf


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


def add_flags(parser):
    """The sampling group of generate.py's flags."""
    add = parser.add_argument_group("sampling").add_argument
    add("--prompt", metavar="TEXT", help="text to continue (default: a newline)")
    add("--prompt-file", metavar="PATH", help="continue the UTF-8 text of this file instead")
    add(
        "--num-samples",
        type=int,
        default=1,
        metavar="N",
        help="samples to draw, one after another (default 1)",
    )
    add(
        "--max-new-tokens",
        type=int,
        default=200,
        metavar="N",
        help="tokens to add per sample (default 200)",
    )
    add(
        "--temperature",
        type=float,
        default=0.8,
        metavar="T",
        help="0 is greedy, above 1 is wilder (default 0.8)",
    )
    add("--top-k", type=int, metavar="K", help="sample from the k most likely tokens only")
    add(
        "--top-p",
        type=float,
        metavar="P",
        help="sample from the smallest set of tokens whose probability reaches p, in (0, 1]",
    )
    add("--seed", type=int, metavar="S", help="seed for reproducible samples (default: random)")
    add(
        "--no-cache",
        action="store_true",
        help="recompute the whole context every token instead of using the KV cache",
    )
    add(
        "--stop",
        action="append",
        default=[],
        metavar="STRING",
        type=unescaped,
        help="end a sample as soon as its text after the prompt contains STRING; the sample "
        "is printed up to it, without it (repeatable: the first one met ends it). \\n and "
        "\\t in STRING mean a newline and a tab (--stop '\\n\\n': a blank line; \\\\ is a "
        "backslash). A tokenizer with an end-of-text token (gpt2) also ends a sample there",
    )


def check(args, mode):
    """ValueError for sampling values argparse's types let through, and for the flags only
    sampling takes when `mode` is another."""
    positive_int("--num-samples", args.num_samples)
    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be 0 or more, got {args.max_new_tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(
            f"--temperature must be 0 (greedy) or more, and finite, got {args.temperature}"
        )
    if 0 < args.temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"--temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, "
            f"got {args.temperature:g}; smaller values overflow"
        )
    if args.top_k is not None:
        positive_int("--top-k", args.top_k)
    if args.top_p is not None and not 0 < args.top_p <= 1:  # False for nan too
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.seed is not None and not 0 <= args.seed <= SEED_MAX:
        raise ValueError(f"--seed must be in 0..{SEED_MAX} (2**64 - 1), got {args.seed}")
    if args.prompt is not None and args.prompt_file is not None:
        raise ValueError("--prompt and --prompt-file both give the prompt; give one of them")
    if "" in args.stop:
        raise ValueError("--stop is empty; give the text that ends a sample")
    sampling_only = args.prompt is not None or args.prompt_file is not None or args.stop
    if sampling_only and mode != "sampling":
        raise ValueError(
            "--prompt, --prompt-file and --stop are for sampling, not for --attention or --probe"
        )


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
        err.write(
            f"note: the prompt is {len(ids)} tokens; the model sees only its last "
            f"{block_size} (block_size)\n"
        )
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
        for piece in continuation(
            run,
            idx,
            args.max_new_tokens,
            args.stop,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            generator=generator,
            use_cache=not args.no_cache,
        ):
            out.write(piece)
            out.flush()
            last = piece or last
        out.write("" if last.endswith("\n") else "\n")
        out.flush()

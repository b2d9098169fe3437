"""generate.py --probe --patch --circuit --pairs FILE: activation patching and the circuit on
your own clean/corrupt prompt pairs (data/prompt_pairs.py's format), with your own metric,
printed as the probe prints its own (or, with --json, one JSON object). Nothing is saved."""

import json

from analysis.errors import ReversedPairs
from analysis.user_pairs import pairs_study
from data.prompt_pairs import read_prompt_pairs
from reports.circuit_report import format_circuit
from reports.text_reports import format_patching

WORDS = (
    "Your pairs: read below, 'the pronoun' is each prompt's last token, where the metric is read; "
    "'the antecedent' the tokens where clean and corrupt differ; 'clean next' and 'twin's next' "
    "your answer's and other's first tokens (LD = logit(answer) - logit(other))."
)


def add_flags(parser) -> None:
    """--pairs, in the probe's group of flags."""
    parser.add_argument(
        "--pairs",
        metavar="FILE",
        help="with --probe and --patch and/or --circuit: patch on your own clean/corrupt prompt "
        'pairs, a JSONL file of {"clean", "corrupt", "answer", "other"} objects (the metric: '
        "logit(answer) - logit(other) at the last token), instead of the lexicon's twins; "
        "the head scoring, which needs labelled examples, does not run",
    )


def check(args, mode: str) -> None:
    """ValueError for --pairs without what it goes with."""
    if args.pairs is None:
        return
    if mode != "probe" or not (args.patch or args.circuit):
        raise ValueError("--pairs goes with --probe and --patch, --circuit or both")
    if args.probe:
        raise ValueError(
            f"--probe {args.probe} and --pairs {args.pairs} are two inputs; --pairs runs "
            "patching and the circuit on its own file: give --probe without a file"
        )


def show_pairs(run, args, out) -> None:
    """Patching and/or the circuit on args.pairs: the report, or one JSON object."""
    try:
        result = pairs_study(
            run.model, run.tokenizer, read_prompt_pairs(args.pairs), args.patch, args.circuit
        )
    except ReversedPairs as e:  # no fraction of a gap <= 0 is printed as if measured
        raise ValueError(f"--pairs {args.pairs}: {e}") from None
    if args.json:
        out.write(json.dumps(result) + "\n")
        return
    parts = [f"{result['pairs']} pairs from {args.pairs}. {WORDS}"]
    if "patching" in result:
        parts.append(format_patching(result["patching"]))
    if "circuit" in result:
        parts.append(format_circuit(result["circuit"]))
    out.write("\n\n".join(parts) + "\n")

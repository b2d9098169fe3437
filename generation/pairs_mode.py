"""generate.py --pairs FILE: activation patching and the circuit on your own clean/corrupt prompt
pairs (data/prompt_pairs.py's format), with your own metric, printed in the pairs' own terms
(reports/pairs_report.py) or, with --json, as one JSON object. Nothing is saved."""

import json

from analysis.errors import ReversedPairs
from analysis.user_pairs import pairs_study
from cli import fit_width, terminal_width
from data.prompt_pairs import read_prompt_pairs
from reports.pairs_report import format_pairs


def add_flags(parser) -> None:
    """--pairs, a group of its own (it takes the probe's --patch, --circuit and --json)."""
    parser.add_argument_group("your own prompt pairs").add_argument(
        "--pairs",
        metavar="FILE",
        help="activation patching and the circuit on your own clean/corrupt prompt pairs, a "
        'JSONL file of {"clean", "corrupt", "answer", "other"} objects (the metric: '
        "logit(answer) - logit(other) at the last token); --patch or --circuit runs one of them "
        "alone, --json prints one JSON object",
    )


def chosen(args) -> bool:
    return args.pairs is not None


def check(args, mode: str) -> None:
    """ValueError for --pairs given with a flag of another run: the probe, --query, --summary."""
    if not chosen(args):
        return
    if args.probe is not None:
        raise ValueError(
            "--pairs runs on its own, the probe's head scoring needs labelled examples: drop "
            "--probe (--pairs FILE --patch, --circuit or both)"
        )
    if args.query is not None:
        raise ValueError("--pairs reads each prompt's last token; leave --query out")


def show_pairs(run, args, out) -> None:
    """Patching and/or the circuit on args.pairs (both where neither --patch nor --circuit is
    given): the report, or one JSON object."""
    both = not (args.patch or args.circuit)
    try:
        result = pairs_study(
            run.model,
            run.tokenizer,
            read_prompt_pairs(args.pairs),
            patch=args.patch or both,
            circuit=args.circuit or both,
        )
    except ValueError as e:  # a pair the metric cannot read, reversed pairs: named by the file
        if isinstance(e, ReversedPairs) or str(args.pairs) not in str(e):
            raise ValueError(f"--pairs {args.pairs}: {e}") from None
        raise  # read_prompt_pairs' own, which names the file
    if args.json:
        out.write(json.dumps(result) + "\n")
    else:
        out.write(fit_width(format_pairs(result, args.pairs), terminal_width(out)) + "\n")

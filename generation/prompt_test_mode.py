"""generate.py --test-prompt PROMPT --answer ANSWER: TransformerLens's test_prompt, where the
model ranks each token of the answer after the prompt (analysis/answer_rank.py), printed as
TransformerLens prints it, or with --json as one JSON object."""

import json

from analysis.answer_rank import test_prompt
from cli import terminal_width
from reports.prompt_report import format_test_prompt


def add_flags(parser) -> None:
    """The test_prompt group of generate.py's flags."""
    add = parser.add_argument_group("test a prompt (TransformerLens's test_prompt)").add_argument
    add(
        "--test-prompt",
        metavar="PROMPT",
        help="rank each token of --answer after PROMPT: its rank (0 = the model's first "
        "choice), logit and probability, and the 10 tokens the model ranks first there",
    )
    add(
        "--answer", metavar="TEXT", help='with --test-prompt: the expected continuation (" hooted")'
    )


def chosen(args) -> bool:
    return args.test_prompt is not None


def check(args, mode: str) -> None:
    """ValueError for --answer without --test-prompt, or the other way round."""
    if (args.test_prompt is None) != (args.answer is None):
        raise ValueError("--test-prompt PROMPT and --answer TEXT go together: give both")
    if chosen(args) and mode != "test_prompt":
        raise ValueError(
            "--test-prompt is a run of its own; give it without --attention or --probe"
        )


def show_test_prompt(run, args, out) -> None:
    result = test_prompt(run.model, run.tokenizer, args.test_prompt, args.answer)
    if args.json:
        out.write(json.dumps(result) + "\n")
        return
    isatty = getattr(out, "isatty", None)
    width = terminal_width(out) if isatty and isatty() else None  # piped: a list is one line
    out.write(format_test_prompt(result, width) + "\n")

"""generate.py's coreference probe: its flags and their checks, its report (or JSON), and the
built-in sets' result kept in the run folder for the attention page."""

import json
import os
import shutil

from analysis.coreference import study
from analysis.errors import NothingToMeasure
from checks import positive_int
from data.pronouns import NATURAL
from reports.text_reports import study_report
from runs.folder import PROBE_FILE, save_probe, saved_probe

PERMUTATIONS = 1000  # the probe's label shuffles unless --permutations says otherwise


def add_flags(parser):
    """The coreference probe's group of generate.py's flags."""
    add = parser.add_argument_group("coreference probe").add_argument
    add(
        "--probe",
        nargs="?",
        const="",
        metavar="FILE",
        help="score every head: how often does the pronoun attend most to its antecedent? "
        "(default: the built-in dev and test sets, the result saved to the run folder's "
        f"{PROBE_FILE}; natural: the hand-written natural sentences, the head chosen on the "
        "built-in dev set; FILE: your JSONL examples; neither saved)",
    )
    add("--json", action="store_true", help="with --probe: print one JSON object")
    add(
        "--patch",
        action="store_true",
        help="with --probe: also activation patching on corrupted twins (each head's output and "
        "the residual stream at the antecedent, between, and the pronoun, patched clean -> "
        "corrupted)",
    )
    add(
        "--circuit",
        action="store_true",
        help="with --probe: also the circuit: every edge between the embeddings, heads (query, "
        "key, value apart), MLPs and the logits scored by edge attribution patching on "
        "corrupted twins, checked by real patching, pruned to the fewest that keep 90%% of "
        "the logit difference; for the whole set and each kind of sentence; and beside it the "
        "choice circuit on choice twins (both candidates kept, the answer flipped): choice "
        "accuracy, the deciding heads, the fewest edges that keep 80%%",
    )
    add(
        "--no-causal",
        action="store_true",
        help="with --probe (or --html when it runs the probe): skip the causal tests "
        "(antecedent and distractor knockout, head ablation; about a second for the default "
        "model)",
    )
    add(
        "--permutations",
        type=int,
        metavar="N",
        help=f"label shuffles for the probe's p-value (default {PERMUTATIONS}), with --probe "
        "(or --html when it runs the probe)",
    )


def check(args, mode):
    """ValueError for the probe's flags given when `mode` is another, and a bad --permutations."""
    if args.json and mode not in ("probe", "test_prompt"):
        raise ValueError("--json goes with --probe or --test-prompt")
    if args.circuit and mode != "probe":
        raise ValueError("--circuit goes with --probe")
    if args.patch and mode != "probe":
        raise ValueError("--patch goes with --probe")
    if args.no_causal and mode != "probe" and args.html is None:
        raise ValueError("--no-causal goes with --probe (or --html)")
    if args.permutations is not None:
        if mode != "probe" and args.html is None:
            raise ValueError("--permutations goes with --probe (or --html)")
        positive_int("--permutations", args.permutations)


def permutations(args):
    """The label shuffles of the probe's permutation test: --permutations, else PERMUTATIONS."""
    return PERMUTATIONS if args.permutations is None else args.permutations


def show_probe(run, args, ckpt, out, err):
    """Score every head on args.probe's examples and print the report (or, with --json, one JSON
    object); the built-in sets' result is kept in the run folder at `ckpt`."""
    query = args.query or "pronoun"
    if args.probe == NATURAL and os.path.lexists(NATURAL):
        err.write(
            f"note: --probe {NATURAL} reads the built-in natural set, not the file "
            f"{os.path.join(os.curdir, NATURAL)} here; give --probe ./{NATURAL} to read that file\n"
        )
    result = study_or_say(
        run.model,
        run.tokenizer,
        args.probe,
        permutations(args),
        causal=not args.no_causal,
        patch=args.patch,
        circuit=args.circuit,
        query=query,
    )
    out.write(
        (json.dumps(result) if args.json else fit_width(study_report(result), report_width(out)))
        + "\n"
    )
    if not args.probe and query == "pronoun":  # the built-in sets: what --html outlines
        keep_probe(run, ckpt, result, err)
    elif args.probe == NATURAL:  # kept beside the built-in sets' result, for the page
        saved = saved_probe(run, ckpt)
        if saved is not None:
            keep_probe(run, ckpt, {**saved, NATURAL: result}, err)


def study_or_say(*args, **kwargs):
    """analysis.coreference.study, its error where no example can be tested by the causal tests
    carrying the flag that skips them."""
    try:
        return study(*args, **kwargs)
    except NothingToMeasure as e:
        if e.analysis != "causal":
            raise
        raise ValueError(f"{e}; --no-causal skips the causal tests") from None


def keep_probe(run, ckpt, result, err) -> bool:
    """Save the built-in probe's result in the run folder for --html; whether it was. A folder
    that cannot take it is a note, not an error: the result has been shown."""
    try:
        save_probe(run, ckpt, result)
    except ValueError as e:
        err.write(f"note: the probe's result was not saved: {e}\n")
        return False
    return True


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
        out += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_on_hyphens=False,
        ) or [""]
    return "\n".join(out)

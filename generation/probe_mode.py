"""generate.py's coreference probe: its flags and their checks, its report (or JSON, or with
--summary the verdict), and the built-in sets' result kept in the run folder for the attention
page, with its full report beside it."""

import json
import os

from analysis.coreference import study
from analysis.errors import NothingToMeasure
from analysis.results import study_parts
from checks import positive_int
from cli import PIPED_WIDTH, fit_width, terminal_width
from data.pronouns import NATURAL
from reports.text_reports import parts_said, saved_report, study_report
from reports.verdict_report import format_natural, format_verdict
from runs.folder import (
    PROBE_FILE,
    REPORT_FILE,
    probe_path,
    save_probe,
    save_report,
    saved_probe,
    story_mix,
)

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
        "(default: the built-in dev and test sets, drawn in the run's pronoun language "
        "(its data.pronouns), the result saved to the run folder's "
        f"{PROBE_FILE}; natural: the hand-written natural sentences, the head chosen on that "
        "dev set; FILE: your JSONL examples; neither saved)",
    )
    add("--json", action="store_true", help="with --probe or --pairs: print one JSON object")
    add(
        "--summary",
        action="store_true",
        help="the short form in the terminal, the whole in a file: with --probe or --probe "
        "natural, a verdict of a few lines (the best head's cand@1 beside the baselines and its "
        "p-value, the knockout, the model's own answer, the circuits) instead of the full "
        f"report, which is in the run folder's {REPORT_FILE}, beside {PROBE_FILE} (every "
        "--probe that saves the result writes it); with --attention --html FILE, the first "
        "sentence's maps only, every sentence's on the page",
    )
    add(
        "--patch",
        action="store_true",
        help="with --probe: also activation patching on corrupted twins (each head's output and "
        "the residual stream at the antecedent, between, and the pronoun, patched clean -> "
        "corrupted); with --pairs FILE: that patching alone on your pairs",
    )
    add(
        "--circuit",
        action="store_true",
        help="with --probe: also the circuit: every edge between the embeddings, heads (query, "
        "key, value apart), MLPs and the logits scored by edge attribution patching on "
        "corrupted twins, checked by real patching, pruned to the fewest that keep 90%% of "
        "the logit difference; for the whole set and each kind of sentence; and beside it the "
        "choice circuit on choice twins (both candidates kept, the answer flipped): choice "
        "accuracy, the deciding heads, the fewest edges that keep 80%%; with --pairs FILE: "
        "that circuit alone on your pairs",
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
    if args.json and mode not in ("probe", "pairs", "test_prompt"):
        raise ValueError("--json goes with --probe, --pairs or --test-prompt")
    if args.summary:
        check_summary(args, mode)
    if args.circuit and mode not in ("probe", "pairs"):
        raise ValueError("--circuit goes with --probe or --pairs")
    if args.patch and mode not in ("probe", "pairs"):
        raise ValueError("--patch goes with --probe or --pairs")
    if args.no_causal and mode != "probe" and args.html is None:
        raise ValueError("--no-causal goes with --probe (or --html)")
    if args.permutations is not None:
        if mode != "probe" and args.html is None:
            raise ValueError("--permutations goes with --probe (or --html)")
        positive_int("--permutations", args.permutations)


def check_summary(args, mode):
    """ValueError where --summary has no file to leave the rest in: it goes with the probe of
    the built-in sets (or natural), read at the pronoun, whose report the run folder keeps, or
    with the page (attention_mode checks that one)."""
    if mode == "attention":
        return
    if mode == "pairs":
        raise ValueError("--summary goes with the probe's sentences, not --pairs")
    if mode != "probe":
        raise ValueError("--summary goes with --probe (or --attention --html FILE)")
    if args.json:
        raise ValueError("--summary and --json are two outputs; give one of them")
    if args.probe not in ("", NATURAL) or (args.query or "pronoun") != "pronoun":
        raise ValueError(
            f"--summary leaves the full report in the run folder's {REPORT_FILE}, which only "
            "--probe (or --probe natural) read at the pronoun writes; leave --summary out to "
            "print the report"
        )


def permutations(args):
    """The label shuffles of the probe's permutation test: --permutations, else PERMUTATIONS."""
    return PERMUTATIONS if args.permutations is None else args.permutations


def show_probe(run, args, ckpt, out, err):
    """Score every head on args.probe's examples and print the report (or, with --json, one JSON
    object; with --summary, the verdict); the built-in sets' result is kept in the run folder
    at `ckpt`, with the full report."""
    query = args.query or "pronoun"
    if args.probe == NATURAL and os.path.lexists(NATURAL):
        err.write(
            f"note: --probe {NATURAL} reads the built-in natural set, not the file "
            f"{os.path.join(os.curdir, NATURAL)} here; give --probe ./{NATURAL} to read that file\n"
        )
    result = kept_result(run, ckpt, args) if args.summary else None
    report = probe_path(ckpt).with_name(REPORT_FILE) if result is not None else None
    if report is None or not report.is_file():  # not measured and reported before: measure
        report = None
        if result is None:
            result = study_or_say(
                run.model,
                run.tokenizer,
                args.probe,
                permutations(args),
                parts=parts_asked(args),
                query=query,
                mix=story_mix(run),
            )
    if args.summary:
        report = report or keep_result(run, ckpt, args, result, err)
        if report is not None:
            out.write(f"{fit_width(verdict(run, ckpt, args, result), terminal_width(out))}\n")
            out.write(f"full report: {report}\n")
            return
        err.write(f"note: {unkept(run, ckpt, args)}, so the full report is printed here\n")
    # The full report: asked for, or with --summary where it could not be kept (shown, not lost).
    text = json.dumps(result) if args.json else fit_width(study_report(result), terminal_width(out))
    out.write(text + "\n")
    if not args.summary:
        keep_result(run, ckpt, args, result, err)


def kept_result(run, ckpt, args):
    """The result --summary would measure, where the run folder already keeps it: the built-in
    sets' (or the natural sentences') saved for this very checkpoint (saved_probe), with every
    part the flags ask for and as many shuffles. None: measure it. The measures are
    deterministic, so the verdict is the same either way; `make demo` measures once and says
    the verdict after the map."""
    saved = saved_probe(run, ckpt)
    if saved is None or args.probe not in ("", NATURAL):
        return None
    study = saved.get("natural") if args.probe == NATURAL else saved
    if not isinstance(study, dict) or study.get("permutations") != permutations(args):
        return None
    return study if set(parts_asked(args)) <= set(study_parts(study)) else None


def verdict(run, ckpt, args, result):
    """--summary's verdict: the study's; for the natural sentences, kept beside the built-in
    sets' result, the same head's numbers beside theirs."""
    if args.probe == NATURAL:
        return format_natural(result, saved_probe(run, ckpt))
    return format_verdict(result)


def unkept(run, ckpt, args):
    """Why the run folder at `ckpt` keeps no report of this result (for --summary's note)."""
    if probe_path(ckpt) is None:
        return f"{ckpt} is not a run folder train.py wrote"
    if args.probe == NATURAL and saved_probe(run, ckpt) is None:
        return (
            "the natural sentences' result is kept beside the built-in sets', and this "
            "checkpoint has none yet (--probe saves it)"
        )
    return "the run folder did not take it"


def keep_result(run, ckpt, args, result, err):
    """Keep the result in the run folder where it is the built-in sets' (or natural's, beside
    theirs); the full report's path, or None where nothing was kept."""
    if not args.probe and (args.query or "pronoun") == "pronoun":  # what --html outlines
        return keep_probe(run, ckpt, result, err)[0]
    if args.probe == NATURAL:  # kept beside the built-in sets' result, for the page
        return keep_probe(run, ckpt, result, err, natural=True)[0]
    return None


def parts_asked(args):
    """The study's parts (analysis.results.PARTS) the flags ask for: the causal tests unless
    --no-causal, patching with --patch, the circuits with --circuit."""
    asked = {"causal": not args.no_causal, "patching": args.patch, "circuit": args.circuit}
    return [part for part, on in asked.items() if on]


def study_or_say(*args, **kwargs):
    """analysis.coreference.study, its error where no example can be tested by the causal tests
    carrying the flag that skips them."""
    try:
        return study(*args, **kwargs)
    except NothingToMeasure as e:
        if e.analysis != "causal":
            raise
        raise ValueError(f"{e}; --no-causal skips the causal tests") from None


def keep_probe(run, ckpt, result, err, natural=False):
    """Save the built-in probe's result (with `natural`, the natural sentences', beside it) in
    the run folder for --html (probe.json: runs.folder.save_probe, which keeps the parts saved
    before that this run did not measure) and the full report of what it now holds beside it
    (report.txt, as a pipe shows it). (the report's path, probe.json's study), each None where
    the folder is not a run folder or cannot take it: that is a note, not an error, as the
    result has been measured (and is shown)."""
    try:
        kept = save_probe(run, ckpt, result, natural=natural)
    except ValueError as e:
        err.write(f"note: the probe's result was not saved: {e}\n")
        return None, None
    if kept is None:
        return None, None
    whose = "the natural sentences' " if natural else ""
    if kept.kept:
        err.write(
            f"note: {probe_path(ckpt)} keeps {whose}{parts_said(kept.kept)} measured before on "
            f"this checkpoint; {REPORT_FILE} and the page show them beside this run's\n"
        )
    if kept.dropped:
        err.write(
            f"note: {probe_path(ckpt)} held {parts_said(kept.dropped)} of another checkpoint, "
            "other examples or an older format; replaced by this run's result\n"
        )
    try:
        report = saved_report(kept.study, str(ckpt))
        return save_report(ckpt, fit_width(report, PIPED_WIDTH)), kept.study
    except ValueError as e:
        err.write(f"note: the probe's report was not saved: {e}\n")
        return None, kept.study

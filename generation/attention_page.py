"""generate.py --attention --html: the page of every head's map. Its path checked before anything
is measured, the probe's result for it (saved, or run now and saved), the page written with the
run's facts and the probe's best head outlined."""

import os
from pathlib import Path

from analysis.probe import beats_chance
from configs.paths import data_caches
from data.pronouns import DEFAULT_COUNT
from generation.probe_mode import keep_probe, parts_asked, permutations, study_or_say
from reports.html import sentence_page
from reports.page_writer import Page, write_html
from runs.folder import CONFIG_FILE, METRICS_FILE, probe_path, read_metrics, story_mix
from runs.output_path import check_output_path
from storage.atomic import check_writable


def page_path(args, ckpt):
    """Check args.html, the page's file, before anything is measured (the probe may take
    minutes): a trailing slash means a folder, and the page goes in it."""
    if args.html.endswith(("/", os.sep)):
        args.html = str(Path(args.html) / "attention.html")
    caches = data_caches(Path(ckpt) / CONFIG_FILE if ckpt else None)
    check_output_path(args.html, ckpt, (".html", ".htm"), [args.attention_file], caches)
    check_writable(args.html)


def page_probe(run, ckpt, args, err, saved=None):
    """The probe's result for the page: `saved` for this checkpoint, else run now (and saved)
    unless --no-probe; None when there is none."""
    if saved is not None or args.no_probe:
        return saved
    path = probe_path(ckpt)
    tests = "" if args.no_causal else " and its causal tests"
    err.write(
        f"note: running the probe{tests} on its {2 * DEFAULT_COUNT} built-in sentences "
        "for the head to outline (--no-probe skips it)\n"
    )
    # As --probe runs it, so the page's p-value (and the result saved for next time) is the same.
    result = study_or_say(
        run.model,
        run.tokenizer,
        permutations=permutations(args),
        parts=parts_asked(args),
        mix=story_mix(run),
    )
    report, saved = keep_probe(run, ckpt, result, err) if path else (None, None)
    if report:  # else keep_probe said why it is not
        err.write(f"note: the probe's result is saved to {path} for next time\n")
    return saved or result  # what probe.json holds: parts saved before may be kept beside it


def write_page(run, args, analysed, ckpt, out, found=None):
    """The page of every head's map at args.html (checked by page_path), the probe's best head
    outlined; `found` is the probe result for this checkpoint (page_probe's), or None."""
    found = found or {}
    best = found.get("best_head") if beats_chance(found) else None
    page = Page(
        checkpoint=ckpt,
        step=run.ckpt.get("step"),
        val_loss=run.ckpt.get("best_val_loss"),
        records=read_metrics(Path(ckpt) / METRICS_FILE),
    )
    write_html(args.html, [sentence_page(a) for a in analysed], found, page)
    none = "none, no head beats chance here" if found else "none (--no-probe)"
    outlined = f"layer {best['layer']} head {best['head']}" if best else none
    out.write(f"wrote {args.html} (outlined, the probe's best head: {outlined})\n")

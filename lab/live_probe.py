"""The coreference probe while a run trains: whether it is on and how often (a log-spaced
schedule besides every interval, since a head forms early and fast), the labelled sentences it
scores, and each probe's record in metrics.jsonl and line on the console; at the end, each
kind's acquisition in a line (reports/kind_curve.py). A watcher of the training loop
(training/watchers.py): training itself knows nothing of it."""

import time

import torch

from analysis.choice import choice_by_kind
from analysis.choice_pairs import choice_pairs
from analysis.probe import head_scores
from data.mix_spec import mix_entries
from data.pronouns import DECIDED_BY, NATURAL, read_examples
from data.pronouns import examples as pronoun_examples
from data.pronouns import natural as natural_examples
from reports.kind_curve import kind_words
from training.watchers import Watcher, paused


def holds_pronouns(config):
    """Whether the built-in pronoun corpus is (part of) the training data."""
    return any(e.source == "pronouns" for e in mix_entries(config.data.mix, config.data.source))


def probe_interval(config):
    """Steps between probes: train.probe_interval; unset, every evaluation when the data holds
    the pronoun corpus (whose dev set the probe then scores) or a probe_file is given, else 0."""
    settings = config.train
    if settings.probe_interval is not None:
        return settings.probe_interval
    return settings.eval_interval if holds_pronouns(config) or settings.probe_file else 0


PROBE_LOG_POINTS = 12  # probes spaced evenly in log(step), besides every interval


def probe_schedule(max_iters, interval, points=PROBE_LOG_POINTS):
    """The steps after which training probes: every `interval` steps and the last, plus `points`
    steps spaced evenly in log(step) from 1 to max_iters, since a head forms early and fast; none
    when interval is 0 (the probe is off)."""
    if not interval:
        return frozenset()
    spaced = {max(1, round(max_iters ** (k / points))) for k in range(1, points + 1)}
    return frozenset(range(interval, max_iters + 1, interval)) | spaced | {max_iters}


def probe_examples(config, runtime, console):
    """The labelled sentences the probe scores heads on, or None (probe off). A missing or
    malformed train.probe_file is a one-line error before anything is trained."""
    settings = config.train
    if not probe_interval(config) or not runtime.is_main:
        return None
    if settings.probe_file == NATURAL:
        return natural_examples()
    if settings.probe_file:
        return read_examples(settings.probe_file, named="train.probe_file ")
    if holds_pronouns(config):  # in the language the run trains on
        return pronoun_examples("dev", mix=config.data.pronouns.story_mix)
    console.note(
        "note: train.probe_interval is on, but this corpus has no labelled pronouns; give "
        "train.probe_file (labelled JSONL, as for generate.py --probe) to watch the heads"
    )
    return None


class LiveProbe(Watcher):
    """Every head's cand@1 on the probe's sentences at the steps of probe_schedule, and each
    kind's cand@1 and choice, in metrics.jsonl and on the console (rank 0; the others wait for
    it at the next step's all-reduce)."""

    def __init__(self):
        self.examples = None  # the labelled sentences (rank 0; None: the probe is off)
        self.steps = frozenset()
        self.choices = None  # their choice twins under the run's tokenizer, made at the first

    def prepare(self, config, runtime, console):
        self.examples = probe_examples(config, runtime, console)
        self.steps = probe_schedule(config.train.max_iters, probe_interval(config))

    def after_step(self, job, progress):
        if self.examples and progress.step in self.steps:
            settings = job.config.train
            shown = (
                progress.step % settings.eval_interval == 0 or progress.step == settings.max_iters
            )
            if self.choices is None:  # the tokenizer and the window stay for the whole run
                block_size = job.raw_model.config.block_size
                self.choices = choice_pairs(job.data.tokenizer, self.examples, block_size)
            probe_heads(job, progress, self.examples, shown, self.choices)

    def on_finish(self, job, progress):
        """The run's last words on the probe: each kind's acquisition in one line (when its
        choice first reached the targets, and whether it held), where the probe ran."""
        if self.examples and job.runtime.is_main:
            for line in kind_words(job.metrics.records()):
                job.console.say(f"probe, {line}")


def probe_heads(job, progress, examples, shown=True, choices=None):
    """Every head's cand@1 on `examples` now, and for each kind the best head's cand@1 on its
    items and the model's choice on its twins (`choices`, analysis.choice_pairs.choice_pairs'
    of these examples; None: not measured): a record in metrics.jsonl, and a line on the console
    when `shown` (the loop shows it beside each evaluation; probe.png draws them all). The
    record's `seconds` are the training's so far (since the loop started, as the eval lines
    count them), before this probe's own time."""
    if not job.runtime.is_main:
        return
    started = time.perf_counter()
    seconds = started - progress.started
    job.raw_model.eval()
    with torch.inference_mode():
        scores = head_scores(job.raw_model, job.data.tokenizer, examples)
        chosen = choice_by_kind(job.raw_model, choices) if choices else {}
    job.raw_model.train()
    layer, head = scores["best_head"]
    job.metrics.log(
        step=progress.step,
        seconds=seconds,
        probe_best=scores["best"],
        probe_best_head=scores["best_head"],
        probe_heads=scores["heads"],
        probe_baselines=scores["baselines"],
        probe_by_kind=by_kind(scores["by_kind"], chosen),
    )
    b = scores["baselines"]
    if shown:
        job.console.say(
            f"step {progress.step}: probe best head L{layer} H{head} {scores['best']:.1%} "
            f"(baselines: first {b['first']:.1%}, nearest {b['nearest']:.1%})"
        )
    paused(progress, started)


NO_CHOICE = {"twins": 0, "accuracy": None, "flip": None}


def by_kind(heads, chosen):
    """The record's probe_by_kind: for each kind, head_scores' by_kind row beside
    choice_by_kind's (accuracy and flip None where the kind has no twin)."""
    kinds = [k for k in DECIDED_BY if k in heads or k in chosen]
    return {k: heads.get(k, {"examples": 0}) | chosen.get(k, NO_CHOICE) for k in kinds}

"""A watcher that stops training once the live probe finds every kind resolved: at the first
probe where each kind's choice accuracy and flip reach their targets
(analysis.acquisition.first_resolved). `bench.py resolve` trains with it, to time how long a
config takes to learn what decides each kind; train.py does not."""

from analysis.acquisition import ACCURACY, FLIP, first_resolved
from lab.live_probe import probe_interval, probe_schedule
from training.runtime import any_process
from training.watchers import Watcher


class StopWhenResolved(Watcher):
    """Ask the loop to stop (saved, as at any stop) after the probe that resolves the run; the
    records are read at the probe's steps only, on rank 0, and every process stops together."""

    def __init__(self, accuracy: float = ACCURACY, flip: float = FLIP):
        self.accuracy, self.flip = accuracy, flip
        self.steps = frozenset()

    def prepare(self, config, runtime, console):
        self.steps = probe_schedule(config.train.max_iters, probe_interval(config))

    def after_step(self, job, progress):
        if progress.step not in self.steps:
            return None
        found = None
        if job.runtime.is_main:  # the live probe, a watcher before it, wrote this step's record
            found = first_resolved(job.metrics.records(), self.accuracy, self.flip)
        if any_process(found is not None, job.runtime):
            return (
                f"resolved: every kind's choice accuracy >= {self.accuracy:.0%} and flip >= "
                f"{self.flip:.0%}"
            )
        return None

"""What the lab plugs into the training loop (training/loop.py), and all it can do there. A
watcher overrides what it needs:

    prepare(config, runtime, console)   before the run folder is touched: check inputs early
    after_step(job, progress)           after every step (the live probe runs on its schedule);
                                        may return a reason to stop now (saved first), else None
    after_eval(job, progress)           after an evaluation (progress.final): the plots
    on_finish(job, progress)            the run reached train.max_iters

The lab's watchers are the live probe and the plots (lab/), and bench.py resolve's stop.
"""

import time


class Watcher:
    """A watcher that does nothing; subclasses override what they watch."""

    def prepare(self, config, runtime, console):
        pass

    def after_step(self, job, progress):
        return None

    def after_eval(self, job, progress):
        pass

    def on_finish(self, job, progress):
        pass


def paused(progress, started):
    """Count the seconds since `started` as time the run did not train (tokens/s leaves them
    out): an evaluation, a probe."""
    progress.paused += time.perf_counter() - started

"""What watches a training run from outside its loop: the loop (training/loop.py) tells each
watcher what happened, and a watcher may ask it to stop. A watcher overrides what it needs:

    prepare(config, runtime, console)   before the run folder is touched: check inputs early
    on_start(job, progress)             the job is built, the first step comes next
    on_log(job, progress, record)       a log line: {"step", "loss", "lr", "tokens_per_sec", "mfu"}
    on_eval(job, progress, record)      an evaluation: {"train_loss", "val_loss", ...}
    after_step(job, progress)           after every step (the live probe runs on its schedule)
    stop_reason(job, progress)          a reason to stop now (saved first), or None
    on_finish(job, progress)            the run reached train.max_iters
    running(job, progress)              a context the loop runs inside (signal handlers)

training/ brings its own (the console and metrics.jsonl: `Record`; Ctrl-C and torchrun's
stop-together; train.run_steps); the lab adds the live probe and the plots (lab/).
"""

import contextlib
import time

from training.console import eval_line
from training.runtime import any_process
from training.stopping import StopRequests


class Watcher:
    """A watcher that does nothing; subclasses override what they watch."""

    def prepare(self, config, runtime, console):
        pass

    def on_start(self, job, progress):
        pass

    def on_log(self, job, progress, record):
        pass

    def on_eval(self, job, progress, record):
        pass

    def after_step(self, job, progress):
        pass

    def stop_reason(self, job, progress):
        return None

    def on_finish(self, job, progress):
        pass

    def running(self, job, progress):
        return contextlib.nullcontext()


class Watchers(Watcher):
    """Several watchers as one, told in order; the first reason to stop wins."""

    def __init__(self, watchers):
        self.watchers = list(watchers)

    def prepare(self, config, runtime, console):
        for w in self.watchers:
            w.prepare(config, runtime, console)

    def on_start(self, job, progress):
        for w in self.watchers:
            w.on_start(job, progress)

    def on_log(self, job, progress, record):
        for w in self.watchers:
            w.on_log(job, progress, record)

    def on_eval(self, job, progress, record):
        for w in self.watchers:
            w.on_eval(job, progress, record)

    def after_step(self, job, progress):
        for w in self.watchers:
            w.after_step(job, progress)

    def stop_reason(self, job, progress):
        reasons = (w.stop_reason(job, progress) for w in self.watchers)
        return next((r for r in reasons if r), None)

    def on_finish(self, job, progress):
        for w in self.watchers:
            w.on_finish(job, progress)

    @contextlib.contextmanager
    def running(self, job, progress):
        with contextlib.ExitStack() as stack:
            for w in self.watchers:
                stack.enter_context(w.running(job, progress))
            yield


class Record(Watcher):
    """metrics.jsonl (and the trackers behind it) and the console's lines, on rank 0."""

    def on_log(self, job, progress, record):
        if job.runtime.is_main:
            job.metrics.log(**record)
            job.console.log(**record)

    def after_step(self, job, progress):
        job.console.step()

    def on_eval(self, job, progress, record):
        if job.runtime.is_main:
            job.metrics.log(step=progress.step, **record)
            seconds = time.perf_counter() - progress.started
            job.console.say(eval_line(progress.step, record, progress.tokens_per_sec, seconds))

    @contextlib.contextmanager
    def running(self, job, progress):
        job.console.open_bar(job.config.train.max_iters, progress.step)
        try:
            yield
        finally:
            job.console.close()  # before any message or error, so none lands inside the bar


class SignalStop(Watcher):
    """Ctrl-C or SIGTERM: stop after this step, saved (a second one: at once, unsaved). Under
    torchrun each process gets the signal on its own, maybe a step apart: all stop after the
    step in which any one got it, or the others would wait for it forever."""

    def __init__(self):
        self.requests = None

    @contextlib.contextmanager
    def running(self, job, progress):
        with StopRequests() as self.requests:
            try:
                yield
            except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: out at once
                job.console.close()
                job.console.say(f"\nstopped without saving; {job.checkpoint_state(progress)}")
                raise

    def stop_reason(self, job, progress):
        if any_process(self.requests.signal, job.runtime):
            return f"interrupted ({self.requests.signal or 'on another process'})"
        return None


class RunSteps(Watcher):
    """train.run_steps: stop after that many steps of this invocation."""

    def stop_reason(self, job, progress):
        n = job.config.train.run_steps
        if n and progress.step - progress.start_step >= n:
            return f"stopped after train.run_steps={n} steps"
        return None


def paused(progress, started):
    """Count the seconds since `started` as time the run did not train (tokens/s leaves them
    out): an evaluation, a probe."""
    progress.paused += time.perf_counter() - started

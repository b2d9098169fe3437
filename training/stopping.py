"""How a run stops early: the error that ends it (TrainingStopped), the signals that ask it to
stop and save (StopRequests), train.run_steps, the context the loop runs in (`guarded`), and
what a stop says (`stopped`). What a stop leaves in the run folder: Job.checkpoint_state."""

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from training.job import Job, Progress
from training.runtime import any_process


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


def lost_steps(progress: Progress) -> str:
    """What a failed save loses: the steps since the checkpoint on disk, which a resume redoes."""
    if progress.saved_step is None:
        return f"steps 1-{progress.step} are lost; the same command starts the run again"
    return (
        f"steps {progress.saved_step + 1}-{progress.step} are lost; the same command resumes "
        f"from the checkpoint of step {progress.saved_step}"
    )


@contextlib.contextmanager
def losing(progress: Progress) -> Iterator[None]:
    """A write or a watcher that fails while the loop runs (a plot on a full disk, a probe)
    stops the run as it did, its message saying which steps are lost."""
    try:
        yield
    except OSError as e:  # one line, as train.py says an OSError, with the steps it costs
        where = f" {e.filename}" if e.filename else ""
        raise ValueError(
            f"cannot write{where}: {e.strerror or e}; {lost_steps(progress)}"
        ) from None
    except ValueError as e:
        raise ValueError(f"{e}; {lost_steps(progress)}") from None


class StopRequests:
    """Ctrl-C (SIGINT) or SIGTERM (what schedulers and `docker stop` send) asks the loop to stop
    at the end of the current step and save; a second one stops at once, without saving."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def _handle(self, signum, frame):
        if self.signal:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        print(
            f"\n{self.signal}: saving a checkpoint after this step (again to quit without saving)",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False


class Stops:
    """Why a run stops before train.max_iters, asked after every step: Ctrl-C or SIGTERM, or
    train.run_steps. Under torchrun each process gets a signal on its own, maybe a step apart:
    all stop after the step in which any one got it, or the others would wait for it forever."""

    def __init__(self, requests: StopRequests):
        self.requests = requests

    def reason(self, job: Job, progress: Progress) -> str | None:
        if any_process(self.requests.signal, job.runtime):
            return f"interrupted ({self.requests.signal or 'on another process'})"
        n = job.config.train.run_steps
        if n and progress.step - progress.start_step >= n:
            return f"stopped after train.run_steps={n} steps"
        return None


@contextlib.contextmanager
def guarded(job: Job, progress: Progress) -> Iterator[Stops]:
    """What the loop runs inside: its progress bar (closed before any message or error, so none
    lands inside it), Ctrl-C and SIGTERM (a second one: out at once, unsaved), and a failed
    write's lost steps (`losing`). Yields the loop's Stops."""
    job.console.open_bar(job.config.train.max_iters, progress.step)
    try:
        with StopRequests() as requests:
            try:
                with losing(progress):
                    yield Stops(requests)
            except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: out at once
                job.console.close()
                job.console.say(f"\nstopped without saving; {job.checkpoint_state(progress)}")
                raise
    finally:
        job.console.close()


def stopped(job: Job, progress: Progress, reason: str, temporary: bool = False) -> dict:
    """Say where a run stopped early stands; an interrupt goes on as a KeyboardInterrupt. A
    temporary folder (`temporary`) is said to go, never offered for a resume."""
    settings, interrupted = job.config.train, reason.startswith("interrupted")
    if temporary:
        job.console.say(
            f"{reason}, at step {progress.step} of {settings.max_iters}; its folder "
            f"{job.out_dir} is temporary and is removed"
        )
    elif interrupted:
        job.console.say(
            f"\n{reason}: checkpoint of step {progress.step} saved in {job.out_dir}; "
            "run the same command to resume"
        )
    else:
        job.console.say(
            f"{reason}, at step {progress.step} of {settings.max_iters}: checkpoint saved in "
            f"{job.out_dir}; run the same command to go on"
        )
    if interrupted:
        raise KeyboardInterrupt
    return {"step": progress.step, "stopped": True}

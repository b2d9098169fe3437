"""How a run stops early: the error that ends it (TrainingStopped) and the signals that ask it to
stop and save (StopRequests). What a stop leaves in the run folder: Job.checkpoint_state."""

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Protocol


class Steps(Protocol):
    """What lost_steps reads of the loop's Progress (training.job, which imports this module)."""

    step: int
    saved_step: int | None


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


def lost_steps(progress: Steps) -> str:
    """What a failed save loses: the steps since the checkpoint on disk, which a resume redoes."""
    if progress.saved_step is None:
        return f"steps 1-{progress.step} are lost; the same command starts the run again"
    return (
        f"steps {progress.saved_step + 1}-{progress.step} are lost; the same command resumes "
        f"from the checkpoint of step {progress.saved_step}"
    )


@contextlib.contextmanager
def losing(progress: Steps) -> Iterator[None]:
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

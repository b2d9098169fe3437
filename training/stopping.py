"""How a run stops early: the error that ends it (TrainingStopped), the signals that ask it to
stop and save (StopRequests), and what a stop leaves in the run folder (checkpoint_state)."""

import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the hints only: the job imports nothing from here
    from training.job import Job, Progress


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


def checkpoint_state(job: "Job", progress: "Progress") -> str:
    """Where the run's checkpoint stands, for a message that says why the run stopped."""
    if job.aside and not job.aside.published:
        return (
            f"no checkpoint was written; {job.out_dir} still holds the old run, untouched "
            "(a forced restart replaces it only at the new run's first checkpoint)"
        )
    if progress.saved_step is None:
        return f"no checkpoint was written to {job.out_dir}"
    return f"the checkpoint of step {progress.saved_step} in {job.out_dir} is intact"


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

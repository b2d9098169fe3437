"""How a run stops early: the error that ends it (TrainingStopped) and the signals that ask it to
stop and save (StopRequests). What a stop leaves in the run folder: Job.checkpoint_state."""

import signal
import sys
import threading


class TrainingStopped(RuntimeError):
    """The run cannot go on (e.g. the loss stopped being finite); the message says why."""


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

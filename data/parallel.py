"""Work shared out on the CPUs this process may use: how many there are, and a map over items on
threads that keeps their order and bounds what is in flight."""

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor


def usable_cpus() -> int:
    """The number of CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity masks
        return os.cpu_count() or 1


def map_in_order(
    fn: Callable, items: Iterable, workers: int, thread_name: str = "prepare"
) -> Iterator:
    """fn(item) for each item, in the order of `items`, computed on `workers` threads.

    At most 2 * workers items are taken from `items` and not yet yielded (every thread has one
    queued while the caller handles a result), so memory stays bounded whatever the number of
    items. workers == 1 runs fn in the calling thread, one item at a time. thread_name prefixes
    the threads' names.
    """
    if workers == 1:
        yield from map(fn, items)
        return
    window = 2 * workers
    pool = ThreadPoolExecutor(workers, thread_name_prefix=thread_name)
    pending = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) == window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        # On an error or an early close: drop the queued items, wait for the running ones.
        pool.shutdown(cancel_futures=True)

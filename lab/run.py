"""A training run as train.py runs it: the core loop (training/loop.py) with the lab's watchers,
the live probe and the plots. From Python, `lab.run.train(config)` does what `python train.py`
does; `training.loop.train(config)` trains the same weights with neither."""

from lab.live_probe import LiveProbe
from lab.plots import Plots
from training.loop import train as train_core


def train(config, force=False, watchers=(), temporary=False):
    """Train as `config` says, as train.py does: training.loop.train with the live probe and
    the plots, and `watchers` after them (bench.py resolve's stop); return its dict. force:
    start over even if the run folder holds a checkpoint; temporary: the caller removes the
    folder after, so a stop promises no resume."""
    return train_core(config, force, [LiveProbe(), Plots(), *watchers], temporary)

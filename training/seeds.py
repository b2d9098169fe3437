"""The seeds of a run's randomness, functions of (seed, step, ...) alone: a run's data and
dropout depend neither on how many processes share it nor on where it was resumed."""

import torch


def micro_batch_generator(seed: int, step: int, micro: int) -> torch.Generator:
    """The generator that draws micro-batch `micro` of optimizer step `step`.

    Every (step, micro-batch) pair has its own seed, so a run's data depends neither on how many
    processes share the work (rank r takes micro-batches r·A .. r·A + A-1) nor on where it was
    interrupted and resumed: there is no data-order state to save.
    """
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 65_537 + micro)


def dropout_seed(seed: int, step: int, rank: int) -> int:
    """The seed of the default generators (CPU and every GPU) for step `step` on process `rank`.

    Reseeding every step makes dropout a function of (seed, step, rank): a resumed run draws the
    same masks as an uninterrupted one on any device, with no RNG state to save, and processes
    never share masks."""
    return ((seed * 1_000_003 + step) * 8_191 + rank) % (1 << 63)

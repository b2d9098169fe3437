"""Whether a model's sizes can fit in this machine's memory at all, checked with the config: an
absurd `model.n_layer=99999999999999999999` is a one-line refusal, not a MemoryError after the
data is prepared.

The bound is from below, so that no model that fits is refused: the blocks' matrices (12 d² a
block: 4 d² of attention, 8 d² of MLP) and the position tables (block_size x d), without the
vocabulary (the tokenizer's, not known yet) or any activation; BYTES_PER_PARAMETER bytes each
(float32 weights, their gradients and one optimizer moment). Where the machine's memory cannot be
read, nothing is refused.
"""

import os
from dataclasses import asdict

from model.gpt import GPTConfig

BYTES_PER_PARAMETER = 12


def check_model(model) -> None:
    """The model section's checks (GPTConfig's own, then check_fits); ValueError, one line."""
    GPTConfig(vocab_size=1, **asdict(model))
    check_fits(model)


def parameters_at_least(n_layer: int, n_embd: int, block_size: int) -> int:
    """A lower bound on the parameter count of a model of these sizes (exact integers)."""
    return n_layer * 12 * n_embd * n_embd + block_size * n_embd


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


SIZES = ("n_layer", "n_embd", "block_size")  # what parameters_at_least counts from


class TooBig(ValueError):
    """check_fits' refusal; `heaviest` names the size (one of SIZES) that weighs most in it, the
    one to blame."""

    def __init__(self, message: str, heaviest: str):
        super().__init__(message)
        self.heaviest = heaviest


def heaviest_size(model) -> str:
    """The size of SIZES whose value weighs most in the parameter count: set to 1, it shrinks
    parameters_at_least the most (block_size=10**14 beside n_layer=2, n_embd=32)."""
    sizes = {name: getattr(model, name) for name in SIZES}
    return min(SIZES, key=lambda name: parameters_at_least(**{**sizes, name: 1}))


def check_fits(model, memory: int | None = None) -> None:
    """TooBig (a ValueError), one line naming the sizes, where `model` (n_layer, n_embd,
    block_size) cannot be trained in `memory` bytes (None: this machine's)."""
    memory = physical_memory() if memory is None else memory
    params = parameters_at_least(model.n_layer, model.n_embd, model.block_size)
    if memory is None or params * BYTES_PER_PARAMETER <= memory:
        return
    raise TooBig(
        f"n_layer={model.n_layer}, n_embd={model.n_embd}, block_size={model.block_size} make "
        f"at least {_count(params)} parameters, {_count(params * BYTES_PER_PARAMETER // 2**30)} "
        f"GiB to train ({BYTES_PER_PARAMETER} bytes each), more than this machine's "
        f"{memory / 2**30:.0f} GiB of memory; choose smaller sizes",
        heaviest_size(model),
    )


def _count(n: int) -> str:
    """An integer of any size, short: 27,520 or 1.2e+21 (no float could hold 10**400)."""
    digits = str(n)
    if len(digits) <= 9:
        return f"{n:,}"
    return f"{digits[0]}.{digits[1]}e+{len(digits) - 1}"

"""data/loader.py: batch shapes and dtype, shifted targets, reproducible draws."""

import os

import numpy as np
import pytest
import torch

from data.loader import get_batch


def token_file(tmp_path, dtype, n=5000, seed=0, name="train.bin"):
    """A token file of distinct ids, so each window's start can be found from its first id."""
    high = 60_000 if dtype == "uint16" else 1_000_000
    ids = np.random.default_rng(seed).choice(high, size=n, replace=False).astype(dtype)
    path = tmp_path / name
    ids.tofile(path)
    return path, ids


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_windows_are_slices_of_the_file_with_shifted_targets(tmp_path, dtype):
    path, ids = token_file(tmp_path, dtype)
    gen = torch.Generator().manual_seed(0)
    x, y = get_batch(path, dtype, batch_size=6, block_size=16, device="cpu", generator=gen)
    assert x.shape == y.shape == (6, 16)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    raw = ids.astype(np.int64)
    where = {int(v): i for i, v in enumerate(raw)}
    for row_x, row_y in zip(x.numpy(), y.numpy()):
        start = where[int(row_x[0])]
        np.testing.assert_array_equal(row_x, raw[start : start + 16])
        np.testing.assert_array_equal(row_y, raw[start + 1 : start + 17])
    assert x.is_contiguous() and y.is_contiguous()


def test_same_seed_same_batches_other_seed_other_batches(tmp_path):
    path, _ = token_file(tmp_path, "uint16")

    def batches(seed):
        gen = torch.Generator().manual_seed(seed)
        return [get_batch(path, np.uint16, 4, 8, "cpu", gen) for _ in range(3)]

    first, again, other = batches(1), batches(1), batches(2)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again))
    assert not torch.equal(first[0][0], other[0][0])
    assert not torch.equal(first[0][0], first[1][0])  # the generator advances between calls


def test_every_start_can_be_drawn_including_the_last(tmp_path):
    # block_size + 1 tokens: exactly one window fits, and it must end at the last token.
    path = tmp_path / "tiny.bin"
    np.arange(9, dtype=np.uint16).tofile(path)
    x, y = get_batch(path, "uint16", 3, 8, "cpu", torch.Generator().manual_seed(0))
    assert torch.equal(x, torch.arange(8).expand(3, 8))
    assert torch.equal(y, torch.arange(1, 9).expand(3, 8))


def test_file_is_opened_afresh_on_each_call(tmp_path):
    path, _ = token_file(tmp_path, "uint16")
    gen = torch.Generator().manual_seed(0)
    get_batch(path, "uint16", 2, 8, "cpu", gen)
    # Replace the file: a memmap kept from the first call would still show the old tokens.
    np.full(100, 7, dtype=np.uint16).tofile(tmp_path / "new.bin")
    os.replace(tmp_path / "new.bin", path)
    x, y = get_batch(path, "uint16", 2, 8, "cpu", gen)
    assert (x == 7).all() and (y == 7).all()


def test_too_short_file_says_what_to_do(tmp_path):
    path = tmp_path / "short.bin"
    np.arange(8, dtype=np.uint16).tofile(path)
    with pytest.raises(ValueError, match="smaller block_size"):
        get_batch(path, "uint16", 2, 8, "cpu", torch.Generator())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batches_match_cpu_batches(tmp_path):
    path, _ = token_file(tmp_path, "uint16")
    cpu = get_batch(path, "uint16", 4, 8, "cpu", torch.Generator().manual_seed(3))
    gpu = get_batch(path, "uint16", 4, 8, "cuda", torch.Generator().manual_seed(3))
    assert gpu[0].device.type == "cuda" and gpu[0].dtype == torch.int64
    assert torch.equal(gpu[0].cpu(), cpu[0]) and torch.equal(gpu[1].cpu(), cpu[1])

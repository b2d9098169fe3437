"""Random training windows from flat token files written by data.prepare: one file, or a
weighted mixture of files (data.mix) where each window comes from one of them.

B batch size, T block size (tokens per window).
"""

import os

import numpy as np
import torch


def get_batch(
    bin_path: str | os.PathLike,
    dtype,
    batch_size: int,
    block_size: int,
    device: str | torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """batch_size random windows of a token file: (x, y), both int64 of shape (B, T) on device.

    y[b, t] = x[b, t + 1]: the token that follows each input. Window starts are drawn with
    torch.randint from `generator` (a CPU torch.Generator), so a seed fixes the batches and each
    DDP rank can draw its own by seeding its own generator. `dtype` is the file's element type
    (meta["dtype"] of the prepared folder, e.g. "uint16").
    """
    return _to_device(_windows(bin_path, dtype, batch_size, block_size, generator), device)


def get_mixed_batch(
    files: list[tuple[str | os.PathLike, float]],
    dtype,
    batch_size: int,
    block_size: int,
    device: str | torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like get_batch, over several token files given as (path, weight): each window's file is
    drawn by weight, then its start within that file, all from `generator`, so a seed fixes the
    batch. A window never spans two files. One file draws exactly as get_batch does."""
    if len(files) == 1:
        return get_batch(files[0][0], dtype, batch_size, block_size, device, generator)
    weights = torch.tensor([w for _, w in files], dtype=torch.float64)
    choice = torch.multinomial(weights, batch_size, replacement=True, generator=generator)  # (B,)
    windows = torch.empty(batch_size, block_size + 1, dtype=torch.int64)
    for i, (path, _) in enumerate(files):
        rows = (choice == i).nonzero().flatten()
        if len(rows):
            windows[rows] = _windows(path, dtype, len(rows), block_size, generator)
    return _to_device(windows, device)


def _windows(bin_path, dtype, n: int, block_size: int, generator: torch.Generator) -> torch.Tensor:
    """(n, T + 1) int64: n random windows of T + 1 tokens, an input and its shifted target."""
    # A fresh memmap per call, dropped on return: a long-lived one keeps growing the process's
    # mapped pages (nanoGPT's leak, fixed in its PR #428 the same way).
    data = np.memmap(bin_path, dtype=np.dtype(dtype), mode="r")
    if len(data) < block_size + 1:
        raise ValueError(
            f"{bin_path} has {len(data)} tokens, fewer than block_size + 1 = "
            f"{block_size + 1}; use a smaller block_size or prepare more text"
        )
    starts = torch.randint(len(data) - block_size, (n,), generator=generator)
    windows = np.stack([data[i : i + block_size + 1] for i in starts.tolist()]).astype(np.int64)
    del data
    return torch.from_numpy(windows)


def _to_device(windows: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor]:
    # contiguous: x and y are shifted views of one (B, T + 1) tensor; each gets its own copy.
    x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, T), (B, T)
    if torch.device(device).type == "cuda":
        # Pinned host memory lets the copy run asynchronously with the GPU's work.
        return (
            x.pin_memory().to(device, non_blocking=True),
            y.pin_memory().to(device, non_blocking=True),
        )
    return x.to(device), y.to(device)

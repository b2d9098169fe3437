"""Random training windows from a flat token file written by data.prepare.

B batch size, T block size (tokens per window).
"""

import os

import numpy as np
import torch


def get_batch(bin_path: str | os.PathLike, dtype, batch_size: int, block_size: int,
              device: str | torch.device,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """batch_size random windows of a token file: (x, y), both int64 of shape (B, T) on device.

    y[b, t] = x[b, t + 1]: the token that follows each input. Window starts are drawn with
    torch.randint from `generator` (a CPU torch.Generator), so a seed fixes the batches and each
    DDP rank can draw its own by seeding its own generator. `dtype` is the file's element type
    (meta["dtype"] of the prepared folder, e.g. "uint16").
    """
    # A fresh memmap per call, dropped on return: a long-lived one keeps growing the process's
    # mapped pages (nanoGPT's leak, fixed in its PR #428 the same way).
    data = np.memmap(bin_path, dtype=np.dtype(dtype), mode="r")
    if len(data) < block_size + 1:
        raise ValueError(f"{bin_path} has {len(data)} tokens, fewer than block_size + 1 = "
                         f"{block_size + 1}; use a smaller block_size or prepare more text")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    # One read of T + 1 tokens per window gives both the inputs and their shifted targets.
    windows = np.stack([data[i:i + block_size + 1] for i in starts.tolist()]).astype(np.int64)
    del data
    windows = torch.from_numpy(windows)  # (B, T + 1)
    # contiguous: callers flatten y with .view(-1) for the loss.
    x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, T), (B, T)
    if torch.device(device).type == "cuda":
        # Pinned host memory lets the copy run asynchronously with the GPU's work.
        return (x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True))
    return x.to(device), y.to(device)

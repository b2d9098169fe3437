"""The one way checkpoints are written and read, by training, resume and generation alike.

A run folder (`out_dir`) holds everything generation needs:
    ckpt.pt      model weights, optimizer, step, best val loss, RNG states, the model's shape
    config.yaml  the resolved training config
    meta.json    what data the run was trained on, and the tokenizer's file name
    <tokenizer>  the tokenizer file named in meta.json

A save killed midway leaves a temp file beside ckpt.pt; the next training run removes those of
dead writers (storage.atomic.clean_stale_temps).

Checkpoints are plain data read with torch.load(weights_only=True): one downloaded from a
stranger can carry no code that runs on load.
"""

import json
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from model.gpt import GPT, GPTConfig
from storage.atomic import write_atomic

CKPT_NAME = "ckpt.pt"


def atomic_save(obj, path):
    """torch.save `obj` to `path` atomically (storage.atomic.write_atomic): a crash, even kill -9,
    leaves the old checkpoint or the new one, never a torn one. A failed write (disk full,
    read-only folder) is a one-line ValueError that leaves the old checkpoint untouched."""
    write_atomic(path, lambda f: torch.save(obj, f))


def load_checkpoint(path, map_location="cpu"):
    """Read a checkpoint as plain data; any problem is a one-line ValueError/FileNotFoundError."""
    path = Path(path)
    if path.is_dir():
        path = path / CKPT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; train one first with `python train.py`")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        # weights_only refuses anything but tensors and plain containers, before running it.
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else "unknown object"
        raise ValueError(
            f"{path} is not a plain-data checkpoint and was not loaded (nothing in it ran): {first_line}"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise ValueError(
            f"{path} is truncated or not a checkpoint ({type(e).__name__}); "
            "train again or restore it from a backup"
        ) from None


def build_model(ckpt, device="cpu"):
    """A GPT with the checkpoint's shape and weights, in eval mode."""
    try:
        model = GPT(GPTConfig(**ckpt["model_config"]))
        model.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError) as e:
        what = f"missing {e}" if isinstance(e, KeyError) else str(e).strip().splitlines()[0]
        raise ValueError(f"the checkpoint does not hold a model this code can build ({what})") from None
    return model.to(device).eval()


@dataclass
class Run:
    model: GPT
    tokenizer: object
    meta: dict
    ckpt: dict


def load_run(out_dir, device="cpu"):
    """Load a trained run folder: the model, its tokenizer and the data's meta.json."""
    from data.tokenizer import load_tokenizer

    out_dir = Path(out_dir)
    ckpt = load_checkpoint(out_dir / CKPT_NAME, map_location=device)
    meta_path = out_dir / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} is missing; the run folder {out_dir} is incomplete")
    try:
        meta = json.loads(meta_path.read_text())
        tokenizer_path = out_dir / meta["tokenizer_file"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{meta_path} is not valid run metadata (it needs a tokenizer_file); "
                         "train again to rewrite it") from None
    tokenizer = load_tokenizer(tokenizer_path)
    model = build_model(ckpt, device)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(f"{tokenizer_path} has {tokenizer.vocab_size} tokens but the model in {out_dir} "
                         f"has {model.config.vocab_size}: the run folder mixes two runs; train again "
                         "into a fresh out_dir")
    return Run(model, tokenizer, meta, ckpt)

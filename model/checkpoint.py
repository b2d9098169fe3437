"""The one way checkpoints are written and read, by training, resume and generation alike.

A run folder (`out_dir`) holds everything generation needs:
    ckpt.pt      model weights, optimizer, step, best val loss, RNG states, the model's shape
    config.yaml  the resolved training config
    meta.json    what data the run was trained on, and the tokenizer's file name
    <tokenizer>  the tokenizer file named in meta.json

Wherever a run folder is read, a pretrained GPT-2 serves too: a Hugging Face GPT-2 folder
(config.json, model.safetensors or pytorch_model.bin, vocab.json, merges.txt; model/gpt2_import.py)
or `hf:OWNER/NAME`, which fetches that folder into the Hugging Face cache (storage/hub.py).

A save killed midway leaves a temp file beside ckpt.pt; the next training run removes those of
dead writers (storage.atomic.clean_stale_temps).

Checkpoints are plain data read with torch.load(weights_only=True): one downloaded from a
stranger can carry no code that runs on load.
"""

import json
import pickle
import zipfile
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from model.gpt import GPT, GPTConfig
from storage.atomic import write_atomic
from storage.hub import is_hub_name, model_folder

CKPT_NAME = "ckpt.pt"


def atomic_save(obj, path):
    """torch.save `obj` to `path` atomically (storage.atomic.write_atomic): a crash, even kill -9,
    leaves the old checkpoint or the new one, never a torn one. A failed write (disk full,
    read-only folder) is a one-line ValueError that leaves the old checkpoint untouched."""
    write_atomic(path, lambda f: torch.save(obj, f))


def load_checkpoint(path, map_location="cpu", fix="train again or restore it from a backup"):
    """Read a checkpoint as plain data; any problem is a one-line ValueError/FileNotFoundError
    (`fix` says what to do about a truncated file)."""
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
        raise ValueError(f"{path} is truncated or not a checkpoint ({type(e).__name__}); {fix}") from None


def build_model(ckpt, device="cpu"):
    """A GPT with the checkpoint's shape and weights, in eval mode."""
    return _built(*_model_parts(ckpt), device)


def build_gpt(config, state_dict, device="cpu"):
    """GPT(config) in eval mode whose parameters are `state_dict`'s tensors themselves (not
    copies), built without a random init: the parameters are first made on the meta device
    (shapes, no memory, no random numbers), then replaced. RuntimeError if names or shapes differ."""
    with _ParametersOnMeta():
        model = GPT(config)
    model.load_state_dict(state_dict, assign=True)
    model.lm_head.weight = model.tok_emb.weight  # assign=True replaced the two apart: tie again
    assert not any(t.is_meta for t in chain(model.parameters(), model.buffers())), "left on meta"
    return model.to(device).eval()


def _model_parts(ckpt):
    try:
        return GPTConfig(**ckpt["model_config"]), ckpt["model"]
    except (KeyError, TypeError, ValueError) as e:
        what = f"missing {e}" if isinstance(e, KeyError) else str(e)
        raise ValueError(f"the checkpoint does not hold a model this code can build ({what})") from None


def _built(config, state_dict, device):
    try:
        return build_gpt(config, state_dict, device)
    except RuntimeError as e:  # load_state_dict: names or shapes that do not fit the config
        what = " ".join(str(e).split())[:300]
        raise ValueError(f"the checkpoint does not hold a model this code can build ({what})") from None


class _ParametersOnMeta(TorchFunctionMode):
    """Inside, torch.empty makes meta tensors. nn.Linear, nn.Embedding and nn.LayerNorm make their
    parameters with it, so they take no memory, while buffers (torch.arange, torch.ones...) stay
    real. In-place ops on meta tensors (the init) are skipped: there is no data to change, and
    normal_'s meta kernel alone would import sympy (seconds, once per process)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.empty:
            kwargs = {**kwargs, "device": "meta"}
        elif _in_place(func):  # Tensor.normal_(...), or nn.init.normal_(tensor=...)
            target = args[0] if args else kwargs.get("tensor")
            if getattr(target, "is_meta", False):
                return target
        return func(*args, **kwargs)


def _in_place(func) -> bool:
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.startswith("__")  # normal_, zero_; not __get__


@dataclass
class Run:
    model: GPT
    tokenizer: object
    meta: dict
    ckpt: dict


def load_run(source, device="cpu"):
    """Load a model to sample from or study: a run folder written by train.py, a Hugging Face
    GPT-2 folder, or hf:OWNER/NAME. The Run holds the model (eval mode), its tokenizer, the
    meta.json of a run (for GPT-2: {"source", "folder", "tokenizer_kind"}) and the checkpoint (for
    GPT-2: only "model_config"). A GPT-2 loads unpadded (vocab_multiple 1): padding the token
    table only speeds up training's matmuls, and copying it would slow every load."""
    config, state_dict, tokenizer, meta, ckpt = _open(source, device, vocab_multiple=1)
    return Run(_built(config, state_dict, device), tokenizer, meta, ckpt)


def load_pretrained(source, device="cpu"):
    """(GPTConfig, state_dict, tokenizer) of a run folder, a Hugging Face GPT-2 folder or
    hf:OWNER/NAME: where fine-tuning starts (training's init_from). The state dict loads into
    GPT(config) as it is; build_gpt(config, state_dict) does so without a random init. A GPT-2's
    config has gelu_approximate "tanh", dropout 0 and vocab_multiple 64: a model built from a
    training config must take those from here. Its Conv1D weights are transposed views
    (non-contiguous); .contiguous() them where a layout matters."""
    config, state_dict, tokenizer, _, _ = _open(source, device, vocab_multiple=64)
    return config, state_dict, tokenizer


def _open(source, device, vocab_multiple):
    """(config, state_dict, tokenizer, meta, ckpt) of any source load_run accepts, checked to
    agree on the vocabulary size; a GPT-2's token table padded to a multiple of vocab_multiple."""
    path = Path(source)
    is_gpt2 = is_hub_name(source) or ((path / "config.json").is_file() and not (path / CKPT_NAME).is_file())
    if is_gpt2:
        config, state_dict, tokenizer, meta, ckpt = _open_gpt2(source, device, vocab_multiple)
    else:
        config, state_dict, tokenizer, meta, ckpt = _open_run(source, device)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"the tokenizer of {source} has {tokenizer.vocab_size} tokens but its model "
                         f"has {config.vocab_size}: the folder mixes two runs or models; train again "
                         f"into a fresh out_dir, or download the model's files again")
    return config, state_dict, tokenizer, meta, ckpt


def _open_gpt2(source, device, vocab_multiple):
    from data.tokenizer import gpt2_tokenizer
    from model.gpt2_import import read_gpt2  # imported here: it reads .bin files with load_checkpoint

    folder = model_folder(source) if is_hub_name(source) else Path(source)
    config, state_dict = read_gpt2(folder, vocab_multiple)
    state_dict = {name: t.to(device) for name, t in state_dict.items()}
    meta = {"source": str(source), "folder": str(folder), "tokenizer_kind": "gpt2"}
    return config, state_dict, gpt2_tokenizer(folder), meta, {"model_config": asdict(config)}


def _open_run(out_dir, device):
    from data.tokenizer import load_tokenizer

    out_dir = Path(out_dir)
    if out_dir.is_dir() and not (out_dir / CKPT_NAME).is_file():
        raise FileNotFoundError(f"no checkpoint at {out_dir / CKPT_NAME}; train one first with `python "
                                f"train.py`, or give a Hugging Face GPT-2 folder or hf:OWNER/NAME")
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
    config, state_dict = _model_parts(ckpt)
    return config, state_dict, load_tokenizer(tokenizer_path), meta, ckpt

"""The one way checkpoints are written and read, by training, resume and generation alike, and
the one way a model is built from weights. Tensors and checkpoints only: a whole run (model,
tokenizer and meta.json) is loaded one floor up, in runs/loading.py.

ckpt.pt holds the model weights, optimizer, step, best val loss, RNG states and the model's shape.

A save killed midway leaves a temp file beside ckpt.pt; the next training run removes those of
dead writers (storage.atomic.clean_stale_temps).

Checkpoints are plain data read with torch.load(weights_only=True): one downloaded from a
stranger can carry no code that runs on load.
"""

import pickle
from itertools import chain
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from model.gpt import GPT, GPTConfig
from storage.atomic import write_atomic

CKPT_NAME = "ckpt.pt"


def atomic_save(obj, path):
    """torch.save `obj` to `path` atomically (storage.atomic.write_atomic): a crash, even kill -9,
    leaves the old checkpoint or the new one, never a torn one. A failed write (disk full,
    read-only folder) is a one-line ValueError that leaves the old checkpoint untouched."""
    write_atomic(path, lambda f: torch.save(obj, f))


class NoCheckpoint(FileNotFoundError):
    """There is no checkpoint where one was asked for (`path`, the ckpt.pt looked for): nothing
    has been trained there. The scripts add what to type to train one."""

    def __init__(self, path: Path, message: str):
        super().__init__(message)
        self.path = path


def _advice(fix):
    """The `; fix` that ends a message, or nothing where the caller gives its own advice."""
    return f"; {fix}" if fix else ""


def not_a_checkpoint_folder(path) -> str:
    """What to say of a folder named ckpt.pt where a checkpoint file should be."""
    return (
        f"{path} is a folder, not a checkpoint file; move it out of the way, "
        "or give a run folder whose checkpoint is a file"
    )


def load_checkpoint(path, map_location="cpu", fix="train again or restore it from a backup"):
    """Read a checkpoint as plain data; any problem is a one-line ValueError, or NoCheckpoint
    where there is none (`fix` says what to do about a truncated file; "": the caller says it)."""
    path = Path(path)
    if path.is_dir() and path.name != CKPT_NAME:
        path = path / CKPT_NAME
    if path.is_dir():
        raise ValueError(not_a_checkpoint_folder(path))
    if not path.is_file():
        raise NoCheckpoint(path, f"no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        # weights_only refuses anything but tensors and plain containers, before running it.
        # torch's message also suggests weights_only=False: never advice to give.
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        said = [
            line
            for line in lines[1:]
            if not line.startswith(("Weights only", "Please file", "Check the"))
            and "weights_only" not in line
        ]
        what = said[0] if said else "not a checkpoint's plain data"
        raise ValueError(
            f"{path} is not a plain-data checkpoint and was not loaded (nothing in it ran): "
            f"{what}{_advice(fix)}"
        ) from None
    except Exception as e:  # noqa: BLE001 - bytes that are no checkpoint fail anywhere in the unpickler
        # (RuntimeError, EOFError, BadZipFile, OSError, UnicodeDecodeError, IndexError, ...)
        raise ValueError(
            f"{path} is truncated or not a checkpoint ({type(e).__name__}){_advice(fix)}"
        ) from None
    if not isinstance(ckpt, dict):
        raise ValueError(
            f"{path} is not a checkpoint: it holds a {type(ckpt).__name__}, not a "
            f"dict of the model's weights and shape{_advice(fix)}"
        )
    return ckpt


def model_parts(ckpt, path="the checkpoint", fix="give a run folder train.py wrote"):
    """(GPTConfig, state dict) of a checkpoint; ValueError naming `path` (and saying `fix`) if it
    holds no model this code can build: no model_config (a bare state_dict, say), weights that
    are not a dict of tensors, or weights that are not all finite."""
    weights = ckpt.get("model")
    if "model_config" not in ckpt:
        bare = bool(ckpt) and all(isinstance(v, torch.Tensor) for v in ckpt.values())
        what = "bare weights (a state_dict) without" if bare else "no"
        raise ValueError(
            f"{path} is not a checkpoint train.py wrote: it holds {what} "
            f"model_config (the model's shape){_advice(fix)}"
        )
    if not (isinstance(weights, dict) and all(torch.is_tensor(t) for t in weights.values())):
        raise ValueError(
            f"{path} is not a checkpoint train.py wrote: its model entry is "
            f"{type(weights).__name__}, not a dict of tensors{_advice(fix)}"
        )
    try:
        config = GPTConfig.from_saved(ckpt["model_config"])
    except (KeyError, TypeError, ValueError) as e:
        what = f"missing {e}" if isinstance(e, KeyError) else str(e)
        raise ValueError(
            f"{path} does not hold a model this code can build ({what}){_advice(fix)}"
        ) from None
    broken = next(
        (name for name, t in weights.items() if t.is_floating_point() and not t.isfinite().all()),
        None,
    )
    if broken:
        raise ValueError(
            f"{path} holds weights that are not finite (NaN or inf, {broken} first): "
            f"a run that diverged{_advice(fix)}"
        )
    return config, weights


def build_gpt(config, state_dict, device="cpu", cls=GPT):
    """cls(config), a GPT by default, in eval mode whose parameters are `state_dict`'s tensors
    themselves (not copies), built without a random init: the parameters are first made on the
    meta device (shapes, no memory, no random numbers), then replaced. ValueError if names or
    shapes differ."""
    with _ParametersOnMeta():
        model = cls(config)
    try:
        model.load_state_dict(state_dict, assign=True)
    except RuntimeError as e:  # names or shapes that do not fit the config
        what = " ".join(str(e).split())[:300]
        raise ValueError(
            f"the checkpoint does not hold a model this code can build ({what})"
        ) from None
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # assign=True replaced the two apart: tie again
    assert not any(t.is_meta for t in chain(model.parameters(), model.buffers())), "left on meta"
    return model.to(device).eval()


def weights_problem(config, state_dict) -> str | None:
    """What keeps `state_dict` from loading into GPT(config), in words (the first name missing,
    unexpected or of another shape), or None; the state dict is only read."""
    with _ParametersOnMeta():
        expected = {name: tuple(t.shape) for name, t in GPT(config).state_dict().items()}
    for name, shape in expected.items():
        if name not in state_dict:
            return f"no tensor {name}"
        if tuple(state_dict[name].shape) != shape:
            return f"{name} is {tuple(state_dict[name].shape)}, the model_config makes it {shape}"
    extra = sorted(set(state_dict) - set(expected))
    return f"a tensor {extra[0]} the model does not have" if extra else None


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

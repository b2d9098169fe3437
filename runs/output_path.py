"""Where an output may go: never onto an input. Every path a user names for a program to write (the
attention page of `generate.py --html`, the folder of `train.py --export-hf`) is checked here
before anything is written, so that a slip of the keyboard cannot replace a checkpoint, a config,
a run's other files or the text a run was trained on."""

import os
from collections.abc import Iterable
from pathlib import Path

from model.checkpoint import CKPT_NAME
from runs.folder import CONFIG_FILE, META_FILE
from runs.restart import RUN_ENTRIES
from storage.atomic import is_temp
from storage.hub import WEIGHT_FILES
from storage.json_read import read_json

# Files that hold a model (or the tokens it was trained on), and configs, wherever they are.
MODEL_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".pkl")
CONFIG_SUFFIXES = (".yaml", ".yml")


class OutputOnInput(ValueError):
    """An output asked for at `path`, which is `what` (an input); nothing was written."""

    def __init__(self, path: str | Path, what: str):
        super().__init__(
            f"refusing to write {path}: it is {what}, and an output never replaces an input; "
            "give the output another path"
        )
        self.path, self.what = path, what


def check_output_path(
    path: str | Path,
    run: str | Path | None = None,
    own: tuple[str, ...] = (),
    reads: Iterable[str | Path | None] = (),
    caches: Iterable[str | Path] = (),
) -> None:
    """OutputOnInput (a ValueError, one line) where writing `path` (a symlink's target, as
    storage.atomic writes it) would replace an input: a file of a run or model folder (its own
    names always, any other file of it unless it ends with one of `own`, the output's own kind:
    ".html" for a page, which may be rewritten there); anywhere, an existing checkpoint, weights,
    token or config file; anything under one of `caches`, the data caches (corpora, prepared
    tokens, tokenizers: configs.paths.data_caches); the text the run folder `run` was trained
    on; or one of `reads`, the files this command reads."""
    target = Path(os.path.realpath(path))
    if os.path.exists(path) and any(_is_special(p) for p in (Path(os.path.abspath(path)), target)):
        raise ValueError(
            f"cannot write {path}: it is a device or a stream, not a file, and the output is "
            "a file written whole; give a file path (e.g. out/attention.html)"
        )
    what = _input_at(target, run, own, [r for r in reads if r], list(caches))
    if what is not None:
        raise OutputOnInput(path, what)


def _input_at(target: Path, run, own: tuple[str, ...], reads: list, caches: list) -> str | None:
    """What input `target` is, or None."""
    if any(Path(os.path.realpath(r)) == target for r in reads):
        return "a file this command reads"
    folder, name = target.parent, target.name
    if _is_model_folder(folder):
        its_own = name in RUN_ENTRIES or name == _tokenizer_file(folder) or is_temp(name)
        if its_own or (target.is_file() and not (own and name.endswith(own))):
            what = "the checkpoint" if name == CKPT_NAME else "a file"
            return f"{what} of the run folder {folder}"
    if target.is_file() and name.endswith(MODEL_SUFFIXES):
        return "a checkpoint, weights or token file"
    if target.is_file() and name.endswith(CONFIG_SUFFIXES):
        return "a config file"
    for cache in (Path(os.path.realpath(c)) for c in caches):
        if target == cache or cache in target.parents:
            return f"in the data cache {cache} (corpora, prepared tokens, tokenizers)"
    for corpus in _corpora(run):
        if target == corpus or corpus in target.parents:
            return f"the text the run in {run} was trained on"
    return None


def _is_special(path: Path) -> bool:
    """Whether `path` is in the kernel's folders of devices and processes (/dev/stdout, a
    /proc/self/fd/N that a shell's redirection gives)."""
    return any(path.is_relative_to(root) for root in ("/dev", "/proc", "/sys"))


def _is_model_folder(folder: Path) -> bool:
    """Whether `folder` holds a run (train.py's, nanoGPT's) or a Hugging Face model."""
    names = (CKPT_NAME, META_FILE, CONFIG_FILE, *WEIGHT_FILES)
    return any((folder / name).is_file() for name in names)


def _tokenizer_file(folder: Path) -> str:
    """The tokenizer file's name that the folder's meta.json gives, or "" where it gives none."""
    try:
        name = read_json(folder / META_FILE)["tokenizer_file"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return name if isinstance(name, str) else ""


def _corpora(run) -> list[Path]:
    """The files and folders of text the run folder `run` was trained on, as its meta.json names
    them (a mix: each source's), those that are paths on this machine."""
    try:
        meta = read_json(Path(run) / META_FILE) if run else {}
        sources = [meta.get("source")] + [part.get("source") for part in meta.get("mix") or []]
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    return [
        Path(os.path.realpath(source))
        for source in sources
        if isinstance(source, str) and source and os.path.exists(source)
    ]

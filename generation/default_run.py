"""The run folder `generate.py` reads when given no --ckpt: the default config's `out_dir`
against the current folder, where `python train.py` run there writes it, else against the
checkout, where `make demo` wrote it, so the demo's model is found from any folder, as the
built-in configs are (configs/paths.py)."""

from pathlib import Path

from configs.load import load_config
from configs.paths import DEFAULT_CONFIG, PROJECT_ROOT
from model.checkpoint import CKPT_NAME


def default_out_dir(config_path: Path = DEFAULT_CONFIG) -> str:
    """The default config's out_dir, so `generate.py` finds what `train.py` wrote by default."""
    return load_config(config_path).out_dir


def default_run_folder(out_dir: str | Path) -> Path:
    """`out_dir` as the current folder reads it when it holds a checkpoint, else the checkout's
    (absolute); FileNotFoundError naming each place looked when neither does."""
    given = Path(out_dir)
    looked = [given.absolute()]
    if not given.is_absolute() and (PROJECT_ROOT / given).absolute() != looked[0]:
        looked.append((PROJECT_ROOT / given).absolute())
    for folder, named in zip(looked, (given, looked[-1])):
        if (folder / CKPT_NAME).is_file():
            return named  # the current folder's as written, the checkout's absolute
    places = " nor at ".join(str(folder / CKPT_NAME) for folder in looked)
    raise FileNotFoundError(
        f"no checkpoint at {places}; train one first with `python train.py` (or `make demo`), "
        "or name a run folder with --ckpt DIR"
    )

"""Which folder a path is read against. The project's own files resolve against the checkout,
wherever Python runs from: its built-in configs (configs/*.yaml) and the default data cache
(.cache, where the named corpora are kept). Every path a user gives (a config file of their own,
data.source, out_dir, a cache_dir they set) resolves against the current folder, as a shell
reads it."""

from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "default.yaml"  # what train.py uses when given none
DEFAULT_CACHE = ".cache"  # data.cache_dir's default: the checkout's own cache


def config_candidates(path: str | Path) -> list[Path]:
    """The files a config path may name, in the order they are tried, as absolute paths: the
    path against the current folder, then, for a relative one, the built-in config of that name
    (`configs/shakespeare_char.yaml` from any folder)."""
    given = Path(path).expanduser()
    looked = [given.absolute()]
    if not given.is_absolute() and (PROJECT_ROOT / given).absolute() != looked[0]:
        looked.append((PROJECT_ROOT / given).absolute())
    return looked


def config_file(path: str | Path) -> Path | None:
    """The config file `path` names (config_candidates' first that is a file), or None."""
    return next((p for p in config_candidates(path) if p.is_file()), None)


def is_default_config(path: str | Path | None) -> bool:
    """Whether `path` names configs/default.yaml, the config train.py uses when given none."""
    found = config_file(path) if path is not None else None
    return found is not None and found.resolve() == DEFAULT_CONFIG.resolve()


def cache_folder(cache_dir: str) -> Path:
    """The folder data.cache_dir names: for the default, the checkout's .cache (so a run from
    another folder finds the corpora already prepared); any other value is the user's path."""
    if cache_dir == DEFAULT_CACHE:
        return PROJECT_ROOT / DEFAULT_CACHE
    return Path(cache_dir).expanduser()


def data_caches(config_yaml: str | Path | None = None) -> list[Path]:
    """The data caches runs read (corpora, prepared tokens, tokenizers), where no output may go:
    the checkout's own, and the one a run's config.yaml (`config_yaml`) names in data.cache_dir."""
    caches = [cache_folder(DEFAULT_CACHE)]
    try:
        with open(config_yaml, encoding="utf-8") as f:  # type: ignore[arg-type]
            caches.append(cache_folder(str(yaml.safe_load(f)["data"]["cache_dir"])))
    except (OSError, TypeError, KeyError, ValueError, RecursionError, yaml.YAMLError):
        pass  # no run folder, or no config of ours: the checkout's cache alone
    return caches

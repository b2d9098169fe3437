"""Where a run goes: the one decision that `python train.py`, `training.loop.train` and every
other caller share. It is a derived value (Config.run_dir), never written back into the config:

- out_dir, when it was chosen: set as an override (out_dir=...), set by a config file other than
  configs/default.yaml, or changed on the Config after loading;
- out_dir too, when the data is the config file's own;
- else, for a run on other data (data.source or data.mix changed), out/<name> after the source
  (out/<name>+<name> for a mix), so that your own text never lands in the demo's folder; the
  demo's own folder name gets "-own" (my/default.txt -> out/default-own).

A derived folder is always one plain name inside out/: a source path such as `..`, `corpora/in/..`
or `./` is named after the folder it resolves to, and one that names none (`/`) is a ValueError.
Relative folders, like every path a user gives, are read against the current folder.
"""

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from configs.paths import DEFAULT_CONFIG
from data.mix_spec import parse_mix
from data.sources import NAMED_CORPORA, is_hub_name

OUT = "out"  # the folder every derived run folder is made in
DEMO_OUT_DIR = "out/default"  # the schema's out_dir: the demo's run folder


@dataclass(frozen=True)
class Origin:
    """What configs.load.load_config read, kept on the Config it returns (Config.origin)."""

    path: Path | None  # the config file, absolute; None: the schema's defaults alone
    data: tuple | None  # (data.source, data.mix) as the file alone sets them; None: not alone
    out_dir: str  # out_dir as loaded
    chosen: bool  # out_dir was given as an override, or set by a file other than the default

    def run_dir(self, out_dir: str, source: str, mix: list) -> str:
        """The folder of a run loaded from here whose config now says `out_dir`, `source` and
        `mix` (data.source, data.mix): see the module docstring."""
        if self.chosen or out_dir != self.out_dir or (source, mix) == self.data:
            return out_dir
        if mix:
            name = "+".join(folder_name(entry.source) for entry in parse_mix(mix))
        else:
            name = folder_name(source)
        derived = Path(OUT, name)
        assert derived.parent == Path(OUT) and name not in ("", ".", ".."), derived  # folder_name
        if derived == Path(_default_out_dir()):
            derived = derived.with_name(name + "-own")  # never the demo's folder
        return str(derived)


def folder_name(source: str) -> str:
    """The name a data source gives a derived run folder: a named corpus as it is; else the last
    part of the path with its extension dropped (hf:OWNER/DATASET/a/b.txt: b), read after `.` and
    `..` are resolved as typed (`corpora/in/..` is corpora, `..` the parent folder's name; links
    are not followed), with ":" as "_". ValueError, naming the source, for one that names no
    folder (`/`)."""
    if source in NAMED_CORPORA:
        return source
    if is_hub_name(source):
        name = PurePosixPath(posixpath.normpath(source.removeprefix("hf:").strip("/"))).stem
    else:
        name = Path(os.path.abspath(os.path.expanduser(source))).stem  # textual: `..` as typed
    name = name.replace(":", "_")
    if name in ("", ".", ".."):
        raise ValueError(
            f"data.source {source!r} names no folder to name the run folder after "
            f"({OUT}/<name>); set out_dir to choose one, e.g. out_dir={OUT}/mine"
        )
    return name


def _default_out_dir() -> str:
    """configs/default.yaml's out_dir (the demo's run folder), read from the file alone: the
    loader builds Origins, so it is not called from here."""
    try:
        raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    value = raw.get("out_dir", DEMO_OUT_DIR) if isinstance(raw, dict) else DEMO_OUT_DIR
    return value if isinstance(value, str) else ""

"""Where a run goes (configs/run_dir.py): a derived run folder is one name inside out/, whatever
the source path; `python train.py` and `training.loop.train` choose the same folder; and the
checkout's own paths (built-in configs, the default cache) are found from any folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import train as train_script
from configs.load import load_config
from configs.paths import PROJECT_ROOT
from lab.run import train
from tests.helpers import ROOT, TINY_MODEL, error_line

# The tiny model (tests/helpers.py), 4 steps: seconds.
TINY = [
    *TINY_MODEL,
    "train.max_iters=4",
    "train.warmup_iters=1",
    "train.eval_interval=4",
    "train.eval_iters=1",
    "train.log_interval=2",
    "train.probe_interval=0",
    "train.final_full_eval=false",
]


def print_config(capsys, *argv):
    """train.py's --print-config in this process: (exit code, the out_dir it prints, stderr)."""
    code = train_script.main([*map(str, argv), "--print-config"])
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("out_dir: ")]
    return code, lines[0].removeprefix("out_dir: ") if lines else None, captured.err


# Each source path and the folder name it must give (run from ROOT: `..` is ROOT's parent).
ATTACKS = [
    ("..", ROOT.parent.name),
    ("../", ROOT.parent.name),
    ("corpora/in/..", "corpora"),
    (".", ROOT.name),
    ("./", ROOT.name),
    ("corpora//", "corpora"),
    ("./../", ROOT.parent.name),
    ("hf:me/set/a/b.txt", "b"),
    ("hf:me/set/../x.txt", "x"),
]


@pytest.mark.parametrize("source, name", ATTACKS)
@pytest.mark.parametrize("key", ["data.source", "data.mix"])
def test_a_derived_run_folder_never_leaves_out(capsys, source, name, key):
    value = source if key == "data.source" else f"{source}:1"  # a one-source mix
    code, out_dir, err = print_config(capsys, f"{key}={value}")
    assert code == 0 and out_dir == f"out/{name}", (out_dir, err)
    assert f"out_dir=out/{name}" in err  # the note says where the run goes


@pytest.mark.parametrize(
    "value",
    [
        "data.source=/",
        "data.source=//",
        "data.mix=/:1",
        "data.source=hf:..",
        "data.source=hf:me/..",
    ],
)
def test_a_source_that_names_no_folder_is_a_one_line_error(capsys, value):
    code, out_dir, err = print_config(capsys, value)
    assert code == 2 and out_dir is None and err.startswith("error: ") and err.count("\n") == 1
    assert "data.source" in err and "out_dir" in err


def test_a_link_is_named_as_given_not_followed(tmp_path, monkeypatch):
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "link").symlink_to("../..")  # points two floors up
    monkeypatch.chdir(tmp_path / "deep" / "er")
    assert load_config(None, ["data.source=link"]).run_dir == "out/link"
    assert load_config(None, ["data.source=link/"]).run_dir == "out/link"
    assert load_config(None, ["data.source=link/.."]).run_dir == "out/er"  # `..` as typed


def test_the_python_api_keeps_the_config_it_is_given():
    config = load_config(overrides=["data.source=my_text.txt"])
    assert config.run_dir == "out/my_text" and config.out_dir == "out/default"  # not written back
    config.out_dir = "out/chosen"  # set on the Config: chosen, as out_dir=... is
    assert config.run_dir == "out/chosen"
    written = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    assert load_config().train.max_iters == written["train"]["max_iters"]  # no path: the default
    assert load_config(None).train.max_iters == 1000  # None: the schema's defaults


def test_the_checkouts_configs_and_cache_are_found_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config("configs/shakespeare_char.yaml")
    assert config.origin.path == PROJECT_ROOT / "configs" / "shakespeare_char.yaml"
    assert config.data.cache_path == PROJECT_ROOT / ".cache"
    assert load_config(None, ["data.cache_dir=mine"]).data.cache_path == Path("mine")  # yours
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "shakespeare_char.yaml").write_text("seed: 7\n")
    assert load_config("configs/shakespeare_char.yaml").seed == 7  # yours first, as a shell
    with pytest.raises(ValueError) as e:
        load_config("configs/nope.yaml")
    assert str(tmp_path / "configs" / "nope.yaml") in str(e.value)  # the absolute path looked at
    assert str(PROJECT_ROOT / "configs" / "nope.yaml") in str(e.value)


def run_train(cwd, *argv):
    """`python /path/to/checkout/train.py ARGV...` from the folder `cwd`, one thread."""
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *map(str, argv)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def corpus_folder(folder):
    """`folder` made, holding the texts the runs below train on; returns it."""
    folder.mkdir(parents=True)
    lines = "\n".join(f"the cat {i} sat on the mat and it slept." for i in range(300)) + "\n"
    (folder / "text.txt").write_text(lines)
    (folder / "other.txt").write_text(lines.replace("cat", "dog"))
    (folder / "own.yaml").write_text("out_dir: out/mine\ndata:\n  source: text.txt\n")
    return folder


def run_folders(folder):
    """The folders under `folder` that hold a checkpoint, relative to it."""
    return sorted(str(p.parent.relative_to(folder)) for p in folder.rglob("ckpt.pt"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "config, overrides, expected",
    [
        (None, ["data.source=text.txt"], "out/text"),
        (None, ["data.source=corpora/in/.."], "out/corpora"),
        ("own.yaml", ["data.source=other.txt"], "out/mine"),  # a config with its own out_dir
    ],
)
def test_train_from_python_goes_where_train_py_goes(
    tmp_path, monkeypatch, config, overrides, expected
):
    cli, api = corpus_folder(tmp_path / "cli"), corpus_folder(tmp_path / "api")
    for folder in (cli, api):
        (folder / "corpora" / "in").mkdir(parents=True)  # corpora/in/.. is corpora
        (folder / "corpora" / "text.txt").write_text((folder / "text.txt").read_text())
    cache = f"data.cache_dir={tmp_path / 'cache'}"
    args = [*([config] if config else []), *overrides, *TINY, cache]
    r = run_train(cli, *args)
    assert r.returncode == 0, r.stderr[-2000:]
    monkeypatch.chdir(api)
    train(load_config(config, args[1:]) if config else load_config(overrides=args))
    assert run_folders(cli) == run_folders(api) == [expected]


@pytest.mark.slow
def test_the_default_config_runs_in_the_same_folder_from_python_and_train_py(tmp_path, monkeypatch):
    # out/default is a file here, so either way the run stops at the folder it chose, before any
    # data is prepared (the default corpus is large); the refusal names that folder.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "default").write_text("not a folder")
    assert "out/default" in error_line(run_train(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out/default"):
        train(load_config())

"""generate.py without --ckpt reads the default config's run folder against the current folder,
else against the checkout (where `make demo` wrote it), and says where it looked when neither
holds a checkpoint."""

import io
from pathlib import Path

import pytest

import generate
import generation.default_run
from generation.default_run import default_run_folder
from tests.helpers import make_run


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A stand-in checkout (generation.default_run.PROJECT_ROOT) and an empty current folder."""
    root, here = tmp_path / "checkout", tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.setattr(generation.default_run, "PROJECT_ROOT", root)
    monkeypatch.chdir(here)
    return root, here


def test_from_another_folder_the_checkouts_demo_run_is_found(checkout):
    root, _ = checkout
    make_run(root / "out" / "default", "char", 32)
    out, err = io.StringIO(), io.StringIO()
    code = generate.main(["--prompt", "The", "--max-new-tokens", "2"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith("The")
    assert default_run_folder("out/default") == root / "out" / "default"


def test_a_run_in_the_current_folder_comes_first(checkout):
    root, here = checkout
    make_run(root / "out" / "default", "char", 32)
    make_run(here / "out" / "default", "char", 32)
    assert default_run_folder("out/default") == Path("out/default")


def test_with_no_run_anywhere_the_error_names_both_places(checkout):
    root, here = checkout
    err = io.StringIO()
    assert generate.main(["--prompt", "The"], out=io.StringIO(), err=err) == 2
    said = err.getvalue()
    assert said.startswith("error: ") and said.count("\n") == 1
    assert str(here / "out" / "default" / "ckpt.pt") in said
    assert str(root / "out" / "default" / "ckpt.pt") in said
    assert "--ckpt" in said

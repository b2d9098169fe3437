"""generate.py --probe, --json and --html, driven through main() on a real run folder."""

import io
import json

import pytest

import generate
from data.pronouns import examples, write_jsonl
from tests.test_generate_cli import make_run


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    make_run(folder, "bpe", 64)
    return folder


def call(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = generate.main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_probe_json_has_the_documented_keys(run_folder):
    code, out, _ = call("--ckpt", run_folder, "--probe", "--json", "--permutations", "20")
    assert code == 0
    result = json.loads(out)
    assert {"layer", "head", "dev", "test"} <= result["best_head"].keys()
    assert {"random", "first", "nearest", "position"} <= result["baselines"].keys()
    assert 0 < result["p_value"] <= 1 and len(result["heads"]) == 2 * 2
    assert result["selection"] == "dev" and result["counts"]["test"]["examples"] == len(examples("test"))


def test_probe_on_a_user_file_says_it_chose_and_scored_on_the_same_data(run_folder, tmp_path):
    path = tmp_path / "mine.jsonl"
    write_jsonl(examples("dev")[:40], path)
    code, out, _ = call("--ckpt", run_folder, "--probe", path, "--permutations", "20")
    assert code == 0 and "same data" in out and "Clark et al. 2019" in out
    assert "L1" in out and "H1" in out  # the layer x head table


def test_attention_html_writes_a_self_contained_page(run_folder, tmp_path):
    page = tmp_path / "maps.html"
    code, out, _ = call("--ckpt", run_folder, "--attention", "The king smiled because he ruled the land.",
                        "--html", page)
    assert code == 0 and f"wrote {page}" in out
    html = page.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "<script src" not in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.parametrize("argv, fragment", [
    (["--json"], "--json goes with --probe"),
    (["--html", "x.html"], "go with --attention"),
    (["--probe", "--attention"], "separate runs"),
    (["--probe", "--permutations", "0"], "--permutations must be at least 1"),
    (["--probe", "missing.jsonl"], "missing.jsonl"),
])
def test_probe_and_page_errors_are_one_line(run_folder, argv, fragment):
    code, _, err = call("--ckpt", run_folder, *argv)
    assert code == 2 and err.count("\n") == 1 and fragment in err, err

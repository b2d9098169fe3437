"""Hostile or broken input files, as a user meets them at train.py and generate.py: each is one
line naming the file and what is wrong (exit code 2, no traceback), or, for a run folder's own
saved probe.json, measured again rather than shown; nothing hangs on a FIFO and nothing is
overwritten. The battery of issue 53 (cases 3, 4, 6, 7, 8, 10, 11, 15, 16); docs/reference/
promises.md says what each case holds the project to."""

import hashlib
import json
import os
import shutil
import stat

import pytest

from tests.helpers import error_line, make_run, run_main, run_script

DEEP = "[" * 100_000 + "\n"  # a JSON line nested past Python's stack


def digest(folder):
    """Every file of `folder` (FIFOs as such) and its sha256: whether anything was rewritten."""
    return {
        p.name: "fifo"
        if stat.S_ISFIFO(p.stat().st_mode)
        else hashlib.sha256(p.read_bytes()).digest()
        for p in sorted(folder.iterdir())
    }


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """An untrained bpe run folder (block 64) with the probe's result saved in probe.json, made
    once for this file; tests take a copy (`run`)."""
    folder = tmp_path_factory.mktemp("attack_inputs") / "run"
    make_run(folder, "bpe", 64)
    r = run_main("generate.py", "--ckpt", folder, "--probe", "--no-causal", "--permutations", "5")
    assert r.returncode == 0 and (folder / "probe.json").is_file(), r.stderr
    # 5 shuffles cannot put a head above chance (p >= 1/6): saved as one that does, so that the
    # page outlines it whenever the saved result is used ("best head: layer ...").
    saved = json.loads((folder / "probe.json").read_text())
    (folder / "probe.json").write_text(json.dumps({**saved, "p_value": 0.001}))
    return folder


@pytest.fixture
def run(measured, tmp_path):
    return shutil.copytree(measured, tmp_path / "run")


def page(run, tmp_path, *flags):
    """generate.py --attention --html in this process: (CompletedProcess, the page's path)."""
    html = tmp_path / "page.html"
    return run_main("generate.py", "--ckpt", run, "--attention", "--html", html, *flags), html


# --- configs (3, 11, 16) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, overrides",
    [
        ("- a\n", ["train.lr=0.1"]),  # 3: a list at the top, with an override
        ("5\n", ["model.n_layer=2"]),  # 3: a scalar
        ("train: 5\n", ["train.lr=0.1"]),  # 16: a section as a scalar, one of its keys overridden
        ("train: 0\n", []),  # 16: a section as a scalar that reads false
    ],
)
def test_a_config_that_is_not_a_mapping_where_one_is_due_is_one_line(tmp_path, text, overrides):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    said = error_line(
        run_main("train.py", path, f"out_dir={tmp_path / 'r'}", *overrides, "--print-config")
    )
    assert str(path) in said and "mapping" in said, said
    assert not (tmp_path / "r").exists() and path.read_text() == text


@pytest.mark.slow
def test_a_config_list_with_an_override_is_one_line_from_the_command_line(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n")
    said = error_line(run_script("train.py", path, "train.lr=0.1", f"out_dir={tmp_path / 'r'}"))
    assert str(path) in said, said


@pytest.mark.parametrize("deep", ["file", "override"])
def test_a_config_nested_past_any_depth_is_one_short_line(tmp_path, deep):  # issue 60: 2
    config = tmp_path / "deep.yaml"
    if deep == "file":
        config.write_text("data:\n  mix: " + "[" * 500 + "]" * 500 + "\n")
        args = [config]
    else:
        config.write_text("train:\n  lr: 0.1\n")
        args = [config, "data.mix=" + "[" * 5_000 + "]" * 5_000]
    said = error_line(run_main("train.py", *args, f"out_dir={tmp_path / 'run'}"))
    assert "nested" in said and len(said) < 400, said
    assert (str(config) if deep == "file" else "data.mix") in said, said
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "sizes, blamed",
    [
        (["model.n_layer=2", "model.n_embd=32", "model.block_size=10**14"], "model.block_size="),
        (["model.n_layer=2", "model.n_embd=1099511627776", "model.block_size=16"], "model.n_embd="),
    ],
)
def test_an_absurd_size_blames_the_override_that_gave_it(tmp_path, sizes, blamed):  # 11
    sizes = [s.replace("10**14", str(10**14)) for s in sizes]
    said = error_line(
        run_main(
            "train.py", f"out_dir={tmp_path / 'r'}", "model.n_head=2", *sizes, "--print-config"
        )
    )
    assert said.startswith(f"error: override {blamed}"), said
    assert not (tmp_path / "r").exists()


# --- the probe's and the pairs' files (4, 7, 10, 15) ---------------------------------------------


def one_example(**changes):
    """A probe file's line: "The dog chased the cat near the tree because it was hungry."."""
    text = "The dog chased the cat near the tree because it was hungry."
    line = {"text": text, "pronoun": [45, 47], "antecedent": [4, 7], "distractors": [[19, 22]]}
    return json.dumps({**line, **changes}) + "\n"


TWIN_TEXT = "The dog chased the cat near the tree because she was hungry."


@pytest.mark.parametrize(
    "name, line, names",
    [
        ("deep.jsonl", DEEP, ["line 1", "nested"]),  # 4
        (
            "twice.jsonl",
            one_example().replace('"text"', '"text": "x", "text"', 1),
            ["line 1", "'text'", "twice"],
        ),  # 15
        (
            "tree.jsonl",  # 7: a noun of the story, but no candidate
            one_example(twin={"text": TWIN_TEXT, "pronoun": [45, 48], "antecedent": [32, 36]}),
            ["line 1", "twin.antecedent", "'tree'"],
        ),
        (
            "chased.jsonl",  # 7: no noun at all
            one_example(twin={"text": TWIN_TEXT, "pronoun": [45, 48], "antecedent": [8, 14]}),
            ["line 1", "twin.antecedent", "'chased'"],
        ),
    ],
)
def test_a_bad_probe_file_is_one_line_naming_it(run, tmp_path, name, line, names):
    path = tmp_path / name
    path.write_text(line)
    before = digest(run)
    said = error_line(
        run_main("generate.py", "--ckpt", run, "--probe", path, "--no-causal", "--permutations", 5)
    )
    assert str(path) in said and all(n in said for n in names), said
    assert digest(run) == before and path.read_text() == line


PAIR = {"clean": "The owl sat because it", "corrupt": "The dog sat because it"}  # 10 tokens


@pytest.mark.parametrize(
    "line, names",
    [
        (DEEP, ["line 1", "nested"]),  # 4
        (
            json.dumps({**PAIR, "answer": "x", "other": "y"}).replace(
                '"clean"', '"clean": "x", "clean"', 1
            )
            + "\n",
            ["line 1", "'clean'", "twice"],
        ),  # 15
        # Issue 60, 10: what the tokenizer finds wrong in a pair names the file too.
        (json.dumps({**PAIR, "corrupt": "The", "answer": " x", "other": " y"}), ["same token"]),
        (json.dumps({**PAIR, "corrupt": PAIR["clean"] + " ", "answer": " x", "other": " y"}), []),
        (json.dumps({**PAIR, "answer": " sat", "other": " sat down"}), ["same token"]),
    ],
)
def test_a_bad_pairs_file_is_one_line_naming_it(run, tmp_path, line, names):
    path = tmp_path / "pairs.jsonl"
    path.write_text(line)
    said = error_line(run_main("generate.py", "--ckpt", run, "--patch", "--pairs", path))
    assert str(path) in said and all(n in said for n in names), said


def test_pairs_given_a_folder_or_a_missing_file_is_one_line(run, tmp_path):  # 10
    said = error_line(run_main("generate.py", "--ckpt", run, "--patch", "--pairs", tmp_path))
    assert f"{tmp_path} is a folder; give a JSONL file" in said, said
    missing = tmp_path / "missing.jsonl"
    said = error_line(run_main("generate.py", "--ckpt", run, "--patch", "--pairs", missing))
    assert str(missing) in said and "Errno" not in said, said


# --- a run folder's own files: probe.json, metrics.jsonl, meta.json, the tokenizer (4, 6, 8, 15) -


@pytest.mark.parametrize(
    "change",
    [
        lambda saved: saved["best_head"].update(dev=7.5),  # an accuracy of 750%
        lambda saved: saved.update(p_value=5.0),
        lambda saved: saved["heads"][0].update(mass_antecedent=-0.5),
        lambda saved: saved["counts"]["dev"].update(used=-3),
        # Issue 60, 5: a head outside the model, another model's heads (a bigger run's file).
        lambda saved: saved["best_head"].update(layer=5),
        lambda saved: saved.update(heads=saved["heads"] * 2),
    ],
)
def test_a_probe_json_out_of_range_is_not_shown_as_measured(run, tmp_path, change):  # 6
    r, _ = page(run, tmp_path, "--no-probe")
    assert r.returncode == 0 and "best head: layer" in r.stdout, r.stderr  # as saved, it is used
    saved = json.loads((run / "probe.json").read_text())
    change(saved)
    (run / "probe.json").write_text(json.dumps(saved))
    before = digest(run)
    r, _ = page(run, tmp_path, "--no-probe")
    assert r.returncode == 0 and "best head: none" in r.stdout, r.stdout  # measured again
    assert digest(run) == before


@pytest.mark.parametrize(
    "name, damage",
    [
        ("probe.json", lambda saved: DEEP),  # 4: measured again, as a malformed one is
        ("probe.json", lambda saved: saved.replace('"seed"', '"seed": 0, "seed"', 1)),  # 15
        ("metrics.jsonl", lambda saved: '{"step": 1, "val_loss": 2.0}\n' + DEEP),  # 4: left out
    ],
)
def test_a_damaged_saved_file_of_the_run_is_read_past(run, tmp_path, name, damage):
    text = damage((run / "probe.json").read_text())
    (run / name).write_text(text)
    r, html = page(run, tmp_path, "--no-probe")
    assert r.returncode == 0 and html.is_file(), r.stderr
    assert ("best head: none" in r.stdout) == (name == "probe.json"), r.stdout
    assert (run / name).read_text() == text


@pytest.mark.parametrize(
    "name, text",
    [
        ("meta.json", DEEP),  # 4
        ("meta.json", '{"tokenizer_file": "tokenizer.txt", "tokenizer_file": "x"}'),  # 15
        ("tokenizer.txt", '{"kind": ' + DEEP),  # 4
    ],
)
def test_a_damaged_meta_or_tokenizer_file_is_one_line_naming_it(run, name, text):
    (run / name).write_text(text)
    said = error_line(run_main("generate.py", "--ckpt", run, "--prompt", "a"))
    assert str(run / name) in said, said


@pytest.mark.slow
def test_a_fifo_as_probe_json_or_metrics_never_blocks_the_page(run, tmp_path):  # 8
    (run / "probe.json").unlink()
    os.mkfifo(run / "probe.json")
    os.mkfifo(run / "metrics.jsonl")
    html = tmp_path / "page.html"
    r = run_script(
        "generate.py", "--ckpt", run, "--attention", "--no-probe", "--html", html, timeout=60
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr and html.is_file(), r.stderr
    assert all(stat.S_ISFIFO((run / n).stat().st_mode) for n in ("probe.json", "metrics.jsonl"))

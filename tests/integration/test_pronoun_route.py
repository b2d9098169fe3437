"""From one's own corpus to a pronoun head: a run trained on its own text says, at --attention
and --probe, in one line, that it has no pronoun head and how to mix the pronouns in; and a
probe file can be written from sentences marked by words."""

import json
import shlex
import shutil

import pytest

from generation.pronoun_route import mix_command, pronoun_route
from runs.loading import Run
from tests.helpers import ROOT, run_generate, run_main


def run_of(data):
    return Run(None, None, {}, {"config": {"data": data}})


def test_only_a_run_of_its_own_text_alone_gets_the_route():
    own = pronoun_route(run_of({"source": "books/my.txt", "mix": []}))
    assert own.startswith("note: ") and "\n" not in own and "no pronoun head" in own
    assert own.endswith(mix_command(["books/my.txt"]))
    assert pronoun_route(run_of({"source": "pronouns", "mix": []})) is None
    mixed = {"source": "x", "mix": "tinyshakespeare:0..0.5,pronouns:1..0.5"}
    assert pronoun_route(run_of(mixed)) is None
    assert pronoun_route(Run(None, None, {}, {})) is None  # GPT-2, a hand-made run: unknown


def test_the_mix_command_is_one_train_py_accepts():
    argv = shlex.split(mix_command(["books/my.txt"]))
    assert argv[:3] == ["python", "train.py", "configs/shakespeare_pronouns.yaml"]
    done = run_main("train.py", *argv[2:], "--print-config")
    assert done.returncode == 0, done.stderr
    config = done.stdout
    assert "source: books/my.txt" in config and "out_dir: out/my+pronouns" in config
    assert "start_weight: 1.0" in config  # the pronouns first, where the head forms


@pytest.mark.slow
def test_attention_and_probe_on_a_run_of_own_text_say_it_has_no_pronoun_head(
    trained_export, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(trained_export[0], run)
    code, out, err = run_generate("--ckpt", run, "--attention", "The cat sat because it ran.")
    [line] = [x for x in err.splitlines() if "no pronoun head" in x]
    assert code == 0 and "data.mix=" in line and "pronouns:1..0.5" in line
    args = ("--probe", "--json", "--permutations", "5", "--no-causal")
    code, out, err = run_generate("--ckpt", run, *args)
    assert code == 0 and "no pronoun head" in err and json.loads(out)["best_head"]


MARKED = (
    "The [dog] chased the {cat} because <it> was hungry.\trole\n"
    "\n"
    "The {kettle} sat by the [king], and <he> ruled the land.\n"
)


def test_marked_sentences_become_the_probe_file_that_generate_reads(tmp_path):
    from data.pronouns.jsonl import read_jsonl
    from data.pronouns.marked import main
    from tests.helpers import make_run

    (tmp_path / "marked.txt").write_text(MARKED)
    out = tmp_path / "probe.jsonl"
    assert main([str(tmp_path / "marked.txt"), str(out)]) == 0
    first, second = read_jsonl(out)
    assert first.text == "The dog chased the cat because it was hungry."
    assert first.text[slice(*first.antecedent)] == "dog" and first.decided_by == "role"
    assert [first.text[slice(*d)] for d in first.distractors] == ["cat"]
    assert second.text[slice(*second.pronoun)] == "he" and second.decided_by is None
    make_run(tmp_path / "run", "bpe", 64)
    args = ("--probe", out, "--json", "--permutations", "5", "--no-causal")
    code, printed, err = run_generate("--ckpt", tmp_path / "run", *args)
    assert code == 0 and json.loads(printed)["counts"]["all"]["examples"] == 2, err


@pytest.mark.parametrize(
    "line, says",
    [
        ("The dog chased the {cat} because <it> was hungry.", "exactly one antecedent"),
        ("The [dog] chased the cat because <it> was hungry.", "at least one other candidate"),
        ("The [dog] chased the {cat} because it was hungry.", "exactly one pronoun"),
        ("The [dog chased the {cat} because <it> was hungry.", "unclosed"),
        ("The [dog] chased the {cat} because <it> was.\tsize", "'size' is not one of"),
    ],
)
def test_a_wrong_mark_is_a_one_line_error_naming_its_line(tmp_path, capsys, line, says):
    from data.pronouns.marked import main

    (tmp_path / "m.txt").write_text("\n" + line + "\n")
    assert main([str(tmp_path / "m.txt"), str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2" in err and says in err


def test_the_readmes_own_text_shows_the_mix_the_note_gives():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    own = readme[readme.index("## Your own text") :].split("\n## ")[0]
    assert mix_command(["my.txt"]) in own and "python -m data.pronouns.marked" in own

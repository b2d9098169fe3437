"""A saved probe result is never silently made poorer: `generate.py --probe` with fewer parts
than probe.json holds (`--no-causal` after `--patch --circuit`) keeps the parts it did not
measure, in probe.json, in report.txt and on the page, which says what it shows and from which
run; a file of another checkpoint or other examples is replaced, with a note. Driven through
main() on a real run folder, as tests/e2e/test_probe_cli.py does."""

import copy
import json
import shutil

import pytest

from analysis.conform import mismatches
from analysis.results import SavedStudy
from runs.folder import PROBE_FILE, REPORT_FILE, merged
from tests.helpers import make_run, run_generate

NOW = "2030-01-02T03:04:05+00:00"


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """A run folder whose probe.json holds every part: the probe, the causal tests, patching and
    both circuits; and that file's contents."""
    folder = tmp_path_factory.mktemp("kept") / "run"
    make_run(folder, "bpe", 64)
    argv = ("--ckpt", folder, "--probe", "--patch", "--circuit", "--permutations", "5")
    code, _, err = run_generate(*argv)
    assert code == 0, err
    return folder, json.loads((folder / PROBE_FILE).read_text())


@pytest.fixture
def run(full_run, tmp_path):
    """A copy of full_run's folder to change."""
    folder = tmp_path / "run"
    shutil.copytree(full_run[0], folder)
    return folder


def saved(folder):
    return json.loads((folder / PROBE_FILE).read_text())


def test_a_probe_without_the_causal_tests_keeps_every_saved_part_in_file_report_and_page(
    full_run, run, tmp_path
):
    _, full = full_run
    assert {"causal", "patching", "circuit", "choice"} <= full.keys()
    code, out, err = run_generate("--ckpt", run, "--probe", "--no-causal", "--permutations", "7")
    assert code == 0 and "Causal test" not in out  # the terminal shows what was measured now
    assert "keeps causal tests, patching and circuits measured before" in err, err
    after = saved(run)
    assert after["permutations"] == 7  # the probe's part is the new one
    for part in ("causal", "patching", "circuit", "choice"):
        assert after[part] == full[part], part  # the rest as it was measured
    assert mismatches(after, SavedStudy) == []
    when = after["measured"]
    assert when["causal"] == when["patching"] == when["circuit"] == full["measured"]["probe"]
    assert when["probe"] >= when["causal"]
    report = (run / REPORT_FILE).read_text()
    said = " ".join(report.split())  # the wrapped lines read as one
    assert said.startswith(f"Measured on {run}, checkpoint step 0") and "parts: probe" in said
    for section in ("Causal test at the pronoun", "Activation patching at", "Circuit at the"):
        assert section in report, section
    page = tmp_path / "maps.html"
    code, _, err = run_generate("--ckpt", run, "--attention", "--html", page)
    assert code == 0 and err == ""  # the saved result, reused as it is
    html = page.read_text()
    for section in ('class="causal"', 'class="patching"', 'class="circuit"'):
        assert section in html, section
    assert "parts: probe, causal tests, patching, circuits" in " ".join(html.split())


def test_the_natural_sentences_stay_beside_a_new_probe_with_their_own_parts(run):
    natural = ("--ckpt", run, "--probe", "natural", "--permutations", "5")
    assert run_generate(*natural)[0] == 0
    causal = saved(run)["natural"]["causal"]
    assert run_generate("--ckpt", run, "--probe", "--no-causal", "--permutations", "5")[0] == 0
    assert saved(run)["natural"]["causal"] == causal  # the built-in sets' probe keeps natural's
    code, _, err = run_generate(*natural, "--no-causal")
    assert code == 0 and "keeps the natural sentences' causal tests" in err, err
    after = saved(run)
    assert after["natural"]["causal"] == causal and "causal" in after  # and its own causal tests
    report = (run / REPORT_FILE).read_text()
    assert "natural sentences: probe, causal tests" in " ".join(report.split()[:60])


def test_a_file_of_another_checkpoint_is_replaced_and_the_note_names_what_went(run):
    other = saved(run)
    other["checkpoint"]["step"] = 999  # a probe of an earlier checkpoint: other heads, maybe
    (run / PROBE_FILE).write_text(json.dumps(other))
    code, _, err = run_generate("--ckpt", run, "--probe", "--no-causal", "--permutations", "5")
    assert code == 0
    assert "held causal tests, patching and circuits of another checkpoint" in err, err
    after = saved(run)
    assert after["checkpoint"]["step"] == 0 and not {"causal", "patching", "circuit"} & after.keys()


def test_a_file_of_other_examples_is_measured_again_for_the_page(run, tmp_path):
    other = saved(run)
    other["examples"] = "0" * 16  # as after a change of the generator or the lexicon
    (run / PROBE_FILE).write_text(json.dumps(other))
    code, _, err = run_generate("--ckpt", run, "--attention", "--html", tmp_path / "p.html")
    assert code == 0 and "running the probe" in err and "saved to" in err, err
    assert saved(run)["examples"] != other["examples"]


def test_the_causal_tests_stay_only_while_they_single_out_the_new_best_head(full_run):
    _, full = full_run
    new = {k: v for k, v in full.items() if k not in ("causal", "measured")}
    assert merged(full, new, NOW)["causal"] == full["causal"]
    moved = copy.deepcopy(new)
    moved["best_head"]["head"] = 1 - full["best_head"]["head"]  # another head of the 2
    assert "causal" not in merged(full, moved, NOW)


def test_the_choice_twins_patching_stays_when_only_the_circuit_is_measured_again(full_run):
    _, full = full_run
    assert "patching" in full["choice"]
    new = {k: v for k, v in full.items() if k not in ("patching", "measured")}
    new["choice"] = {k: v for k, v in full["choice"].items() if k != "patching"}
    out = merged(full, new, NOW)
    assert out["choice"]["patching"] == full["choice"]["patching"]
    assert out["patching"] == full["patching"]
    assert out["measured"]["circuit"] == NOW != out["measured"]["patching"]

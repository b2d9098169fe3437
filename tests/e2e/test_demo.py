"""`make demo` after training, as a newcomer meets it: the Makefile's own generate.py commands,
each in a process of its own, on a small trained run folder. The terminal gets a short story;
the run folder keeps the full report, the same as `--probe --patch --circuit` prints, under a
line that says what it holds. And the
pieces it is made of: the verdict's numbers, the one terminal width."""

import fcntl
import json
import os
import shlex
import struct
import termios

import pytest

from cli import PIPED_WIDTH, fit_width, terminal_width
from data.pronouns import ATTENTION_EXAMPLES
from reports.text_reports import NATURAL_HEADING
from reports.verdict_report import format_natural, format_verdict
from runs.folder import REPORT_FILE
from tests.helpers import ROOT, RUN_TEXT, run_main, run_script, tiny_config
from training.loop import train

BUDGET = 55  # lines the demo may print after training (issue 50): make's own lines included
DEMO_RUN = "out/default"  # the run folder the Makefile's commands name


def demo_recipe():
    """The demo target's recipe lines after the training line, as the Makefile writes them."""
    lines = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    recipe = [line.strip() for line in lines.splitlines()[1:]]
    start = next(i for i, line in enumerate(recipe) if "train.py" in line)
    return recipe[start + 1 :]


SILENT = ">/dev/null"  # a recipe line that only measures: its output goes nowhere


def generate_argv(line, run):
    """A recipe line's generate.py arguments, on the run folder `run` instead of the demo's."""
    argv = shlex.split(line.split("generate.py", 1)[1].replace(SILENT, ""))
    argv = [str(run) + a[len(DEMO_RUN) :] if a.startswith(DEMO_RUN + "/") else a for a in argv]
    return ["--ckpt", str(run), *argv]


def make_lines(line):
    """The lines make itself prints for a recipe line: the command, unless @-quiet, and each echo
    of an @-line."""
    return line.count("echo") if line.startswith("@") else 1


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A run folder as `python train.py` leaves it: 20 steps of a 2 x 2 x 32 model on the built-in
    sentences with a small BPE vocabulary, so the probe reads the built-in sets and patching finds
    twins."""
    folder = tmp_path_factory.mktemp("demo")
    (folder / "text.txt").write_text(RUN_TEXT * 20)
    out = folder / "run"
    train(
        tiny_config(
            folder, out, "tokenizer.kind=bpe", "tokenizer.vocab_size=300", "model.block_size=64"
        )
    )
    return out


@pytest.mark.slow
def test_the_demo_tells_a_short_story_and_keeps_the_full_report_in_the_run_folder(trained_run):
    recipe = demo_recipe()
    printed, outputs = 0, {}
    for line in recipe:
        printed += make_lines(line)
        if "generate.py" in line:
            r = run_script("generate.py", *generate_argv(line, trained_run), timeout=300)
            assert r.returncode == 0, r.stderr
            if SILENT not in line:
                printed += len(r.stdout.splitlines())
                outputs[line] = r.stdout
    assert printed <= BUDGET, printed

    probe = json.loads((trained_run / "probe.json").read_text())
    report = trained_run / REPORT_FILE
    [verdict] = [out for line, out in outputs.items() if "--circuit --summary" in line]
    best = probe["best_head"]
    said = " ".join(verdict.split())  # the wrapped lines read as one
    for number in (
        f"L{best['layer']} H{best['head']}",
        f"cand@1 {best['test']:.1%}",
        f"random candidate {probe['baselines']['random']['test']:.1%}",
        f"p = {probe['p_value']:.4f}",
        f"antecedent in {probe['model_answer']['all']['cand_at_1']['substitution']:.1%}",
    ):
        assert number in said, (number, verdict)
    assert "Knockout" in said and "identity" in said and "choice" in said
    assert verdict.splitlines()[-1] == f"full report: {report}"
    [natural] = [out for line, out in outputs.items() if "natural --summary" in line]
    assert f"cand@1 {probe['natural']['best_head']['test']:.1%}" in " ".join(natural.split())
    # The terminal shows the headline sentence's maps; the page has every sentence's.
    [maps] = [out for line, out in outputs.items() if "--attention" in line]
    assert ATTENTION_EXAMPLES[0] in maps
    assert not any(sentence in maps for sentence in ATTENTION_EXAMPLES[1:])
    page = (trained_run / "attention.html").read_text()
    assert "queen" in page and "waiter" in page  # the second and third sentences' words

    # What it holds, then the full report, as --probe --patch --circuit prints it (its behaviour
    # without --summary), then natural's under its heading.
    measured, _, kept = report.read_text().partition("\n\n")
    said = " ".join(measured.split())
    assert said.startswith(f"Measured on {trained_run}, checkpoint step 20"), said
    assert "parts: probe, causal tests, patching, circuits; natural sentences:" in said, said
    r = run_script("generate.py", "--ckpt", trained_run, "--probe", "--patch", "--circuit")
    assert r.returncode == 0 and "Question 2, choice" in r.stdout, r.stderr
    assert kept.startswith(r.stdout + "\n" + NATURAL_HEADING + "\n\n"), kept[:500]
    assert "natural cand@1 by layer" in kept.split(NATURAL_HEADING)[1]
    assert len(r.stdout.splitlines()) > 3 * len(verdict.splitlines())


@pytest.mark.slow
def test_the_demo_measures_once_then_shows_the_map_then_the_verdict(trained_run, monkeypatch):
    """The recipe's order (samples, the silent measure, the map, the verdict), and the verdict
    read from what the measure kept: with the study made to fail, --summary still says it, and
    asking for other shuffles than were kept measures again."""
    recipe = demo_recipe()
    at = {
        key: next(i for i, line in enumerate(recipe) if key in line)
        for key in ("--prompt", SILENT, "--attention", "--circuit --summary", "natural --summary")
    }
    assert list(at.values()) == sorted(at.values()), at
    assert (
        run_main(
            "generate.py", "--ckpt", trained_run, "--probe", "--patch", "--circuit", "--json"
        ).returncode
        == 0
    )
    assert (
        run_main("generate.py", "--ckpt", trained_run, "--probe", "natural", "--json").returncode
        == 0
    )

    def no_study(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr("generation.probe_mode.study", no_study)
    for probe in (["--probe"], ["--probe", "natural"]):
        flags = ["--patch", "--circuit"] if probe == ["--probe"] else []
        r = run_main("generate.py", "--ckpt", trained_run, *probe, *flags, "--summary")
        assert r.returncode == 0 and "full report:" in r.stdout, r.stderr
    with pytest.raises(AssertionError, match="measured again"):
        run_main(
            "generate.py", "--ckpt", trained_run, "--probe", "--permutations", "7", "--summary"
        )


def default_study():
    """The default model's study as docs/results/default.json keeps it (`--probe --patch
    --circuit --json`), and its natural sentences' (`--probe natural --json`)."""
    saved = json.loads((ROOT / "docs" / "results" / "default.json").read_text())["outputs"]
    return saved["probe"], saved["natural"]


def test_the_verdict_says_the_numbers_of_its_result_in_80_columns():
    study, natural = default_study()
    verdict = fit_width(format_verdict(study), PIPED_WIDTH)
    assert max(map(len, verdict.splitlines())) <= PIPED_WIDTH
    assert len(verdict.splitlines()) <= 16  # a few lines, not a report (each reason: 5 of them)
    said = " ".join(verdict.split())
    knockout = study["causal"]["best_head"]
    circuit, choice = study["circuit"], study["choice"]
    for number in (
        f"cand@1 {study['best_head']['test']:.1%}",
        f"the nearest {study['baselines']['nearest']['test']:.1%}",
        f"p = {study['p_value']:.4f}",
        f"loss {knockout['antecedent']:.2f} nats",
        f"(the control) {knockout['distractor']:+.2f} nats",
        f"{circuit['size']} of {circuit['n_edges']} keep {100 * circuit['faithfulness']:.1f}%",
        f"{choice['circuit']['size']} keep {100 * choice['circuit']['faithfulness']:.1f}%",
        *(
            f"{kind}, {'yes' if part['circuit']['drawn'] else 'no'} "
            f"({100 * part['accuracy']:.1f}%, {100 * part['flip']:.1f}%"
            + (
                ")"
                if not part["circuit"]["drawn"]
                else "; decided by"
                if part["deciding"]
                else "; no single head decides it"
            )
            for kind, part in choice["by_kind"].items()
        ),
        *(  # a reason it chooses by names the heads that decide it
            f"{name[:2]} {name[2:]}"
            for part in choice["by_kind"].values()
            if part["circuit"]["drawn"]
            for name in part["deciding"]
        ),
    ):
        assert number in said, (number, said)
    line = format_natural(natural, study)
    assert "\n" not in line
    assert (
        f"cand@1 {natural['best_head']['test']:.1%} ({study['best_head']['test']:.1%} on test)"
        in line
    )
    assert f"{natural['model_answer']['all']['cand_at_1']['substitution']:.1%}" in line
    lexicon, unseen = natural["by_lexicon"]["lexicon"], natural["by_lexicon"]["unseen"]
    for row in (lexicon, unseen):  # the head apart on the lexicon's nouns and on the others
        assert f"{row['cand_at_1']['head']:.1%} on the {row['examples']} " in line
    # Plainly: the head finds the antecedent on English; does the model's own answer follow?
    answer = natural["model_answer"]["all"]
    follows = answer["cand_at_1_ci"]["substitution"][1] >= natural["best_head"]["test"]
    plainly = line.split(" Plainly: ", 1)[1]
    assert ("far less often" in plainly) != follows, plainly


def test_a_result_without_causal_tests_or_circuits_has_a_verdict_without_them():
    study, _ = default_study()
    probe_only = {
        k: v for k, v in study.items() if k not in ("causal", "circuit", "choice", "model_answer")
    }
    verdict = format_verdict(probe_only)
    assert verdict.count("\n") == 0 and "Knockout" not in verdict and "Circuits" not in verdict


def sized_terminal(columns):
    """A pseudo-terminal `columns` wide (0: one nobody sized): its two ends' file objects."""
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return os.fdopen(primary, "rb"), os.fdopen(secondary, "w")


@pytest.mark.parametrize("columns, width", [(123, 123), (0, PIPED_WIDTH)])
def test_the_terminal_width_is_the_terminals_own_else_the_piped_width(columns, width, tmp_path):
    reader, terminal = sized_terminal(columns)
    with reader, terminal:
        assert terminal_width(terminal) == width
    with open(tmp_path / "file.txt", "w") as file:
        assert terminal_width(file) == PIPED_WIDTH == 80
    assert terminal_width(object()) == PIPED_WIDTH  # no isatty at all

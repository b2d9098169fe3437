"""generate.py as a user runs it: a real process on a real run folder."""

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys

import pytest
import torch

import generate
from data.pronouns import ATTENTION_EXAMPLES
from generation.sample_mode import sample, unescaped
from model.checkpoint import NoCheckpoint
from model.device import generation_threads
from model.sampling import generate as sample_tokens
from reports.formatting import signed
from runs.folder import PROBE_FORMAT, examples_id
from runs.loading import load_run
from tests.helpers import ROOT, error_line, make_run, run_generate, run_main, run_script


@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("char_run")
    return (folder, *make_run(folder, "char", 32))


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe_run")
    return (folder, *make_run(folder, "bpe", 64))


def run_cli(*args, **env):
    # One thread: the models are tiny, and threads only fight over a busy test machine.
    env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    env.pop("NO_COLOR", None)
    return run_script("generate.py", *args, env=env)


@pytest.mark.slow
def test_sampling_streams_the_prompt_and_its_continuation(char_run):
    folder, model, tokenizer = char_run
    proc = run_cli(
        "--ckpt",
        folder,
        "--prompt",
        "The owl",
        "--max-new-tokens",
        20,
        "--temperature",
        0,
        "--num-samples",
        2,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    prompt = torch.tensor([tokenizer.encode("The owl")])
    ids = torch.cat(list(sample_tokens(model, prompt, 20, temperature=0))).tolist()
    sample = "The owl" + tokenizer.decode(ids)
    sample += "" if sample.endswith("\n") else "\n"
    assert proc.stdout == sample + "---\n" + sample  # greedy: both samples alike


@pytest.mark.slow
def test_the_same_seed_gives_the_same_samples_in_process_and_out(char_run):
    def argv(seed):
        return [
            "--ckpt",
            str(char_run[0]),
            "--prompt",
            "The",
            "--max-new-tokens",
            "15",
            "--top-k",
            "10",
            "--top-p",
            "0.9",
            "--num-samples",
            "2",
            "--seed",
            str(seed),
        ]

    out, other = io.StringIO(), io.StringIO()
    assert generate.main(argv(3), out=out, err=io.StringIO()) == 0
    proc = run_cli(*argv(3), "--no-cache")  # the cache does not change what is sampled
    assert proc.returncode == 0 and proc.stdout == out.getvalue()
    assert out.getvalue().count("\n---\n") == 1
    generate.main(argv(4), out=other, err=io.StringIO())
    assert other.getvalue() != out.getvalue()


def test_a_prompt_longer_than_block_size_is_cropped_with_a_note(char_run):
    out, err = io.StringIO(), io.StringIO()
    prompt = "The animal in the jungle went out on a hunt because"  # 51 chars > block_size 32
    argv = ["--ckpt", str(char_run[0]), "--prompt", prompt, "--max-new-tokens", "5"]
    assert generate.main(argv, out=out, err=err) == 0
    assert (
        err.getvalue().startswith("note: ") and "51" in err.getvalue() and "32" in err.getvalue()
    )  # the counts
    assert out.getvalue().startswith(prompt)


@pytest.mark.slow
def test_attention_prints_a_line_per_layer_and_head_in_80_columns_and_no_colour_into_a_pipe(
    bpe_run,
):
    proc = run_cli("--ckpt", bpe_run[0], "--attention", COLORTERM="truecolor")
    assert proc.returncode == 0, proc.stderr
    heads = [line for line in proc.stdout.splitlines() if re.match(r"L\d+ H\d+  ", line)]
    assert {line[:5] for line in heads} == {"L0 H0", "L0 H1", "L1 H0", "L1 H1"}
    # Each head's most attended word once a sentence, though a sentence too wide for the pipe's
    # 80 columns goes on in a second block of columns; a flat head (named under its map) none.
    flat = [line for line in proc.stdout.splitlines() if line.startswith("flat: ")]
    flat_heads = sum(4 if "every head" in f else len(re.findall(r"L\d H\d", f)) for f in flat)
    assert sum(line.count("▲") for line in heads) + flat_heads == 2 * 2 * len(ATTENTION_EXAMPLES)
    assert len(heads) > 2 * 2 * len(ATTENTION_EXAMPLES) and max(map(len, heads)) <= 80
    assert "\x1b" not in proc.stdout


def test_missing_run_folder_is_a_one_line_error(tmp_path):
    said = error_line(run_main("generate.py", "--ckpt", tmp_path / "nothing"))
    assert "no checkpoint at" in said, said


def test_a_truncated_checkpoint_is_a_one_line_error(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 16)
    data = (folder / "ckpt.pt").read_bytes()
    (folder / "ckpt.pt").write_bytes(data[: len(data) // 2])
    said = error_line(run_main("generate.py", "--ckpt", folder))
    assert "truncated or not a checkpoint" in said, said


class WritesAMarker:
    """Unpickling this runs open(marker, "w"): what a malicious checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_checkpoint_carrying_code_is_refused_and_the_code_never_runs(tmp_path):
    folder, marker = tmp_path / "run", tmp_path / "pwned"
    make_run(folder, "char", 16)
    ckpt = torch.load(folder / "ckpt.pt", weights_only=True)
    ckpt["payload"] = WritesAMarker(marker)
    torch.save(ckpt, folder / "ckpt.pt")
    torch.load(folder / "ckpt.pt", weights_only=False)  # the payload works when trusted...
    assert marker.exists()
    marker.unlink()
    said = error_line(run_main("generate.py", "--ckpt", folder))
    assert "not a plain-data checkpoint" in said, said
    assert not marker.exists()


@pytest.mark.slow
def test_bad_values_are_one_line_errors_in_a_real_process(char_run):
    said = error_line(run_cli("--ckpt", char_run[0], "--temperature", -1))
    assert "--temperature" in said, said
    said = error_line(run_cli("--temperature", "hot"))
    assert "invalid float value" in said, said


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--temperature", "-0.5"], ("--temperature", "-0.5")),
        (["--top-p", "0"], ("--top-p", "(0, 1]")),
        (["--top-p", "1.5"], ("--top-p", "(0, 1]", "1.5")),
        (["--top-k", "0"], ("--top-k", "positive integer")),
        (["--num-samples", "0"], ("--num-samples", "positive integer")),
        (["--max-new-tokens", "-1"], ("--max-new-tokens", "-1")),
        (["--prompt", ""], ("--prompt", "empty")),
        (["--prompt", "€"], ("U+20AC", "vocabulary")),
        (["--temperature", "nan"], ("--temperature", "finite", "nan")),
        (["--temperature", "inf"], ("--temperature", "finite", "inf")),
        (["--temperature", "1e-320"], ("--temperature", "1e-06")),
        (["--top-p", "nan"], ("--top-p", "(0, 1]", "nan")),
        (["--seed", str(2**64)], ("--seed", "0..18446744073709551615", "2**64 - 1")),
        (["--seed", "-1"], ("--seed", "0..18446744073709551615")),
        (["--layer", str(10**30), "--head", "0", "--attention"], ("--layer", "0..1")),
        (["--device", "toaster"], ("unknown device", "'toaster'")),
        (["--device", "tpu"], ("unknown device", "'tpu'")),
        (["--device", "cuda:x"], ("unknown device", "'cuda:x'")),
        (["--device", "cpu:0:1"], ("unknown device", "'cpu:0:1'")),
        (["--device", ""], ("unknown device", "''")),
        (
            ["--device", "meta"],
            ("unsupported device", "'meta'"),
        ),  # torch knows it; generation cannot use it
        (["--device", "xla"], ("unsupported device", "'xla'")),
    ],
)
def test_bad_values_are_one_line_errors(char_run, argv, names):
    err = io.StringIO()
    assert generate.main(["--ckpt", str(char_run[0]), *argv], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and all(name in err.getvalue() for name in names), (
        err.getvalue()
    )


def test_the_largest_seed_and_a_huge_top_k_are_fine(char_run):
    argv = [
        "--ckpt",
        str(char_run[0]),
        "--max-new-tokens",
        "3",
        "--seed",
        str(2**64 - 1),
        "--top-k",
        str(10**30),
    ]
    assert generate.main(argv, out=io.StringIO(), err=io.StringIO()) == 0


def test_a_run_folder_that_is_a_file_or_lacks_a_checkpoint_is_a_one_line_error(char_run, tmp_path):
    err = io.StringIO()
    ckpt = char_run[0] / "ckpt.pt"
    assert generate.main(["--ckpt", str(ckpt)], out=io.StringIO(), err=err) == 2
    said = err.getvalue()
    assert said.startswith("error: ") and said.count("\n") == 1 and str(ckpt) in said
    assert said.rstrip().endswith(f"--ckpt {char_run[0]}")  # the command to type instead
    err = io.StringIO()
    assert generate.main(["--ckpt", str(tmp_path)], out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("error: ") and "no checkpoint" in err.getvalue()
    assert str(tmp_path / "ckpt.pt") in err.getvalue()
    assert err.getvalue().count("\n") == 1


def test_a_missing_checkpoint_is_a_typed_error_the_cli_words_with_its_command(tmp_path):
    with pytest.raises(NoCheckpoint) as e:  # the Python call: no command-line advice
        load_run(tmp_path)
    assert e.value.path == tmp_path / "ckpt.pt" and "python train.py" not in str(e.value)
    code, _, err = run_generate("--ckpt", tmp_path)
    assert code == 2 and "python train.py" in err and err.count("\n") == 1


def test_ctrl_c_while_loading_prints_one_line_and_exits_130(char_run, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "load_run", interrupted)
    err = io.StringIO()
    try:
        code = generate.main(["--ckpt", str(char_run[0])], out=io.StringIO(), err=err)
    except KeyboardInterrupt:  # escaping, it would stop the whole test session
        pytest.fail("KeyboardInterrupt escaped generate.main")
    assert code == 130 and err.getvalue() == "interrupted\n"


@pytest.mark.slow
def test_ctrl_c_while_sampling_stops_a_real_process_without_a_traceback(char_run):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # A runner that starts jobs in the background (nohup ... &) leaves SIGINT ignored in its
    # children; a terminal's Ctrl-C meets the default handler, so the child gets that back.
    proc = subprocess.Popen(
        [sys.executable, "generate.py", "--ckpt", str(char_run[0]), "--max-new-tokens", str(10**9)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    try:
        assert os.read(proc.stdout.fileno(), 1)  # the prompt: main() is running
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and stderr.decode() == "interrupted\n"


def test_the_default_run_folder_comes_from_the_default_config(tmp_path):
    config = tmp_path / "default.yaml"
    config.write_text("out_dir: out/mine\nseed: 1\n")
    assert generate.default_out_dir(config) == "out/mine"
    config.write_text("seed: 1\n")
    assert generate.default_out_dir(config) == "out/default"  # the schema's default
    config.write_text("out_dri: out/mine\n")
    with pytest.raises(ValueError, match="'out_dri'.*did you mean 'out_dir'"):
        generate.default_out_dir(config)  # read as train.py reads it, never guessed


# --- stop strings, the end-of-text token, prompts from files --------------------------------


def sample_cli(run, *argv):
    """generate.py's sampling on an in-memory Run: (what each write printed, stderr)."""
    args = generate.build_parser().parse_args([str(a) for a in argv])
    generate.check_args(args)
    writes, err = [], io.StringIO()
    out = io.StringIO()
    out.write = writes.append  # every piece as it streams
    sample(run, args, "cpu", out, err)
    return writes, err.getvalue()


@pytest.fixture(scope="module")
def greedy_bpe(bpe_run):
    """The bpe run loaded as generate.py loads it, and its greedy continuation of "The owl",
    token by token."""
    from runs.loading import load_run

    run = load_run(bpe_run[0])
    prompt = torch.tensor([run.tokenizer.encode("The owl")])
    ids = torch.cat(list(sample_tokens(run.model, prompt, 20, temperature=0))).tolist()
    return run, ids, [run.tokenizer.decode([i]) for i in ids]


def test_a_stop_string_across_tokens_ends_each_sample_before_it_and_never_streams(greedy_bpe):
    run, _, pieces = greedy_bpe
    text = "".join(pieces)
    at = len("".join(pieces[:6]))
    stop = text[at - 1 : at + 1]  # the last character of token 6 and the first of token 7
    assert len(pieces[5]) > 1 and len(pieces[6]) > 1  # so it cuts into both tokens
    sample = "The owl" + text[: text.index(stop)] + "\n"
    writes, err = sample_cli(
        run,
        "--prompt",
        "The owl",
        "--max-new-tokens",
        20,
        "--temperature",
        0,
        "--num-samples",
        2,
        "--stop",
        stop,
        "--stop",
        "never in it",
    )
    assert "".join(writes) == sample + "---\n" + sample and err == ""
    # Nothing of the stop string was printed on the way: the first piece of it was held back.
    # (Each sample is the prompt, the streamed pieces, then its closing "\n".)
    first = writes[: writes.index("---\n")]
    assert first[0] == "The owl" and first[-1] == "\n"
    assert not any(stop[0] in w for w in first[1:-1])


def test_the_end_of_text_token_ends_a_sample_unprinted(greedy_bpe):
    run, ids, pieces = greedy_bpe
    run.tokenizer.eot_id = ids[6]  # as if token 7 were GPT-2's <|endoftext|>
    try:
        writes, _ = sample_cli(
            run,
            "--prompt",
            "The owl",
            "--max-new-tokens",
            20,
            "--temperature",
            0,
            "--num-samples",
            2,
        )
    finally:
        run.tokenizer.eot_id = None
    first = ids.index(ids[6])
    sample = "The owl" + "".join(pieces[:first]) + "\n"
    assert "".join(writes) == sample + "---\n" + sample


def test_a_prompt_file_is_the_prompt(char_run, tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text("The owl", encoding="utf-8")
    argv = ["--ckpt", str(char_run[0]), "--max-new-tokens", "10", "--temperature", "0"]
    by_flag, by_file = io.StringIO(), io.StringIO()
    assert generate.main([*argv, "--prompt", "The owl"], out=by_flag, err=io.StringIO()) == 0
    assert generate.main([*argv, "--prompt-file", str(path)], out=by_file, err=io.StringIO()) == 0
    assert by_file.getvalue() == by_flag.getvalue() and by_file.getvalue().startswith("The owl")


@pytest.mark.parametrize(
    "content, names",
    [
        (None, ("does not exist",)),
        ("folder", ("folder",)),
        (b"The \xff owl", ("UTF-8", "offset 4")),
        (b"", ("empty",)),
    ],
)
def test_prompt_file_errors_are_one_line(char_run, tmp_path, content, names):
    path = tmp_path / "prompt.txt"
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    err = io.StringIO()
    argv = ["--ckpt", str(char_run[0]), "--prompt-file", str(path)]
    assert generate.main(argv, out=io.StringIO(), err=err) == 2
    said = err.getvalue()
    assert said.count("\n") == 1 and all(name in said for name in (str(path), *names)), said


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--prompt", "a", "--prompt-file", "p.txt"], ("--prompt-file", "one of them")),
        (["--stop", ""], ("--stop", "empty")),
        (["--attention", "--stop", "."], ("--stop", "sampling")),
        (["--probe", "--prompt", "a"], ("--prompt", "sampling")),
        (["--threads", "0"], ("--threads", "positive integer")),
        (["--no-probe"], ("--no-probe", "--html")),
    ],
)
def test_new_flag_mistakes_are_one_line_errors(char_run, argv, names):
    err = io.StringIO()
    assert generate.main(["--ckpt", str(char_run[0]), *argv], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and all(name in err.getvalue() for name in names), (
        err.getvalue()
    )


# --- threads ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_embd, requested, environ, threads",
    [
        (128, None, {}, 1),  # the default model: one thread
        (767, None, {}, 1),
        (768, None, {}, None),  # GPT-2 small's width and up: torch's default
        (1600, None, {}, None),
        (128, 3, {}, 3),  # --threads wins
        (768, 1, {}, 1),
        (128, None, {"OMP_NUM_THREADS": "2"}, None),  # the user's environment is respected
    ],
)
def test_generation_threads(n_embd, requested, environ, threads):
    assert generation_threads(n_embd, requested, environ) == threads


# --- the probe's result, saved for --html -------------------------------------------------------

SENTENCE = "The king smiled because he ruled the land."


def test_html_reuses_the_probe_saved_for_this_checkpoint_and_says_when_it_runs_it(tmp_path):
    folder, page = tmp_path / "run", tmp_path / "maps.html"
    make_run(folder, "bpe", 64)
    code, out, err = run_generate("--ckpt", folder, "--probe", "--json", "--permutations", 5)
    assert code == 0 and err == ""
    saved = json.loads((folder / "probe.json").read_text())
    checkpoint = {"step": 0, "best_val_loss": None}
    when = dict.fromkeys(("probe", "causal"), saved["measured"]["probe"])
    assert saved == {
        **json.loads(out),
        "checkpoint": checkpoint,
        "format_version": PROBE_FORMAT,
        "examples": examples_id(),
        "measured": when,
    }
    best = saved["best_head"]
    # A random model's best head seldom beats chance, and 5 shuffles cannot show it (p >= 1/6):
    # said here as a probe whose head does (p < 0.05), so that the marks have a head to mark.
    (folder / "probe.json").write_text(json.dumps({**saved, "p_value": 0.001}))

    code, out, err = run_generate("--ckpt", folder, "--attention", SENTENCE, "--html", page)
    assert code == 0 and err == ""  # no probe run: the saved one is this checkpoint's
    assert f"(outlined, the probe's best head: layer {best['layer']} head {best['head']})" in out
    # The terminal's table marks the same head's row, and says what the mark means.
    marked = [line.split()[:3] for line in out.splitlines() if "★" in line]
    assert marked[1:] == [[f"L{best['layer']}", f"H{best['head']}", "★"]], out
    assert f"★ the probe's best head, L{best['layer']} H{best['head']}" in marked_line(out)
    html = page.read_text()
    assert f"<dt>Checkpoint</dt><dd>{folder}</dd>" in html
    assert "<dt>Training step</dt><dd>0</dd>" in html
    assert f"L{best['layer']} H{best['head']}: dev {best['dev']:.1%}" in html

    # The same head at chance (p = 0.8): no star, no outline, and both say no head beats chance.
    (folder / "probe.json").write_text(json.dumps({**saved, "p_value": 0.8}))
    code, out, err = run_generate("--ckpt", folder, "--attention", SENTENCE, "--html", page)
    assert code == 0 and "★" not in out and "note: no head beats chance here" in out
    assert "(outlined, the probe's best head: none, no head beats chance here)" in out
    html = page.read_text()
    assert "<dt>Best head</dt><dd>no head beats chance here" in html and '"best":null' in html
    for part, end in (('<table class="probe-grid">', "</table>"), ('class="causal"', "</section")):
        if part in html:
            assert 'class="best"' not in html[html.index(part) :].split(end)[0]

    saved["checkpoint"]["step"] = 100  # a probe of another checkpoint: not this one's heads
    (folder / "probe.json").write_text(json.dumps(saved))
    code, out, err = run_generate("--ckpt", folder, "--attention", SENTENCE, "--html", page)
    assert code == 0 and err.count("\n") == 2, err
    assert "★" not in out  # the terminal marks no head it does not know to be this run's best
    assert (
        err.startswith("note: ") and "600" in err and "--no-probe" in err
    )  # how many, and how to skip
    assert (
        err.splitlines()[1]
        == f"note: the probe's result is saved to {folder / 'probe.json'} for next time"
    )
    again = json.loads((folder / "probe.json").read_text())
    assert again["checkpoint"]["step"] == 0  # saved anew, the causal tests with it, and shown
    assert again["permutations"] == 1000  # as --probe runs it: a p-value of 1000 shuffles
    b = again["causal"]["best_head"]
    cell = (
        rf"L{b['layer']} H{b['head']} alone</th><td[^>]*>{re.escape(signed(b['antecedent']))}<span"
    )
    assert re.search(cell, page.read_text())


def marked_line(out):
    """The terminal table's header line, which says what ★ marks."""
    return next(line for line in out.splitlines() if line.startswith("attention of "))


def test_html_where_the_probe_cannot_be_saved_says_so_once_and_never_that_it_was(
    tmp_path, monkeypatch
):
    import generation.probe_mode

    folder, page = tmp_path / "run", tmp_path / "maps.html"
    make_run(folder, "bpe", 64)

    def read_only(run, ckpt, result, natural=False):  # as write_atomic says it, read-only
        raise ValueError(f"could not write {folder / 'probe.json'}: Read-only file system")

    monkeypatch.setattr(generation.probe_mode, "save_probe", read_only)
    code, out, err = run_generate(
        "--ckpt", folder, "--attention", SENTENCE, "--html", page, "--no-causal"
    )
    assert code == 0 and page.is_file() and err.count("\n") == 2, err
    assert "not saved" in err.splitlines()[1] and " saved to" not in err, err


def test_no_probe_outlines_no_head_and_runs_nothing(tmp_path):
    folder, page = tmp_path / "run", tmp_path / "maps.html"
    make_run(folder, "bpe", 64)
    code, out, err = run_generate(
        "--ckpt", folder, "--attention", SENTENCE, "--html", page, "--no-probe"
    )
    assert code == 0 and err == "" and "(outlined, the probe's best head: none (--no-probe))" in out
    assert not (folder / "probe.json").exists() and "Best head" not in page.read_text()


def docs_stop_examples():
    """The sampling commands with --stop among docs/guide/generate.md's commands at a glance,
    each as the argv a shell gives generate.py."""
    page = (ROOT / "docs" / "guide" / "generate.md").read_text()
    block = page.split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#")[0])[2:] for line in block.splitlines() if "--stop" in line]


def test_the_docs_stop_examples_fire_on_a_trained_run(trained_export, tmp_path):
    """Each --stop example of the docs, on a run trained on lines that end in ".": the first
    sample is the one the same seed gives without --stop, cut where the string first comes,
    and no sample holds it."""
    examples = docs_stop_examples()
    assert len(examples) == 2
    story = tmp_path / "story.txt"
    story.write_text("the cat sat on a mat while one dog ran.\nthe old red")
    common = ["--ckpt", trained_export[0], "--seed", "1", "--max-new-tokens", "60"]
    for argv in examples:
        argv = [str(story) if a == "story.txt" else a for a in argv]
        at = argv.index("--stop")
        stop = unescaped(argv[at + 1])
        prompt = story.read_text() if "--prompt-file" in argv else argv[argv.index("--prompt") + 1]
        stopped = run_main("generate.py", *argv, *common)
        free = run_main("generate.py", *argv[:at], *argv[at + 2 :], *common)
        assert stopped.returncode == free.returncode == 0, stopped.stderr
        first = free.stdout.split("---\n")[0]
        cut = first.find(stop, len(prompt))
        assert cut != -1, (stop, first)  # the free sample writes the string: the stop can fire
        assert stopped.stdout.split("---\n")[0] == first[:cut] + "\n"
        for text in stopped.stdout.split("---\n"):
            assert text.startswith(prompt) and stop not in text[len(prompt) : -1]


def test_stop_backslash_n_as_a_shell_passes_it_means_a_newline(char_run):
    # A shell passes '\n' as a backslash and an n, $'\n' as a newline: the same stop either way.
    common = ["--ckpt", char_run[0], "--prompt", "The", "--max-new-tokens", "400", "--seed", "3"]
    free = run_main("generate.py", *common)
    assert free.returncode == 0 and "\n" in free.stdout[len("The") : -1]  # the sample has a newline
    escaped = run_main("generate.py", *common, "--stop", "\\n")
    real = run_main("generate.py", *common, "--stop", "\n")
    assert escaped.returncode == real.returncode == 0, escaped.stderr
    assert (
        escaped.stdout == real.stdout == free.stdout[: free.stdout.index("\n", len("The"))] + "\n"
    )


@pytest.mark.parametrize(
    "flag, says",
    [
        ("--num_samples=3", "did you mean --num-samples?"),
        ("--start=hello", "--prompt TEXT"),
        ("--init_from=resume", "--ckpt DIR"),
        ("--do-sample", "--temperature 0"),  # transformers' keyword: not --num-samples
        ("--max_length=50", "--max-new-tokens"),
    ],
)
def test_nanogpt_style_flags_get_what_to_type_here(flag, says):
    r = run_main("generate.py", flag)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert flag.startswith("--num") or "--num-samples" not in r.stderr

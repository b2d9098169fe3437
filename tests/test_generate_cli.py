"""generate.py as a user runs it: a real process on a real run folder."""

import io
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

import generate
from data.pronouns import ATTENTION_EXAMPLES
from data.tokenizer import train_tokenizer
from model.checkpoint import atomic_save
from model.gpt import GPT, GPTConfig
from model.sampling import generate as sample_tokens

ROOT = Path(__file__).resolve().parent.parent
TEXT = "\n".join(ATTENTION_EXAMPLES) + "\nabcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,'\n"


def make_run(folder, kind, block_size):
    """A run folder as train.py leaves it: ckpt.pt, meta.json and the tokenizer file."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(kind, TEXT * 5, None if kind == "char" else 300)
    tokenizer.save(folder / "tokenizer.txt")
    (folder / "meta.json").write_text(json.dumps({"tokenizer_file": "tokenizer.txt", "tokenizer_kind": kind}))
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=block_size, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    atomic_save({"model": model.state_dict(), "model_config": asdict(config), "step": 0}, folder / "ckpt.pt")
    return model, tokenizer


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
    return subprocess.run([sys.executable, "generate.py", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc, fragment):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr


def test_sampling_streams_the_prompt_and_its_continuation(char_run):
    folder, model, tokenizer = char_run
    proc = run_cli("--ckpt", folder, "--prompt", "The owl", "--max-new-tokens", 20,
                   "--temperature", 0, "--num-samples", 2)
    assert proc.returncode == 0 and proc.stderr == ""
    prompt = torch.tensor([tokenizer.encode("The owl")])
    ids = torch.cat(list(sample_tokens(model, prompt, 20, temperature=0))).tolist()
    sample = "The owl" + tokenizer.decode(ids)
    sample += "" if sample.endswith("\n") else "\n"
    assert proc.stdout == sample + "---\n" + sample  # greedy: both samples alike


def test_the_same_seed_gives_the_same_samples_in_process_and_out(char_run):
    def argv(seed):
        return ["--ckpt", str(char_run[0]), "--prompt", "The", "--max-new-tokens", "15",
                "--top-k", "10", "--top-p", "0.9", "--num-samples", "2", "--seed", str(seed)]

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
    assert err.getvalue().startswith("note: the prompt is 51 tokens; the model sees only its last 32")
    assert out.getvalue().startswith(prompt)


def test_attention_prints_one_line_per_layer_and_head_and_no_colour_into_a_pipe(bpe_run):
    proc = run_cli("--ckpt", bpe_run[0], "--attention", COLORTERM="truecolor")
    assert proc.returncode == 0, proc.stderr
    heads = [line for line in proc.stdout.splitlines() if re.match(r"L\d+ H\d+  ", line)]
    assert len(heads) == 2 * 2 * len(ATTENTION_EXAMPLES)
    assert all("▲" in line for line in heads)
    assert "\x1b" not in proc.stdout


def test_bpe_text_streams_without_broken_characters():
    tokenizer = train_tokenizer("bpe", "plain ascii text", 256)  # 256: bytes only, no merges
    text = "héllo wörld ✓"
    stream = generate.TextStream(tokenizer)
    pieces = [stream.push(i) for i in tokenizer.encode(text)]
    assert "".join(pieces) + stream.flush() == text
    assert all("\ufffd" not in piece for piece in pieces)
    assert pieces[1] == "" and pieces[2] == "é"  # é is two bytes: held back, then whole
    stream.push(tokenizer.encode("✓")[0])  # a character cut short stays visible at the end
    assert stream.flush() == "\ufffd"


def test_missing_run_folder_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("--ckpt", tmp_path / "nothing"), "no checkpoint at")


def test_a_truncated_checkpoint_is_a_one_line_error(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 16)
    data = (folder / "ckpt.pt").read_bytes()
    (folder / "ckpt.pt").write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_cli("--ckpt", folder), "truncated or not a checkpoint")


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
    assert_one_line_error(run_cli("--ckpt", folder), "not a plain-data checkpoint")
    assert not marker.exists()


def test_bad_values_are_one_line_errors_in_a_real_process(char_run):
    assert_one_line_error(run_cli("--ckpt", char_run[0], "--temperature", -1), "--temperature")
    assert_one_line_error(run_cli("--temperature", "hot"), "invalid float value")


@pytest.mark.parametrize("argv, fragment", [
    (["--temperature", "-0.5"], "--temperature must be 0"),
    (["--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1]"),
    (["--top-k", "0"], "--top-k must be at least 1"),
    (["--num-samples", "0"], "--num-samples must be at least 1"),
    (["--max-new-tokens", "-1"], "--max-new-tokens must be 0 or more"),
    (["--prompt", ""], "--prompt is empty"),
    (["--prompt", "€"], "is not in the vocabulary"),
    (["--temperature", "nan"], "--temperature must be 0 (greedy) or more, and finite, got nan"),
    (["--temperature", "inf"], "and finite, got inf"),
    (["--temperature", "1e-320"], "--temperature must be 0 (greedy) or at least 1e-06"),
    (["--top-p", "nan"], "--top-p must be in (0, 1]"),
    (["--seed", str(2**64)], "--seed must be in 0..18446744073709551615 (2**64 - 1)"),
    (["--seed", "-1"], "--seed must be in 0..18446744073709551615"),
    (["--layer", str(10**30), "--head", "0", "--attention"], "--layer must be in 0..1"),
    (["--device", "toaster"], "unknown device 'toaster'"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--device", "cuda:x"], "unknown device 'cuda:x'"),
    (["--device", "cpu:0:1"], "unknown device 'cpu:0:1'"),
    (["--device", ""], "unknown device ''"),
    (["--device", "meta"], "unsupported device 'meta'"),  # torch knows it; generation cannot use it
    (["--device", "xla"], "unsupported device 'xla'"),
])
def test_bad_values_are_one_line_errors(char_run, argv, fragment):
    err = io.StringIO()
    assert generate.main(["--ckpt", str(char_run[0]), *argv], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and fragment in err.getvalue()


def test_the_largest_seed_and_a_huge_top_k_are_fine(char_run):
    argv = ["--ckpt", str(char_run[0]), "--max-new-tokens", "3", "--seed", str(2**64 - 1),
            "--top-k", str(10**30)]
    assert generate.main(argv, out=io.StringIO(), err=io.StringIO()) == 0


def test_a_run_folder_that_is_a_file_or_lacks_a_checkpoint_is_a_one_line_error(char_run, tmp_path):
    err = io.StringIO()
    ckpt = char_run[0] / "ckpt.pt"
    assert generate.main(["--ckpt", str(ckpt)], out=io.StringIO(), err=err) == 2
    assert err.getvalue() == (f"error: --ckpt takes the run folder train.py wrote, not a file: "
                              f"{ckpt}; try --ckpt {char_run[0]}\n")
    err = io.StringIO()
    assert generate.main(["--ckpt", str(tmp_path)], out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith(f"error: no checkpoint at {tmp_path / 'ckpt.pt'}")
    assert err.getvalue().count("\n") == 1


def test_ctrl_c_while_loading_prints_one_line_and_exits_130(char_run, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "load_run", interrupted)
    err = io.StringIO()
    try:
        code = generate.main(["--ckpt", str(char_run[0])], out=io.StringIO(), err=err)
    except KeyboardInterrupt:  # escaping, it would stop the whole test session
        pytest.fail("KeyboardInterrupt escaped generate.main")
    assert code == 130 and err.getvalue() == "interrupted\n"


def test_ctrl_c_while_sampling_stops_a_real_process_without_a_traceback(char_run):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "generate.py", "--ckpt", str(char_run[0]),
                             "--max-new-tokens", str(10**9)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
    assert generate.default_out_dir(config) == "out/default"
    assert generate.default_out_dir(tmp_path / "missing.yaml") == "out/default"

"""Bad input, third pass: errors that say what is wrong, through the real command lines."""

import contextlib
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, make_run, mount_tmpfs, run_script

pytestmark = pytest.mark.slow  # every test runs the scripts as a user does


def error_line(r):
    """The command's one error line, checked to be one line, exit code 2, no traceback."""
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def test_a_seed_out_of_range_is_one_line(tmp_path):
    said = error_line(run_script("train.py", "seed=100000000000000000000", f"out_dir={tmp_path / 'r'}"))
    assert "seed" in said and "2**63" in said, said


def test_a_pipe_as_a_corpus_is_refused_and_as_a_prompt_is_read(tmp_path):
    said = error_line(run_script("train.py", "data.source=/dev/stdin", f"out_dir={tmp_path / 'r'}", input="some text\n"))
    assert "not a regular file" in said, said
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    r = subprocess.run([sys.executable, "generate.py", "--ckpt", str(folder), "--prompt-file", "/dev/stdin",
                        "--max-new-tokens", "3", "--seed", "0"], cwd=ROOT, input="The cat", capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("The cat"), r.stderr


def test_a_damaged_tokenizer_file_says_so(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    (folder / "tokenizer.txt").write_text(json.dumps({"kind": "char", "chars": 5}))
    r = run_script("generate.py", "--ckpt", folder, "--prompt", "a")
    said = error_line(r)
    assert "not a char tokenizer file saved by tinygpt" in said, said


def test_a_checkpoint_file_for_a_folder_and_weights_without_config(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    said = error_line(run_script("generate.py", "--ckpt", folder / "ckpt.pt"))
    assert "run folder" in said, said
    r = run_script("train.py", f"train.init_from={folder / 'ckpt.pt'}", f"out_dir={tmp_path / 'tuned'}",
                   f"data.source={ROOT / 'requirements.txt'}")
    said = error_line(r)
    assert "is a file; give the run folder that holds it" in said, said
    assert "ckpt.pt/ckpt.pt" not in r.stderr
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "model.safetensors").write_bytes(b"\0" * 16)
    said = error_line(run_script("generate.py", "--ckpt", hf))
    assert "no config.json" in said, said


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_as_a_checkpoint_never_suggest_weights_only_false(tmp_path, seed):
    import random

    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    (folder / "ckpt.pt").write_bytes(random.Random(seed).randbytes(3000))
    r = run_script("generate.py", "--ckpt", folder)
    said = error_line(r)
    assert "ckpt.pt" in said, said
    assert ("nothing in it ran" in r.stderr or "not a checkpoint" in r.stderr) and "weights_only" not in r.stderr


@pytest.mark.slow
def test_a_full_disk_while_preparing_says_the_disk_is_full(corpus, tmp_path):
    with contextlib.ExitStack() as stack:
        small = tmp_path / "small"
        if not mount_tmpfs(stack, small, "64k"):
            pytest.skip("mounting a small tmpfs needs root")
        text = tmp_path / "big.txt"
        text.write_text("the cat sat on the mat and it purred.\n" * 20000)
        r = run_script("train.py", f"data.source={text}", "tokenizer.kind=char", f"data.cache_dir={small}",
                       f"out_dir={tmp_path / 'run'}")
        said = error_line(r)
        assert "the disk is full" in said, said


def test_offline_a_hub_model_is_one_line_with_no_warning_from_the_hubs_client(tmp_path):
    import socket

    with socket.socket() as s:  # a port on 127.0.0.1 where nothing listens
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{closed}", HF_HUB_CACHE=str(tmp_path / "hub"))
    r = run_script("generate.py", "--ckpt", "hf:someone/model", "--prompt", "a", env=env)
    said = error_line(r)
    assert "HF_HUB_OFFLINE=1" in said, said


def test_an_implausible_cached_cpu_peak_is_measured_again_by_a_run(corpus, tmp_path):
    import torch

    from tests.helpers import tiny_config
    from training.loop import train
    from training.runtime import cpu_name

    cache = tmp_path / "cache"
    cache.mkdir()
    # As if measured on busy cores: torch's thread count below one thread's figure. The key as
    # cpu_peak_flops writes it, for the thread count training runs at.
    key = f"{cpu_name()}; {torch.get_num_threads()} threads; torch {torch.__version__}"
    (cache / "cpu_peak_flops.json").write_text(json.dumps({key: {"flops": 1.0, "one_thread": 1e12}}))
    config = tiny_config(corpus, tmp_path / "run", f"data.cache_dir={cache}", "train.max_iters=2",
                         "train.eval_interval=2", "train.peak_flops=null")
    train(config)
    entry = json.loads((cache / "cpu_peak_flops.json").read_text())[key]
    assert entry["flops"] > 1.0 and entry["flops"] >= 0.9 * entry["one_thread"]

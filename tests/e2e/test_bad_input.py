"""Bad input, third pass: errors that say what is wrong. One kind of error each goes through
the real command line (a subprocess: the config's, training's, generation's, stdin, the hub's
client); the rest call the scripts' main() or load_config in this process, as fast and as
real, and assert the exit code, the error's type and the keys and paths it names."""

import contextlib
import json
import os
import subprocess
import sys

import pytest

from configs.load import load_config
from configs.schema import ConfigError
from tests.helpers import (
    ROOT,
    RUN_TEXT,
    error_line,
    make_run,
    mount_tmpfs,
    one_line,
    run_main,
    run_script,
)


@pytest.mark.slow
def test_a_seed_out_of_range_is_one_line(tmp_path):  # the config's errors, as a user meets them
    said = error_line(
        run_script("train.py", "seed=100000000000000000000", f"out_dir={tmp_path / 'r'}")
    )
    assert "seed" in said and "2**63" in said, said


@pytest.mark.slow
def test_a_pipe_as_a_corpus_is_refused_and_as_a_prompt_is_read(tmp_path):  # stdin: a process
    said = error_line(
        run_script(
            "train.py", "data.source=/dev/stdin", f"out_dir={tmp_path / 'r'}", input="some text\n"
        )
    )
    assert "not a regular file" in said, said
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    r = subprocess.run(
        [
            sys.executable,
            "generate.py",
            "--ckpt",
            str(folder),
            "--prompt-file",
            "/dev/stdin",
            "--max-new-tokens",
            "3",
            "--seed",
            "0",
        ],
        cwd=ROOT,
        input="The cat",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("The cat"), r.stderr


def test_a_damaged_tokenizer_file_says_so(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    (folder / "tokenizer.txt").write_text(json.dumps({"kind": "char", "chars": 5}))
    said = error_line(run_main("generate.py", "--ckpt", folder, "--prompt", "a"))
    assert str(folder / "tokenizer.txt") in said and "char tokenizer" in said, said


def test_a_checkpoint_file_for_a_folder_and_weights_without_config(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    said = error_line(run_main("generate.py", "--ckpt", folder / "ckpt.pt"))
    assert "run folder" in said, said
    r = run_main(
        "train.py",
        f"train.init_from={folder / 'ckpt.pt'}",
        f"out_dir={tmp_path / 'tuned'}",
        f"data.source={ROOT / 'requirements.txt'}",
    )
    said = error_line(r)
    assert str(folder / "ckpt.pt") in said and "run folder" in said, said
    assert "ckpt.pt/ckpt.pt" not in r.stderr
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "model.safetensors").write_bytes(b"\0" * 16)
    said = error_line(run_main("generate.py", "--ckpt", hf))
    assert "no config.json" in said, said


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_as_a_checkpoint_never_suggest_weights_only_false(tmp_path, seed):
    import random

    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    (folder / "ckpt.pt").write_bytes(random.Random(seed).randbytes(3000))
    r = run_main("generate.py", "--ckpt", folder)
    said = error_line(r)
    assert "ckpt.pt" in said, said
    assert (
        "nothing in it ran" in r.stderr or "not a checkpoint" in r.stderr
    ) and "weights_only" not in r.stderr


def test_a_full_disk_while_preparing_says_the_disk_is_full(corpus, tmp_path):
    with contextlib.ExitStack() as stack:
        small = tmp_path / "small"
        if not mount_tmpfs(stack, small, "64k"):
            pytest.skip("mounting a small tmpfs needs root")
        text = tmp_path / "big.txt"
        text.write_text("the cat sat on the mat and it purred.\n" * 20000)
        r = run_main(
            "train.py",
            f"data.source={text}",
            "tokenizer.kind=char",
            f"data.cache_dir={small}",
            f"out_dir={tmp_path / 'run'}",
        )
        said = error_line(r)
        assert "disk" in said and "full" in said, said


@pytest.mark.slow
def test_offline_a_hub_model_is_one_line_with_no_warning_from_the_hubs_client(tmp_path):
    # A process of its own: the hub's client reads HF_ENDPOINT when it is first imported.
    import socket

    with socket.socket() as s:  # a port on 127.0.0.1 where nothing listens
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    env = dict(
        os.environ, HF_ENDPOINT=f"http://127.0.0.1:{closed}", HF_HUB_CACHE=str(tmp_path / "hub")
    )
    r = run_script("generate.py", "--ckpt", "hf:someone/model", "--prompt", "a", env=env)
    said = error_line(r)
    assert "HF_HUB_OFFLINE=1" in said, said


def test_an_implausible_cached_cpu_peak_is_measured_again_by_a_run(corpus, tmp_path):
    import torch

    from tests.helpers import tiny_config, write_yaml
    from training.peak import cpu_name

    cache = tmp_path / "cache"
    cache.mkdir()
    # As if measured on busy cores: torch's thread count below one thread's figure. The key as
    # cpu_peak_flops writes it, for the thread count training runs at.
    key = f"{cpu_name()}; {torch.get_num_threads()} threads; torch {torch.__version__}"
    (cache / "cpu_peak_flops.json").write_text(
        json.dumps({key: {"flops": 1.0, "one_thread": 1e12}})
    )
    config = tiny_config(
        corpus,
        tmp_path / "run",
        f"data.cache_dir={cache}",
        "train.max_iters=2",
        "train.eval_interval=2",
        "train.peak_flops=null",
    )
    r = run_main("train.py", write_yaml(config, tmp_path / "c.yaml"))  # at the key's threads
    assert r.returncode == 0, r.stderr
    entry = json.loads((cache / "cpu_peak_flops.json").read_text())[key]
    assert entry["flops"] > 1.0 and entry["flops"] >= 0.9 * entry["one_thread"]


def test_an_override_is_the_text_as_typed(tmp_path):
    import yaml

    r = run_main(
        "train.py",
        "out_dir=0123",
        "model.n_layer=010",
        "train.compile=on",
        "train.lr=1e-3",
        "--print-config",
    )
    assert r.returncode == 0, r.stderr
    printed = yaml.safe_load(r.stdout)
    assert printed["out_dir"] == "0123" and printed["model"]["n_layer"] == 10
    assert printed["train"]["compile"] is True and printed["train"]["lr"] == 1e-3


def test_a_derived_folder_is_never_the_demos():
    r = run_main("train.py", "data.source=mine/default.txt", "--print-config")
    assert r.returncode == 0 and "out_dir: out/default-own" in r.stdout, r.stderr


def test_a_key_written_twice_in_a_config_file_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 1.0e-3\n  max_iters: 5\n  lr: 2.0e-3\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    one_line(e, str(path), "'lr'", "line 4")


@pytest.fixture
def tiny_run(corpus, tmp_path):
    """A 2-step run of the tiny config in tmp_path/run, and that config as a file."""
    from lab.run import train
    from tests.helpers import tiny_config, write_yaml

    config = tiny_config(corpus, tmp_path / "run", "train.max_iters=2", "train.eval_interval=2")
    train(config)
    return tmp_path / "run", write_yaml(config, tmp_path / "tiny.yaml")


def test_a_resume_keeps_the_modes_a_user_gave_the_files(tiny_run):
    import stat

    out, cfg = tiny_run
    for name in ("ckpt.pt", "config.yaml"):
        os.chmod(out / name, 0o600)
    r = run_main("train.py", cfg, "train.max_iters=4")  # resumes and rewrites both
    assert r.returncode == 0, r.stderr
    assert {
        name: stat.S_IMODE((out / name).stat().st_mode) for name in ("ckpt.pt", "config.yaml")
    } == {"ckpt.pt": 0o600, "config.yaml": 0o600}


def test_init_from_into_a_folder_that_holds_another_run_is_refused(corpus, tiny_run, tmp_path):
    from lab.run import train
    from tests.helpers import tiny_config

    out, cfg = tiny_run
    source = tmp_path / "source"
    train(tiny_config(corpus, source, "train.max_iters=2", "train.eval_interval=2"))

    def files():  # the lock names its holder
        return {p.name: p.read_bytes() for p in out.iterdir() if p.name != ".lock"}

    before = files()
    said = error_line(run_main("train.py", cfg, f"train.init_from={source}", "train.max_iters=4"))
    assert "init_from" in said and "--force" in said, said
    assert files() == before


def test_a_swapped_tokenizer_file_is_refused_by_generate(tiny_run):
    out, _ = tiny_run
    path = out / "tokenizer.json"
    text = path.read_text()
    swapped = text.replace('"a"', '"@"', 1)  # the same size, another character
    assert swapped != text and len(swapped) == len(text)
    path.write_text(swapped)
    said = error_line(
        run_main("generate.py", "--ckpt", out, "--prompt", "the", "--max-new-tokens", "2")
    )
    assert "tokenizer" in said and str(out) in said, said


@pytest.fixture
def bpe_run(tmp_path):
    folder = tmp_path / "bpe_run"
    make_run(folder, "bpe", 64)
    return folder


def test_html_with_a_trailing_slash_writes_the_page_into_that_folder(bpe_run, tmp_path):
    r = run_main(
        "generate.py",
        "--ckpt",
        bpe_run,
        "--attention",
        "--no-probe",
        "--html",
        f"{tmp_path / 'new'}/",
    )
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["attention.html"]


def test_an_attention_file_names_the_sentence_without_a_pronoun(bpe_run, tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("The dog ran because it was hungry.\n\nThe cat sat on the mat.\n")
    said = error_line(run_main("generate.py", "--ckpt", bpe_run, "--attention-file", path))
    assert "sentence 2" in said and "no pronoun" in said, said


def test_a_probe_file_with_a_byte_order_mark_is_read(bpe_run, tmp_path):
    from data.pronouns import examples, write_jsonl

    path = tmp_path / "bom.jsonl"
    write_jsonl(examples("dev")[:25], path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    r = run_main(
        "generate.py", "--ckpt", bpe_run, "--probe", path, "--no-causal", "--permutations", "5"
    )
    assert r.returncode == 0 and "25 of 25 used" in r.stdout, r.stderr


def _foreign_checkpoint(case, ckpt):
    """A checkpoint train.py did not write, made from one it did."""
    import torch

    if case == "no model_config":
        return {k: v for k, v in ckpt.items() if k != "model_config"}
    if case == "a raw state_dict":
        return ckpt["model"]
    if case == "a list":
        return [1, 2, 3]
    first = next(iter(ckpt["model"]))
    if case == "a wrong shape":
        return {**ckpt, "model": {**ckpt["model"], first: torch.zeros(3, 3)}}
    return {
        **ckpt,
        "model": {**ckpt["model"], first: torch.full_like(ckpt["model"][first], float("nan"))},
    }


def _refused_by_generate_and_resume(tmp_path, case, run):
    """A checkpoint `case` breaks, given to generate.py and to a resume by train.py through
    `run` (run_main or run_script): each a one-line error naming the file and what is wrong."""
    import torch

    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    ckpt = torch.load(folder / "ckpt.pt", weights_only=True)
    ckpt.update(
        optimizer={}, step=1, best_val_loss=9.0
    )  # as train.py's, but for what `case` breaks
    torch.save(_foreign_checkpoint(case, ckpt), folder / "ckpt.pt")
    named = {
        "no model_config": "model_config",
        "a raw state_dict": "state_dict",
        "a list": "list",
        "a wrong shape": "tok_emb.weight",
        "NaN weights": "not finite",
    }[case]
    said = error_line(
        run("generate.py", "--ckpt", folder, "--prompt", "a", "--max-new-tokens", "2")
    )
    assert str(folder / "ckpt.pt") in said and named in said, said
    text = tmp_path / "text.txt"
    text.write_text(RUN_TEXT * 40)  # the run's characters: the vocabulary agrees
    said = error_line(
        run(
            "train.py",
            f"out_dir={folder}",
            f"data.source={text}",
            "tokenizer.kind=char",
            f"data.cache_dir={tmp_path / 'cache'}",
            "model.block_size=32",
            "model.n_layer=2",
            "model.n_head=2",
            "model.n_embd=32",
            "model.vocab_multiple=1",
            "model.bias=true",  # the checkpoint's architecture: only its tensors are wrong
            "model.local_window=0",
            "train.device=cpu",
            "train.probe_interval=0",
        )
    )
    assert str(folder / "ckpt.pt") in said and named in said and "--force" in said, said


@pytest.mark.parametrize(
    "case", ["no model_config", "a raw state_dict", "a list", "a wrong shape", "NaN weights"]
)
def test_a_checkpoint_the_project_did_not_write_is_one_line_in_generate_and_resume(tmp_path, case):
    _refused_by_generate_and_resume(tmp_path, case, run_main)


@pytest.mark.slow
def test_a_refused_checkpoint_is_one_line_from_both_command_lines(tmp_path):
    # Training's and generation's errors as a user meets them: the scripts in their own process.
    _refused_by_generate_and_resume(tmp_path, "NaN weights", run_script)


@pytest.mark.parametrize(
    "override, names",
    [
        ("model.n_layer=0x10", "expected int"),
        ("train.loggers=bogus", "'bogus'"),
        ("data.mix=:1", "':1'"),
        ("train.max_iters=0", "train.max_iters"),
    ],
)
def test_an_override_value_error_is_blamed_on_the_override_not_the_file(override, names):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    said = one_line(e, names)
    assert said.startswith(f"override {override}: ") and "default.yaml" not in said, said


def test_a_config_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"train:\n  lr: 1.0e-3 # caf\xe9\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    one_line(e, str(path), "UTF-8")


@pytest.mark.parametrize(
    "text, key",
    [
        ("train: {lr: 1.0e-3, lr: 2.0e-3}\n", "'lr'"),
        ("train:\n  lr: 1.0e-3\ntrain:\n  max_iters: 5\n", "'train'"),
    ],
)
def test_a_key_written_twice_inline_or_a_section_written_twice_is_refused(tmp_path, text, key):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    one_line(e, str(path), key, "twice")


def test_help_shows_the_default_configs_value_only_for_keys_it_sets():
    r = run_main("train.py", "--help")
    assert r.returncode == 0 and "[configs/default.yaml: []]" not in r.stdout
    assert "[configs/default.yaml: 'muon']" in r.stdout  # a key it does set


def test_nanogpts_init_from_gpt2_suggests_the_hub_name(tmp_path):
    said = error_line(run_main("train.py", "train.init_from=gpt2", f"out_dir={tmp_path / 'r'}"))
    assert "train.init_from=gpt2" in said and "hf:gpt2" in said, said
    assert not (tmp_path / "r").exists()


def test_a_jsonl_line_that_is_an_array_says_so(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "char", 32)
    path = tmp_path / "probe.jsonl"
    path.write_text('["The owl hooted because it was happy.", [27, 29]]\n')
    said = error_line(run_main("generate.py", "--ckpt", folder, "--probe", path))
    assert f"{path}, line 1" in said and "array" in said and "missing key" not in said, said


def _tiny(out, source, cache, *overrides):
    return [
        f"out_dir={out}",
        f"data.source={source}",
        f"data.cache_dir={cache}",
        "tokenizer.kind=char",
        "model.block_size=16",
        "model.n_layer=1",
        "model.n_head=2",
        "model.n_embd=16",
        "train.batch_size=2",
        "train.max_iters=6",
        "train.eval_interval=3",
        "train.eval_iters=1",
        "train.log_interval=3",
        "train.device=cpu",
        "train.peak_flops=1e12",
        "train.probe_interval=0",
        "train.final_full_eval=false",
        *overrides,
    ]


def test_run_steps_says_where_it_stopped(corpus, tmp_path):
    r = run_main(
        "train.py",
        *_tiny(tmp_path / "r", corpus / "text.txt", tmp_path / "cache", "train.run_steps=3"),
    )
    assert r.returncode == 0, r.stderr
    assert "train.run_steps=3" in r.stdout and "step 3 of 6" in r.stdout, r.stdout


def test_a_resumed_mix_in_another_order_or_with_another_val_split_says_which(corpus, tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text((corpus / "text.txt").read_text())
    b.write_text((corpus / "text.txt").read_text().upper())
    out, cache = tmp_path / "r", tmp_path / "cache"
    assert run_main("train.py", *_tiny(out, "", cache, f"data.mix={a}:1,{b}:1")).returncode == 0
    said = error_line(
        run_main("train.py", *_tiny(out, "", cache, f"data.mix={b}:1,{a}:1", "train.max_iters=9"))
    )
    assert "another order" in said and "a, b" in said and "other data" not in said, said
    said = error_line(
        run_main(
            "train.py",
            *_tiny(
                out,
                "",
                cache,
                f"data.mix={a}:1,{b}:1",
                "train.max_iters=9",
                "data.val_fraction=0.2",
            ),
        )
    )
    assert "data.val_fraction" in said and "a:0.5,b:0.5, not" not in said, said


def test_fine_tuning_text_the_sources_char_tokenizer_cannot_encode_does_not_suggest_bpe(
    corpus, tmp_path
):
    source, cache = tmp_path / "src", tmp_path / "cache"
    assert run_main("train.py", *_tiny(source, corpus / "text.txt", cache)).returncode == 0
    other = tmp_path / "other.txt"
    other.write_text("Zebras QUIETLY jump over 7 foxes?\n" * 200)
    said = error_line(
        run_main("train.py", *_tiny(tmp_path / "tuned", other, cache, f"train.init_from={source}"))
    )
    assert str(other) in said and "'Z'" in said and "train.init_from" in said, said
    assert "use the 'bpe' tokenizer" not in said, said
    assert not (tmp_path / "tuned").exists()

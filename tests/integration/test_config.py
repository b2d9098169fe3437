"""The YAML config: strict loading, typed conversion, overrides, the CLI's error contract, and
the shipped configs, each built, the CPU ones trained for two steps."""

import copy
import dataclasses
import json
import typing
from dataclasses import asdict

import pytest
import torch
import yaml

from configs.load import describe, load_config, to_yaml
from configs.schema import ConfigError, TrainConfig
from lab.run import train
from model.checkpoint import load_checkpoint
from model.gpt import GPT, GPTConfig
from tests.helpers import ROOT, error_line, run_main

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
GPT2_VOCAB = 50257
TINYSHAKESPEARE_CHARS = 65


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def vocab_size(config):
    """The vocabulary a config's model gets from its tokenizer; an init_from source's is GPT-2's."""
    if config.train.init_from or config.tokenizer.kind == "gpt2":
        return GPT2_VOCAB
    return TINYSHAKESPEARE_CHARS if config.tokenizer.kind == "char" else config.tokenizer.vocab_size


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_every_shipped_config_loads_and_builds_its_model(path):
    config = load_config(path)
    with torch.device("meta"):  # shapes only: no memory for GPT-2's 124M parameters
        model = GPT(GPTConfig(vocab_size=vocab_size(config), **asdict(config.model)))
    if path.name == "gpt2_124m.yaml":  # GPT-2 small: 124,439,808, plus 47 padded rows of 768
        assert sum(p.numel() for p in model.parameters()) == 124_439_808 + 47 * 768
    if config.train.init_from == "hf:gpt2":  # the model keys must match GPT-2 small's shape
        m = config.model
        assert (m.n_layer, m.n_head, m.n_embd, m.bias) == (
            12,
            12,
            768,
            True,
        ) and m.block_size <= 1024


def test_the_shipped_configs_include_the_documented_ones():
    assert {p.name for p in CONFIGS} >= {
        "default.yaml",
        "shakespeare_char_cpu.yaml",
        "shakespeare_char_cpu_muon.yaml",
        "shakespeare_char.yaml",
        "shakespeare_bpe.yaml",
        "gpt2_124m.yaml",
        "finetune_shakespeare.yaml",
        "tinystories.yaml",
    }


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("default.yaml", marks=pytest.mark.slow),  # its evaluation batches: ~3 s
        "shakespeare_char_cpu.yaml",
        "shakespeare_char_cpu_muon.yaml",
    ],
)
def test_the_cpu_configs_train_two_steps_with_their_model(corpus, tmp_path, name):
    # Their corpora are not downloadable here: a small text, with the config's every other key.
    out = tmp_path / "run"
    config = load_config(
        ROOT / "configs" / name,
        [
            f"data.source={corpus / 'text.txt'}",
            f"data.cache_dir={corpus / 'cache'}",
            f"out_dir={out}",
            "train.max_iters=2",
            "train.device=cpu",
        ],
    )
    assert train(config)["step"] == 2
    ckpt = load_checkpoint(out)
    assert {k: ckpt["model_config"][k] for k in asdict(config.model)} == asdict(config.model)
    assert ("muon" in ckpt["optimizer"]) == (
        config.train.optimizer == "muon"
    )  # Muon's state beside AdamW's
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "val_loss" in r] == [2]


def test_values_are_converted_by_field_type(tmp_path):
    path = write(tmp_path, "train:\n  lr: 1e-3\n  max_iters: '200'\n  compile: 'yes'\nseed: 7\n")
    config = load_config(path, ["model.dropout=0.25", "tokenizer.vocab_size=null", "out_dir=out/x"])
    assert config.train.lr == 1e-3 and isinstance(
        config.train.lr, float
    )  # YAML reads 1e-3 as a string
    assert config.train.max_iters == 200 and config.train.compile is True and config.seed == 7
    assert (
        config.model.dropout == 0.25
        and config.tokenizer.vocab_size is None
        and config.out_dir == "out/x"
    )


def test_fields_typed_x_or_none_read_a_value_and_null(tmp_path):
    # The schema writes `int | None` (docs/reference/style.md), which the loader reads as
    # typing.Optional.
    assert typing.get_type_hints(TrainConfig)["probe_interval"] == (int | None)
    path = write(tmp_path, "train:\n  probe_interval: 7\n  peak_flops: 2e9\n")
    config = load_config(path)
    assert config.train.probe_interval == 7 and config.train.peak_flops == 2e9
    config = load_config(path, ["train.probe_interval=null", "train.peak_flops=None"])
    assert config.train.probe_interval is None and config.train.peak_flops is None
    with pytest.raises(ConfigError, match="train.probe_interval"):
        load_config(None, ["train.probe_interval=often"])


def test_replace_and_copy_keep_where_the_run_goes():
    config = load_config(overrides=["data.source=my.txt"])
    assert config.run_dir == "out/my"
    changed = dataclasses.replace(config, seed=2)
    assert changed.run_dir == "out/my" and changed.origin == config.origin
    assert copy.deepcopy(config).run_dir == "out/my"
    # The origin is no key: not compared, not printed, not written back, not settable.
    assert changed == dataclasses.replace(config, seed=2, origin=None)
    assert "origin" not in repr(config) and "origin" not in yaml.safe_load(to_yaml(config))
    with pytest.raises(ConfigError, match="unknown key 'origin'"):
        load_config(None, ["origin=x"])


def test_unknown_key_lists_valid_keys_and_suggests(tmp_path):
    path = write(tmp_path, "train:\n  learning_rate: 0.1\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and "train.learning_rate" in msg and "max_iters" in msg
    with pytest.raises(ConfigError, match=r"train\.lrr.*did you mean 'lr'\?"):
        load_config(None, ["train.lrr=3"])
    with pytest.raises(ConfigError, match="did you mean 'model'"):
        load_config(None, ["modle.n_layer=3"])


@pytest.mark.parametrize(
    "text, where",
    [
        ("train:\n  max_iters: 2.5\n", ("train.max_iters", "int", "2.5")),
        ("train:\n  lr: fast\n", ("train.lr", "float", "'fast'")),
        ("train:\n  compile: maybe\n", ("train.compile", "bool", "'maybe'")),
        ("tokenizer:\n  kind: words\n", ("tokenizer.kind", "'words'", "char, bpe, gpt2")),
        ("train:\n  batch_size: 0\n", ("train.batch_size", "positive integer", "got 0")),
        ("model:\n  n_embd: 30\n  n_head: 4\n", ("model.n_embd",)),
        ("model:\n  dropout: 1.5\n", ("model.dropout",)),
        ("data:\n  val_fraction: 1.0\n", ("data.val_fraction",)),
        ("train: [1, 2]\n", ("train", "mapping", "[1, 2]")),
        ("train:\n  lr: [\n", ("YAML", "line 3")),
    ],
)
def test_errors_name_file_key_and_reason(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert all(part in str(e.value) for part in (str(path), *where)), e.value


def test_override_of_a_section_or_through_a_leaf_is_an_error():
    with pytest.raises(ConfigError, match="is a section"):
        load_config(None, ["train=3"])
    with pytest.raises(ConfigError, match="is not a section"):
        load_config(None, ["seed.x=3"])
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(None, ["train.lr"])


def test_print_config_round_trips(tmp_path):
    config = load_config(ROOT / "configs" / "default.yaml", ["train.lr=0.01"])
    again = load_config(write(tmp_path, to_yaml(config)))
    assert again == config and again.train.lr == 0.01


def test_help_lists_every_key_with_type_default_and_description():
    text = describe()
    for key in [
        "out_dir",
        "seed",
        "data.source",
        "tokenizer.kind",
        "model.n_embd",
        "train.grad_accum_steps",
        "train.resume",
        "train.beta2",
    ]:
        line = next(line for line in text.splitlines() if line.split()[0] == key)
        assert "default" in line and len(line.split("default", 1)[1].split()) >= 2, line


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        "model.n_layer=99999999999999999999",
        "model.n_embd=1048576",
        "model.block_size=1000000000000000",
    ],
)
def test_a_model_that_cannot_fit_in_memory_is_refused_with_the_config(override):
    key, value = override.split("=")
    with pytest.raises(
        ConfigError, match=rf"override {key}={value}: .*GiB of memory; choose smaller"
    ):
        load_config(None, [f"{key}={value}"])


def test_the_memory_bound_is_from_below_and_refuses_only_above_the_memory():
    from configs.sizes import BYTES_PER_PARAMETER, check_fits, parameters_at_least

    model = load_config(None, []).model  # the default: 2 x 128, block 64
    params = parameters_at_least(model.n_layer, model.n_embd, model.block_size)
    built = GPT(GPTConfig(vocab_size=1, **asdict(model))).num_params(non_embedding=False)
    assert params <= built  # no model that fits is refused
    check_fits(model, memory=params * BYTES_PER_PARAMETER)
    with pytest.raises(ValueError, match=r"n_layer=2, n_embd=128, block_size=64 make at least"):
        check_fits(model, memory=params * BYTES_PER_PARAMETER - 1)


@pytest.mark.parametrize(
    "args, key",
    [
        (["train.lrr=1"], "train.lrr"),
        (["{tmp}/missing.yaml"], "missing.yaml"),
        (["model.n_head=3"], "n_head"),
    ],
)
def test_cli_errors_are_one_line_exit_2(tmp_path, args, key):
    # In this process; tests/e2e/test_bad_input.py runs one config error as a subprocess.
    said = error_line(run_main("train.py", *(a.format(tmp=tmp_path) for a in args)))
    assert key in said, said


def test_cli_print_config_and_help():
    r = run_main("train.py", "--print-config", "train.max_iters=7")
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["train"]["max_iters"] == 7
    r = run_main(
        "train.py", "configs/shakespeare_char_cpu.yaml", "--print-config", "train.lr=0.5"
    )  # flags anywhere
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["train"]["lr"] == 0.5
    r = run_main("train.py", "--help")
    assert r.returncode == 0 and "train.warmup_iters" in r.stdout and "torchrun" not in r.stderr


def test_the_model_section_is_gptconfig_less_what_the_tokenizer_and_imports_set():
    from dataclasses import fields

    from configs.schema import ModelConfig

    section = {f.name: f.default for f in fields(ModelConfig)}
    model = {
        f.name: f.default
        for f in fields(GPTConfig)
        if f.name not in ("vocab_size", "gelu_approximate")
    }
    assert section == model

"""train.py's command line: other tools' flag styles, --help, your own corpus, --eval-only."""

import json

import pytest
import yaml

import train as train_script
from lab.run import train
from tests.helpers import ROOT, tiny_config, write_yaml


def run_cli(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        code = train_script.main([str(a) for a in argv])
        raise SystemExit(code)
    captured = capsys.readouterr()
    return e.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    "arg, hint",
    [
        ("--max_iters=20", "did you mean train.max_iters=20?"),
        ("--train.lr=3e-3", "did you mean train.lr=3e-3?"),
        ("--max-iters=20", "did you mean train.max_iters=20?"),
        ("--config", "config file"),
        ("--nonsense=1", "keys are set as key.path=value"),
    ],
)
def test_other_tools_flag_styles_get_the_right_form(capsys, arg, hint):
    code, out, err = run_cli(capsys, arg)
    assert code == 2 and hint in err and err.count("\n") == 1 and err.startswith("error:")


def test_a_key_without_its_section_gets_the_full_path(capsys):
    code, out, err = run_cli(capsys, "max_iters=20")
    assert code == 2 and "did you mean train.max_iters=20?" in err


def test_help_says_which_default_is_which(capsys):
    code, out, err = run_cli(capsys, "--help")
    line = next(line for line in out.splitlines() if line.strip().startswith("train.max_iters"))
    written = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())["train"]["max_iters"]
    assert code == 0 and "default 1000" in line and f"[configs/default.yaml: {written}]" in line


def test_your_own_corpus_does_not_land_in_the_demo_folder(capsys):
    code, out, err = run_cli(
        capsys, "configs/default.yaml", "data.source=my_text.txt", "--print-config"
    )
    assert code == 0 and "out_dir: out/my_text" in out and "out_dir=out/my_text" in err
    code, out, err = run_cli(
        capsys, "data.source=my_text.txt", "out_dir=elsewhere", "--print-config"
    )
    assert code == 0 and "out_dir: elsewhere" in out
    code, out, err = run_cli(capsys, "configs/default.yaml", "train.max_iters=5", "--print-config")
    assert "out_dir: out/default" in out and not err


def test_a_config_that_sets_its_own_out_dir_keeps_it_with_another_source(capsys, tmp_path):
    code, out, err = run_cli(
        capsys, "configs/finetune_shakespeare.yaml", "data.source=my_text.txt", "--print-config"
    )
    assert code == 0 and "out_dir: out/finetune_shakespeare" in out and not err
    code, out, err = run_cli(
        capsys, "data.source=my_text.txt", "--eval-only", "--text", str(tmp_path / "none.txt")
    )
    assert "out_dir=out/my_text" in err and "run goes to" not in err


def test_a_warmup_longer_than_the_run_is_said_at_the_start(corpus, tmp_path, capsys):
    train(
        tiny_config(
            corpus,
            tmp_path / "run",
            "train.max_iters=6",
            "train.warmup_iters=10",
            "train.eval_interval=6",
        )
    )
    said = capsys.readouterr().out
    assert "train.warmup_iters=10" in said and "train.max_iters=6" in said and "60%" in said
    train(
        tiny_config(
            corpus,
            tmp_path / "other",
            "train.max_iters=6",
            "train.warmup_iters=2",
            "train.eval_interval=6",
        )
    )
    assert "warmup_iters" not in capsys.readouterr().out


def test_eval_only_reports_the_runs_loss_on_its_val_split_or_a_text(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    cfg = write_yaml(tiny_config(corpus, out), tmp_path / "c.yaml")
    result = train(tiny_config(corpus, out))
    capsys.readouterr()
    code, stdout, err = run_cli(capsys, cfg, "--eval-only")
    assert code == 0, err
    assert f"loss {result['final']['val_loss_full']:.4f} nats/token" in stdout
    text = tmp_path / "t.txt"
    text.write_text((corpus / "text.txt").read_text()[:2000])
    code, stdout, err = run_cli(capsys, cfg, "--eval-only", "--text", text)
    assert code == 0 and f"{text}: loss " in stdout and "bits/byte" in stdout
    records = (out / "metrics.jsonl").read_text()
    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed((corpus / "text.txt").read_text().splitlines())) + "\n")
    code, stdout, err = run_cli(
        capsys, cfg, "--eval-only", f"data.source={other}", f"out_dir={out}"
    )
    assert code == 2 and "other data" in err
    assert (out / "metrics.jsonl").read_text() == records  # evaluation writes nothing
    assert json.loads(records.splitlines()[-1])["step"] == 20


@pytest.mark.parametrize(
    "override, key, value",
    [
        ("out_dir=0123", "out_dir", "0123"),
        ("out_dir=010", "out_dir", "010"),
        ("out_dir=on", "out_dir", "on"),
        ("out_dir=0x10", "out_dir", "0x10"),
        ("model.n_layer=010", "model.n_layer", 10),
        ("train.compile=on", "train.compile", True),
        ("train.lr=1e-3", "train.lr", 1e-3),
    ],
)
def test_an_override_means_what_was_typed(override, key, value):
    from dataclasses import asdict

    from configs.load import flatten, load_config

    assert flatten(asdict(load_config(None, [override])))[key] == value


@pytest.mark.parametrize(
    "override, names",
    [
        ("train.lr='1e-3", "train.lr"),
        ("model.n_layer=[1", "model.n_layer"),
        ("data.mix=[1", "data.mix"),
        ("data.source=", "data.source"),
        ("data.source=   ", "data.source"),
    ],
)
def test_a_bad_override_is_one_line_naming_the_key(override, names, tmp_path):
    from tests.helpers import error_line, run_main

    said = error_line(run_main("train.py", override, f"out_dir={tmp_path / 'run'}"))
    assert names in said, said
    assert not (tmp_path / "run").exists()

"""train.loggers: TensorBoard and wandb receive the records of metrics.jsonl; a missing package
is one line naming the pip command."""

import json
import os

import pytest

from configs.load import load_config
from configs.schema import ConfigError
from lab.run import train
from tests.helpers import error_line, run_main, run_script, tiny_config
from training import trackers


def records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_records_become_scalars_under_stable_names():
    assert trackers.scalars({"step": 5, "loss": 2.5, "lr": 1e-3, "mfu": None}) == {
        "loss": 2.5,
        "lr": 1e-3,
    }
    assert trackers.scalars(
        {"step": 5, "val_loss_sources": {"tinyshakespeare": 1.7, "pronouns": 0.4}}
    ) == {"val_loss_sources/tinyshakespeare": 1.7, "val_loss_sources/pronouns": 0.4}
    probe = {
        "step": 9,
        "probe_best": 0.9,
        "probe_best_head": [1, 0],
        "probe_heads": [[0.5, 0.6], [0.9, 0.4]],
        "probe_baselines": {"first": 0.5},
    }
    assert trackers.scalars(probe) == {
        "probe_best": 0.9,
        "probe_heads/L0H0": 0.5,
        "probe_heads/L0H1": 0.6,
        "probe_heads/L1H0": 0.9,
        "probe_heads/L1H1": 0.4,
        "probe_baselines/first": 0.5,
    }


def test_tensorboard_holds_the_scalars_of_metrics_jsonl(corpus, tmp_path):
    pytest.importorskip("tensorboard", reason="pip install -r requirements-test.txt")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    train(
        tiny_config(
            corpus, out, "train.loggers=tensorboard", "train.max_iters=10", "train.eval_interval=5"
        )
    )
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    expected = {}
    for record in records(out):
        for name, value in trackers.scalars(record).items():
            expected.setdefault(name, []).append((record["step"], value))
    assert (
        set(events.Tags()["scalars"])
        == set(expected)
        >= {"loss", "lr", "train_loss", "val_loss", "val_loss_full"}
    )
    for name, points in expected.items():
        got = [(e.step, e.value) for e in events.Scalars(name)]
        assert [s for s, _ in got] == [s for s, _ in points]
        assert [v for _, v in got] == pytest.approx(
            [v for _, v in points], rel=1e-6
        )  # stored as float32


@pytest.mark.slow
def test_wandb_offline_writes_its_run_files_locally(corpus, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="pip install -r requirements-test.txt")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    train(
        tiny_config(
            corpus, out, "train.loggers=wandb", "train.max_iters=10", "train.eval_interval=5"
        )
    )
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    (data,) = runs[0].glob("run-*.wandb")
    assert data.stat().st_size > 0


def test_a_missing_tracker_package_is_one_line_naming_the_pip_command(
    corpus, tmp_path, monkeypatch
):
    monkeypatch.setitem(trackers.PACKAGES, "wandb", "no_such_tracker_package")
    with pytest.raises(ValueError, match="pip install no_such_tracker_package") as error:
        train(tiny_config(corpus, tmp_path / "run", "train.loggers=wandb"))
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


@pytest.mark.parametrize("value, says", [("mlflow", "not a logger"), ("wandb,wandb", "twice")])
def test_an_unknown_or_repeated_logger_is_a_config_error(value, says):
    with pytest.raises(ConfigError, match=says):
        load_config(None, [f"train.loggers={value}"])
    assert load_config(None, ["train.loggers=tensorboard, wandb"]).train.loggers == [
        "tensorboard",
        "wandb",
    ]


def test_the_command_line_says_the_same(tmp_path):
    r = run_main("train.py", "train.loggers=mlflow", f"out_dir={tmp_path / 'run'}")
    assert r.returncode == 2 and "not a logger" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_broken_tensorboard_install_is_one_line_before_anything_is_written(corpus, tmp_path):
    broken = tmp_path / "site" / "tensorboard"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        "raise ImportError('cannot import name notf from tensorboard.compat')\n"
    )
    out = tmp_path / "run"
    r = run_script(
        "train.py",
        "train.loggers=tensorboard",
        f"out_dir={out}",
        f"data.source={corpus / 'text.txt'}",
        "tokenizer.kind=char",
        f"data.cache_dir={tmp_path / 'cache'}",
        "train.device=cpu",
        env=dict(os.environ, PYTHONPATH=str(broken.parent)),
    )
    said = error_line(r)
    assert (
        "train.loggers=tensorboard" in said
        and "ImportError" in said
        and "--force-reinstall" in said
    ), said
    assert not out.exists() and not (tmp_path / "cache").exists()


def test_scalars_flatten_records_nested_at_any_depth():
    from training.trackers import scalars

    record = {"step": 5, "probe_by_kind": {"meaning": {"flip": 0.4, "kind_best_head": [0, 2]}}}
    assert scalars(record) == {"probe_by_kind/meaning/flip": 0.4}

"""train.init_from: fine-tuning starts from a Hugging Face GPT-2 folder or a run folder."""

import json

import pytest
import torch

from data.loader import get_batch
from data.prepare import prepare
from lab.run import train
from model.gpt import lm_loss
from runs.loading import load_run
from tests.helpers import tiny_config
from training.seeds import micro_batch_generator


def first_loss(out):
    return next(
        json.loads(line)["loss"]
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if "loss" in json.loads(line)
    )


def source_loss_on_the_first_batch(source, config):
    """The source model's loss on the batch a run's first step draws (micro-batch 0 of step 0)."""
    run = load_run(source)
    prepared = prepare(
        config.data.source,
        config.tokenizer.kind,
        None,
        config.data.val_fraction,
        config.data.cache_dir,
        config.model.block_size,
        tokenizer=run.tokenizer,
    )
    x, y = get_batch(
        prepared.train_path,
        prepared.meta["dtype"],
        config.train.batch_size,
        config.model.block_size,
        "cpu",
        micro_batch_generator(config.seed, 0, 0),
    )
    with torch.no_grad():
        return lm_loss(run.model(x), y).item()


def gpt2_overrides(folder, *more):
    return (
        "model.n_layer=2",
        "model.n_head=2",
        "model.n_embd=32",
        "model.bias=true",
        f"train.init_from={folder}",
        "train.log_interval=1",
        "train.max_iters=3",
        *more,
    )


def test_init_from_a_gpt2_folder_starts_at_its_loss_with_its_tokenizer(
    corpus, tmp_path, gpt2_folder, capsys
):
    out = tmp_path / "run"
    config = tiny_config(
        corpus, out, *gpt2_overrides(gpt2_folder)
    )  # block_size 16 < the source's 64
    train(config)
    assert "starting from the weights of" in capsys.readouterr().out
    assert first_loss(out) == pytest.approx(
        source_loss_on_the_first_batch(gpt2_folder, config), abs=1e-5
    )
    run = load_run(out)
    assert run.model.config.gelu_approximate == "tanh" and run.model.config.block_size == 16
    assert run.tokenizer.encode("the owl") == load_run(gpt2_folder).tokenizer.encode("the owl")


def test_init_from_a_run_folder_starts_at_its_loss(corpus, tmp_path):
    source = tmp_path / "source"
    train(tiny_config(corpus, source, "train.max_iters=10"))
    out = tmp_path / "run"
    config = tiny_config(
        corpus, out, f"train.init_from={source}", "train.log_interval=1", "train.max_iters=3"
    )
    train(config)
    assert first_loss(out) == pytest.approx(
        source_loss_on_the_first_batch(source, config), abs=1e-5
    )


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.n_layer=3", r"model\.n_layer.*3.*2"),
        ("model.block_size=128", r"model\.block_size.*128.*64"),
        ("model.rotary=true", r"model\.rotary.*True.*False"),
    ],
)
def test_a_shape_that_does_not_fit_the_source_is_one_line(
    corpus, tmp_path, gpt2_folder, override, message
):
    with pytest.raises(ValueError, match=message):
        train(tiny_config(corpus, tmp_path / "run", *gpt2_overrides(gpt2_folder, override)))
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_an_interrupted_fine_tune_resumes_from_its_own_checkpoint(
    corpus, tmp_path, gpt2_folder, capsys
):
    out = tmp_path / "run"
    train(
        tiny_config(
            corpus, out, *gpt2_overrides(gpt2_folder, "train.max_iters=6"), "train.run_steps=2"
        )
    )
    train(tiny_config(corpus, out, *gpt2_overrides(gpt2_folder, "train.max_iters=6")))
    assert "resuming from step 2" in capsys.readouterr().out


def test_prepare_only_uses_the_sources_tokenizer_so_training_finds_it_prepared(
    corpus, tmp_path, gpt2_folder
):
    import train as train_script
    from tests.helpers import write_yaml

    cache = tmp_path / "cache"
    config = tiny_config(
        corpus, tmp_path / "run", *gpt2_overrides(gpt2_folder, f"data.cache_dir={cache}")
    )
    assert train_script.main([str(write_yaml(config, tmp_path / "c.yaml")), "--prepare-only"]) == 0
    prepared = list((cache / "prepared").iterdir())
    train(config)
    assert list((cache / "prepared").iterdir()) == prepared  # nothing prepared a second time


def test_eval_only_on_a_fine_tuned_run_uses_its_tokenizer(corpus, tmp_path, gpt2_folder):
    from training.eval_text import evaluate_only

    config = tiny_config(corpus, tmp_path / "run", *gpt2_overrides(gpt2_folder))
    result = train(config)
    assert f"loss {result['final']['val_loss_full']:.4f} nats/token" in evaluate_only(config)

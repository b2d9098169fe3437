"""The value ranges of a config that a type alone cannot say (check), each error blamed on the
file or on the override that set the key. configs.load calls it on every config it builds."""

import math
from dataclasses import fields

from checks import positive_int
from configs.schema import Config, ConfigError
from configs.sizes import TooBig, check_model


def check(config: Config, origin: str, overridden: dict | None = None) -> None:
    """Value ranges that a type alone cannot say. An error is blamed on `origin` (the config
    file), or on the override that set the key (`overridden`: key path -> "key=value")."""
    overridden = overridden or {}

    def at(*keys):
        return next((f"override {overridden[k]}" for k in keys if k in overridden), origin)

    for keys, problem in _problems(config):
        raise ConfigError(f"{at(*keys)}: {problem}")
    try:  # the model's own checks and whether it can fit, before any data is prepared
        check_model(config.model)
    except TooBig as e:  # blamed on the size that weighs most: its override, else the file
        raise ConfigError(f"{at(f'model.{e.heaviest}')}: model.{e}") from None
    except ValueError as e:  # blamed on the key given that the message names first
        message = str(e)
        named = [k for k in overridden if k.startswith("model.") and k[len("model.") :] in message]
        named.sort(key=lambda k: message.index(k[len("model.") :]))
        raise ConfigError(f"{at(*named)}: model.{e}") from None


COUNTS = (
    "batch_size",
    "grad_accum_steps",
    "max_iters",
    "eval_interval",
    "eval_iters",
    "log_interval",
)


def _problems(config):
    """(the keys to blame, what is wrong) for each value out of its range, in the order checked."""
    train = config.train
    for key in COUNTS:
        try:
            positive_int(f"train.{key}", getattr(train, key))
        except ValueError as e:
            yield (f"train.{key}",), str(e)
    sections = (
        ("train", train),
        ("model", config.model),
        ("data", config.data),
        ("data.pronouns", config.data.pronouns),
    )
    for name, section in sections:
        for f in fields(section):
            value, key = getattr(section, f.name), f"{name}.{f.name}"
            if isinstance(value, float) and not math.isfinite(value):
                yield (key,), f"{key}: must be a finite number, got {value}"
    try:
        _ = config.data.pronouns.story_mix  # its own check: a weight below 0, or all 0
    except ValueError as e:
        keys = tuple(f"data.pronouns.{k}" for k in ("agreement", "role", "meaning"))
        yield keys, f"data.pronouns: {e}"
    yield from _run_problems(config)
    yield from _schedule_problems(train)


def _run_problems(config):
    """The run's counts, seed, data and folder."""
    train, data = config.train, config.data
    if train.run_steps < 0:
        yield (
            ("train.run_steps",),
            (
                "train.run_steps: must be 0 (train to max_iters) or a number of steps, got "
                f"{train.run_steps}"
            ),
        )
    if train.probe_interval is not None and train.probe_interval < 0:
        yield (
            ("train.probe_interval",),
            (
                "train.probe_interval: must be 0 (off) or a number of steps, got "
                f"{train.probe_interval}"
            ),
        )
    if not 0 <= config.seed < 2**63:
        yield ("seed",), f"seed: must be a whole number from 0 to 2**63 - 1, got {config.seed}"
    if not data.source.strip() and not data.mix:
        yield (
            ("data.source", "data.mix"),
            (
                "data.source: must not be empty; give a text file, a folder of .txt files, "
                "hf:OWNER/DATASET/PATH, or a named corpus (pronouns, tinyshakespeare)"
            ),
        )
    if not config.out_dir.strip():
        yield ("out_dir",), "out_dir: must not be empty; give a folder such as out/mine"
    if train.peak_flops is not None and not train.peak_flops > 0:
        yield (
            ("train.peak_flops",),
            (f"train.peak_flops: must be a positive FLOP/s figure, got {train.peak_flops}"),
        )
    if not 0.0 < data.val_fraction < 1.0:
        yield (
            ("data.val_fraction",),
            (f"data.val_fraction: must be in (0, 1), got {data.val_fraction}"),
        )


def _schedule_problems(train):
    """The learning rates, warmup, clipping, decay and betas."""
    if train.lr <= 0 or train.min_lr < 0 or train.min_lr > train.lr:
        yield (
            ("train.lr", "train.min_lr"),
            ("train.lr / train.min_lr: need 0 <= min_lr <= lr and lr > 0"),
        )
    if train.warmup_iters < 0 or train.grad_clip < 0 or train.weight_decay < 0:
        yield (
            ("train.warmup_iters", "train.grad_clip", "train.weight_decay"),
            ("train.warmup_iters, grad_clip and weight_decay must be >= 0"),
        )
    if not 0 <= train.decay_frac <= 1:
        yield ("train.decay_frac",), f"train.decay_frac: must be in [0, 1], got {train.decay_frac}"
    if not (0 <= train.beta1 < 1 and 0 <= train.beta2 < 1):
        yield ("train.beta1", "train.beta2"), "train.beta1 / train.beta2: must be in [0, 1)"

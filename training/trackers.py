"""Experiment trackers (`train.loggers`): TensorBoard and Weights & Biases receive exactly the
records training writes to metrics.jsonl, on rank 0, as scalars under stable names:

    loss, lr, tokens_per_sec, mfu, train_loss, val_loss, val_ppl, val_bpb, val_loss_full, ...
    val_loss_sources/<source>, val_loss_full_sources/<source>     (a data.mix)
    probe_best, probe_heads/L<layer>H<head>, probe_baselines/<rule>

Both packages are optional (not in requirements.txt); asking for one that is not installed is a
one-line error naming the pip command, before anything trains.
"""

import importlib
import importlib.util
from pathlib import Path

from configs.schema import config_dict

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}


# What each logger imports to write: torch's TensorBoard writer imports tensorboard itself.
MODULES = {"tensorboard": "torch.utils.tensorboard", "wandb": "wandb"}


def check_installed(names):
    """ValueError (one line) for the first logger whose package is missing, or installed but
    broken (it does not import): checked before a run writes anything."""
    for name in names:
        package = PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            raise ValueError(
                f"train.loggers={name} needs the {package} package: "
                f"pip install {package} (or drop {name} from train.loggers)"
            )
        try:
            importlib.import_module(MODULES[name])
        except Exception as e:  # noqa: BLE001 - a broken install fails in any way
            what = " ".join(f"{type(e).__name__}: {e}".split())[:200]
            raise ValueError(
                f"train.loggers={name}: the {package} package is installed but does "
                f"not import ({what}); reinstall it (pip install --force-reinstall "
                f"{package}) or drop {name} from train.loggers"
            ) from None


def scalars(record):
    """{name: number} of a metrics.jsonl record, nested values flattened with "/" (the step
    and values that are no numbers, such as probe_best_head, left out)."""
    out = {}
    for key, value in record.items():
        if key == "step":
            continue
        if isinstance(value, dict):  # nested at any depth: probe_by_kind/meaning/flip
            out.update({f"{key}/{k}": v for k, v in scalars(value).items()})
        elif key == "probe_heads":
            out.update(
                {
                    f"{key}/L{layer}H{head}": v
                    for layer, row in enumerate(value)
                    for head, v in enumerate(row)
                }
            )
        elif _number(value):
            out[key] = value
    return out


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Trackers:
    """The trackers train.loggers names, opened for a run folder; log(record) sends each."""

    def __init__(self, names, out_dir, config):
        check_installed(names)
        self.writers = []
        if "tensorboard" in names:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(log_dir=str(Path(out_dir) / "tensorboard"))
            self.writers.append(
                (
                    lambda values, step: [writer.add_scalar(k, v, step) for k, v in values.items()],
                    writer.close,
                )
            )
        if "wandb" in names:
            import wandb

            run = wandb.init(
                project="tinygpt",
                name=Path(out_dir).name,
                dir=str(out_dir),
                config=config_dict(config),
            )
            self.writers.append((lambda values, step: run.log(values, step=step), run.finish))

    def log(self, record):
        values = scalars(record)
        for write, _ in self.writers:
            write(values, record["step"])

    def close(self):
        for _, close in self.writers:
            close()

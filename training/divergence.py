"""When a run has diverged, so that its checkpoint must not be written over: the validation loss
far above the best the run reached.

The rule: diverged when val loss > RATIO × the best val loss and more than MARGIN nats above it.
Between two evaluations of a healthy run the val loss moves by a few percent (it is measured on
the same fixed batches each time, so only the weights change it); 1.5× the best is no noise but a
run that left its basin (a learning rate far too high: 1.45 → 500 nats within 40 steps). The
margin keeps a loss near zero, where a ratio is noise (0.02 → 0.04 on a memorised corpus), from
counting. A run that diverged stops before its checkpoint is written: the checkpoint on disk, the
last one that passed, stays, and the same command with a lower learning rate resumes from it. A
run is stopped rather than left to go on unsaved, because every later save (an interrupt, the end
of train.run_steps) would write the diverged weights unevaluated.
"""

import math

from training.stopping import TrainingStopped

RATIO = 1.5  # val loss over the best val loss
MARGIN = 0.5  # nats above the best val loss


def diverged(val_loss: float, best_val: float) -> bool:
    """Whether `val_loss` is so far above `best_val` (the best of the run so far; inf before its
    first evaluation) that the weights must not replace the checkpoint."""
    return val_loss > RATIO * best_val and val_loss - best_val > MARGIN


def diverged_at(progress, final: dict, kept: str) -> str:
    """One line: the run diverged at progress.step, its evaluation `final` ("val_loss") far
    above progress.best_val; `kept` says which checkpoint is on disk."""
    step, val_loss, best_val = progress.step, final["val_loss"], progress.best_val
    return (
        f"val loss {val_loss:.4g} at step {step} is more than {RATIO}x the run's best, "
        f"{best_val:.4g}: the run has diverged; stopped without saving, {kept} "
        "(lower train.lr, and train.muon_lr with Muon, and run again)"
    )


def check_evaluation(final: dict, progress, kept: str) -> None:
    """TrainingStopped when the evaluation `final` must not be saved: a loss that is not finite,
    or a run that has diverged; `kept` says which checkpoint is on disk."""
    losses = [final["train_loss"], final["val_loss"], *final.get("val_loss_sources", {}).values()]
    if not all(math.isfinite(v) for v in losses):
        raise TrainingStopped(
            f"eval loss is not finite at step {progress.step}; stopped, {kept} (try a lower "
            "train.lr)"
        )
    if diverged(final["val_loss"], progress.best_val):
        raise TrainingStopped(diverged_at(progress, final, kept))

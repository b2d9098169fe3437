"""Percentile bootstrap over examples: the one way the study puts 95% intervals on a mean.

Examples are resampled with replacement; every measure of one result is read on the same
resamples (`draws`), so two measures' intervals come from the same replicated sets.
"""

import torch

Interval = list[float]  # [lo, hi] of one measure, as a result carries it (analysis/results.py)
LEVELS = (0.025, 0.975)  # the 95% percentile interval
# Resamples gathered at once: R x N values of a probe file's 50,000 examples would be 400 MB
# for each measure; 64 rows at a time are 26 MB, with the same means.
RESAMPLES_AT_ONCE = 64


def resample(n: int, resamples: int, seed: int) -> torch.Tensor:
    """(resamples, n) example indices drawn with replacement, the same for the same seed."""
    return torch.randint(n, (resamples, n), generator=torch.Generator().manual_seed(seed))


def interval(resampled: torch.Tensor) -> Interval:
    """[lo, hi]: the 95% percentile interval of one measure's values over the resamples (R,)."""
    lo, hi = torch.quantile(resampled, torch.tensor(LEVELS, dtype=resampled.dtype))
    return [lo.item(), hi.item()]


def means_with_intervals(values: dict[str, torch.Tensor], draws: torch.Tensor) -> dict:
    """{name: mean, name_ci: [lo, hi]} for each (N,) tensor of per-example values, over the
    resamples `draws` (R, N) of example indices."""
    out = {}
    for name, per_example in values.items():
        means = torch.cat(
            [
                per_example[draws[at : at + RESAMPLES_AT_ONCE]].mean(1)
                for at in range(0, len(draws), RESAMPLES_AT_ONCE)
            ]
        )  # (R,)
        out[name], out[f"{name}_ci"] = per_example.mean().item(), interval(means)
    return out

"""The learning-rate schedule (training.optim.lr_at): warmup, then a cosine or a held rate and
a straight decay, and the one-line refusal of a decay share outside [0, 1]."""

import pytest

from configs.load import load_config
from configs.schema import TrainConfig
from training.optim import lr_at


def test_lr_schedule_warmup_then_cosine():
    kw = TrainConfig(lr=1.0, min_lr=0.1, warmup_iters=10, max_iters=110)
    assert lr_at(0, kw) == pytest.approx(0.1) and lr_at(4, kw) == pytest.approx(0.5)
    assert lr_at(9, kw) == pytest.approx(1.0) and lr_at(10, kw) == pytest.approx(1.0)
    assert lr_at(60, kw) == pytest.approx(0.55)  # halfway down the cosine: (1 + 0.1) / 2
    assert lr_at(110, kw) == pytest.approx(0.1) and lr_at(500, kw) == pytest.approx(0.1)
    values = [lr_at(s, kw) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_decay_frac_holds_the_peak_then_falls_in_a_straight_line():
    kw = TrainConfig(lr=1.0, min_lr=0.1, warmup_iters=10, max_iters=100, decay_frac=0.4)
    assert lr_at(0, kw) == pytest.approx(0.1) and lr_at(9, kw) == pytest.approx(1.0)
    assert [lr_at(s, kw) for s in (10, 35, 60)] == pytest.approx([1.0, 1.0, 1.0])  # held
    assert lr_at(70, kw) == pytest.approx(0.1 + 0.9 * 30 / 40)  # a quarter of the way down
    assert lr_at(80, kw) == pytest.approx(0.55)  # halfway: (1 + 0.1) / 2
    assert lr_at(99, kw) == pytest.approx(0.1 + 0.9 / 40) and lr_at(100, kw) == pytest.approx(0.1)
    steps = [lr_at(s, kw) - lr_at(s + 1, kw) for s in range(60, 99)]
    assert steps == pytest.approx([0.9 / 40] * len(steps))  # the same fall at every step


def test_decay_frac_one_is_a_straight_line_from_the_end_of_warmup():
    kw = TrainConfig(lr=1.0, min_lr=0.0, warmup_iters=0, max_iters=50, decay_frac=1.0)
    assert [lr_at(s, kw) for s in (0, 25, 49)] == pytest.approx([1.0, 0.5, 0.02])


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_a_decay_share_outside_zero_to_one_is_refused_in_one_line(value):
    with pytest.raises(ValueError, match=r"train\.decay_frac: must be in \[0, 1\]") as e:
        load_config("configs/default.yaml", [f"train.decay_frac={value}"])
    assert "\n" not in str(e.value)

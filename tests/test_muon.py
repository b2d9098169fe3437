"""Muon (the library's) for the blocks' matrices paired with fused AdamW for the rest."""

import pytest
import torch

from model.gpt import lm_loss
from training.optim import make_optimizer


def test_muon_trains_and_checkpoints(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    muon_params = sum(len(g["params"]) for g in opt.param_groups if g.get("use_muon"))
    assert muon_params == 2 * 4  # w_qkv, attention w_out, mlp w_in, mlp w_out per block
    x = torch.randint(0, 30, (4, 16), generator=torch.Generator().manual_seed(1))
    first = None
    for _ in range(60):
        loss = lm_loss(model(x[:, :-1]), x[:, 1:])
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3 * first
    again = make_optimizer(model, "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    again.load_state_dict(opt.state_dict())
    p = next(p for g in again.param_groups if g.get("use_muon") for p in g["params"])
    assert torch.equal(again.state[p]["momentum_buffer"], opt.state[p]["momentum_buffer"])


def test_setting_a_groups_lr_reaches_the_optimizer_that_steps(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    for group in opt.param_groups:
        group["lr"] = 0.0  # what the schedule does at a step with lr 0
    before = [p.detach().clone() for p in model.parameters()]
    lm_loss(model(torch.zeros(2, 8, dtype=torch.long)), torch.ones(2, 8, dtype=torch.long)).backward()
    opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_works_under_the_grad_scaler(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    scaler = torch.amp.GradScaler("cpu", enabled=True)
    before = [p.detach().clone() for p in model.parameters()]
    loss = lm_loss(model(torch.zeros(2, 8, dtype=torch.long)), torch.ones(2, 8, dtype=torch.long))
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    assert sum(not torch.equal(a, b) for a, b in zip(before, model.parameters())) > 10


def test_a_foreign_optimizer_state_is_refused(tiny_gpt):
    opt = make_optimizer(tiny_gpt(), "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    with pytest.raises(ValueError, match="not a Muon"):
        opt.load_state_dict({"state": {}, "param_groups": []})

"""Muon (the library's) for the blocks' matrices paired with fused AdamW for the rest, with its
Newton–Schulz iterations in bf16 or float32."""

import pytest
import torch
from torch.optim._muon import _zeropower_via_newtonschulz

from configs.schema import TrainConfig
from model.gpt import lm_loss
from training.muon import Muon, newton_schulz
from training.optim import make_optimizer

MUON = TrainConfig(optimizer="muon", lr=3e-3, weight_decay=0.0, beta2=0.95)

COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # the library's defaults


@pytest.mark.parametrize(
    "shape", [(8, 24), (24, 8), (16, 16), (8, 12)]
)  # Gram route: (8, 24), (24, 8)
def test_newton_schulz_is_the_librarys_in_bf16_and_close_in_float32(shape):
    g = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    library = _zeropower_via_newtonschulz(g, COEFFICIENTS, 5, 1e-7)
    assert torch.equal(newton_schulz(g, COEFFICIENTS, 5, 1e-7, torch.bfloat16), library)
    ours = newton_schulz(g, COEFFICIENTS, 5, 1e-7, torch.float32)
    assert ours.dtype == torch.float32 and ours.shape == shape
    # bf16 keeps 8 bits of mantissa: the two agree to a few of its steps (entries are ~0.3)
    assert (ours - library.float()).abs().max() < 0.03
    singular = torch.linalg.svdvals(ours)
    assert singular.min() > 0.5 and singular.max() < 1.5  # orthogonalised, as the recipe promises


def test_the_gram_route_is_the_same_iteration():
    g = torch.randn(16, 40, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a, b, c = COEFFICIENTS
    x = g / g.norm()
    for _ in range(5):  # the iteration written out, in float64
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    ours = newton_schulz(g.float(), COEFFICIENTS, 5, 1e-7, torch.float32)
    assert torch.allclose(ours.double(), x, atol=1e-5)
    assert torch.allclose(
        newton_schulz(g.float().T, COEFFICIENTS, 5, 1e-7, torch.float32).double(), x.T, atol=1e-5
    )


def test_newton_schulz_leaves_its_input_alone():
    g = torch.randn(8, 24)
    before = g.clone()
    newton_schulz(g, COEFFICIENTS, 5, 1e-7, torch.float32)
    assert torch.equal(g, before)  # Muon without Nesterov passes its momentum buffer itself


def _train(model, opt, steps=40):
    x = torch.randint(0, 30, (4, 16), generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        loss = lm_loss(model(x[:, :-1]), x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def test_muon_in_bf16_steps_exactly_as_the_librarys(tiny_gpt):
    ours, library = tiny_gpt(), tiny_gpt()

    def matrices(m):
        return [p for b in m.blocks for p in b.parameters() if p.dim() == 2]

    _train(
        ours, Muon(matrices(ours), orth_dtype=torch.bfloat16, lr=0.02, adjust_lr_fn="original"), 5
    )
    _train(library, torch.optim.Muon(matrices(library), lr=0.02, adjust_lr_fn="original"), 5)
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), library.parameters()))


def test_float32_newton_schulz_trains_to_the_same_loss(tiny_gpt):
    losses = {}
    for dtype in (torch.bfloat16, torch.float32):
        model = tiny_gpt()
        losses[dtype] = _train(
            model,
            make_optimizer(model, MUON, "cpu", orth_dtype=dtype),
            60,
        )
    assert losses[torch.float32] < 1.0  # from ~3.4: it trains
    assert abs(losses[torch.float32] - losses[torch.bfloat16]) < 0.1 * losses[torch.bfloat16]


def test_a_checkpoint_of_one_dtype_resumes_with_the_other(tiny_gpt):
    model = tiny_gpt()
    bf16 = make_optimizer(model, MUON, "cpu", orth_dtype=torch.bfloat16)
    _train(model, bf16, 10)
    f32 = make_optimizer(model, MUON, "cpu", orth_dtype=torch.float32)
    f32.load_state_dict(bf16.state_dict())
    p = next(p for g in f32.param_groups if g.get("use_muon") for p in g["params"])
    assert torch.equal(f32.state[p]["momentum_buffer"], bf16.state[p]["momentum_buffer"])
    before = p.detach().clone()
    _train(model, f32, 1)
    assert not torch.equal(p, before) and f32.muon.orth_dtype == torch.float32


def test_muon_trains_and_checkpoints(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, MUON, "cpu")
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
    again = make_optimizer(model, MUON, "cpu")
    again.load_state_dict(opt.state_dict())
    p = next(p for g in again.param_groups if g.get("use_muon") for p in g["params"])
    assert torch.equal(again.state[p]["momentum_buffer"], opt.state[p]["momentum_buffer"])


def test_setting_a_groups_lr_reaches_the_optimizer_that_steps(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, MUON, "cpu")
    for group in opt.param_groups:
        group["lr"] = 0.0  # what the schedule does at a step with lr 0
    before = [p.detach().clone() for p in model.parameters()]
    lm_loss(
        model(torch.zeros(2, 8, dtype=torch.long)), torch.ones(2, 8, dtype=torch.long)
    ).backward()
    opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_works_under_the_grad_scaler(tiny_gpt):
    model = tiny_gpt()
    opt = make_optimizer(model, MUON, "cpu")
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
    opt = make_optimizer(tiny_gpt(), MUON, "cpu")
    with pytest.raises(ValueError, match="not a Muon"):
        opt.load_state_dict({"state": {}, "param_groups": []})


def test_muon_step_takes_a_closure_as_the_library_does(tiny_gpt):
    model = tiny_gpt()
    opt = Muon([p for b in model.blocks for p in b.parameters() if p.dim() == 2], lr=0.02)
    x = torch.randint(0, 30, (2, 9), generator=torch.Generator().manual_seed(0))

    def closure():
        opt.zero_grad()
        loss = lm_loss(model(x[:, :-1]), x[:, 1:])
        loss.backward()
        return loss

    first = opt.step(closure)
    assert first is not None and opt.step(closure).item() < first.item()

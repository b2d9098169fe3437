"""Muon: the orthogonalisation, and the optimizer learning next to its AdamW groups."""

import torch

from model.gpt import GPT, GPTConfig, lm_loss
from training.muon import Muon, orthogonalize
from training.optim import make_optimizer


def test_orthogonalize_sets_singular_values_near_one_and_keeps_vectors():
    torch.manual_seed(0)
    for shape in [(32, 96), (96, 32), (48, 64)]:  # (a square random matrix is near-singular)
        g = torch.randn(shape) * torch.logspace(-1, 1, shape[1])  # singular values spread 100x
        o = orthogonalize(g)
        s = torch.linalg.svdvals(o)
        assert o.shape == g.shape and s.min() > 0.5 and s.max() < 1.3, (shape, s.min(), s.max())
        u, _, vh = torch.linalg.svd(g, full_matrices=False)
        # Same singular vectors: projecting o onto U·Vᵀ keeps most of it.
        assert torch.sum(o * (u @ vh)) / (o.norm() * (u @ vh).norm()) > 0.95


def test_adam_groups_match_torch_adamw():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(5, 3))
    b = torch.nn.Parameter(a.detach().clone())
    ours = Muon([{"params": [a], "lr": 1e-2, "betas": (0.9, 0.95), "weight_decay": 0.1}])
    ref = torch.optim.AdamW([b], lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8)
    for _ in range(5):
        g = torch.randn(5, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_muon_trains_and_checkpoints():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=30, block_size=16, n_layer=2, n_head=2, n_embd=32))
    opt = make_optimizer(model, "muon", 3e-3, 0.0, (0.9, 0.95), "cpu")
    muon_params = sum(len(g["params"]) for g in opt.param_groups if g["use_muon"])
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
    p = next(p for g in again.param_groups if g["use_muon"] for p in g["params"])
    assert torch.equal(again.state[p]["momentum"], opt.state[p]["momentum"])


def test_a_stack_is_orthogonalised_matrix_by_matrix():
    torch.manual_seed(0)
    stack = torch.randn(3, 40, 24)
    batched = orthogonalize(stack)
    for g, o in zip(stack, batched):
        torch.testing.assert_close(o, orthogonalize(g), atol=1e-5, rtol=1e-4)

"""The same checks on a CUDA GPU, when there is one (`make gpu-check` runs the suite there)."""

import pytest
import torch

from model.gpt import GPT, GPTConfig, lm_loss
from model.sampling import generate

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


def tiny():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=64)).cuda()


def test_explicit_and_fused_paths_agree_on_cuda():
    model = tiny().eval()
    idx = torch.randint(0, 64, (4, 32), device="cuda")
    with torch.no_grad():
        fused = model(idx)
        explicit, _ = model(idx, return_attention=True)
    assert (fused - explicit).abs().max().item() <= 1e-4


def test_bf16_autocast_training_learns_on_cuda():
    model = tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
    x = torch.randint(0, 64, (8, 33), device="cuda")
    losses = []
    for _ in range(100):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = lm_loss(model(x[:, :-1]), x[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_kv_cache_matches_recomputation_on_cuda():
    model = tiny().eval()
    prompt = torch.randint(0, 64, (1, 5), device="cuda")
    cached = torch.cat(list(generate(model, prompt, 40, temperature=0.0, use_cache=True)))
    plain = torch.cat(list(generate(model, prompt, 40, temperature=0.0, use_cache=False)))
    assert torch.equal(cached, plain)


def test_batches_arrive_on_the_gpu(tmp_path):
    import numpy as np

    from data.loader import get_batch

    path = tmp_path / "t.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    x, y = get_batch(path, "uint16", 4, 16, "cuda", torch.Generator().manual_seed(0))
    assert x.is_cuda and y.is_cuda and torch.equal(y[:, :-1], x[:, 1:])

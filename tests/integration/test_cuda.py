"""The same checks on a CUDA GPU, when there is one (`make gpu-check` runs the suite there)."""

import pytest
import torch

from model.gpt import lm_loss
from model.sampling import generate
from tests.helpers import explicit_path

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
SHAPE = dict(vocab_size=64, block_size=32, n_embd=64)


def test_explicit_and_fused_paths_agree_on_cuda(tiny_gpt):
    model = tiny_gpt(**SHAPE).cuda().eval()
    idx = torch.randint(0, 64, (4, 32), device="cuda")
    with torch.no_grad():
        fused = model(idx)
        with explicit_path(model):
            explicit = model(idx)
    assert (fused - explicit).abs().max().item() <= 1e-4


@pytest.mark.parametrize(
    "options",
    [{}, dict(rotary=True, qk_norm=True, mlp_activation="relu2")],
    ids=["gpt2", "speedrun-options"],
)
def test_bf16_autocast_training_learns_on_cuda(tiny_gpt, options):
    model = tiny_gpt(**SHAPE, **options).cuda()
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


def test_kv_cache_matches_recomputation_on_cuda(tiny_gpt):
    model = tiny_gpt(**SHAPE).cuda().eval()
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


def test_train_end_to_end_on_the_gpu_with_auto_device_and_compile(tmp_path):
    """What every single-GPU run does at start-up: device auto (a bare CUDA device must get its
    index), dtype auto, torch.compile; then evaluation and the final whole-split loss."""
    from configs.load import load_config
    from lab.run import train
    from model.checkpoint import load_checkpoint
    from training.runtime import compile_problem

    problem = compile_problem("cuda")
    if problem:
        pytest.skip(f"torch.compile cannot build GPU kernels here: {problem}")

    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i} of a small corpus, where it repeats.\n" for i in range(400)))
    config = load_config(
        None,
        [
            f"out_dir={tmp_path / 'run'}",
            f"data.source={text}",
            f"data.cache_dir={tmp_path / 'cache'}",
            "tokenizer.kind=char",
            "model.block_size=32",
            "model.n_layer=2",
            "model.n_head=2",
            "model.n_embd=64",
            "train.batch_size=8",
            "train.max_iters=30",
            "train.eval_interval=15",
            "train.eval_iters=2",
            "train.log_interval=5",
            "train.device=auto",
            "train.dtype=auto",
            "train.compile=true",
        ],
    )
    result = train(config)
    assert result["step"] == 30 and result["final"]["val_loss"] < 3.0
    assert result["final"]["val_loss_full"] > 0
    ckpt = load_checkpoint(tmp_path / "run")
    assert ckpt["step"] == 30 and not any(k.startswith("_orig_mod.") for k in ckpt["model"])

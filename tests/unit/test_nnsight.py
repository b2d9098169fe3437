"""The hook points are modules, so tools that nobody here wrote reach them as they reach any
layer: PyTorch's own forward hooks, and nnsight, which wraps every module of the plain GPT it is
given (HookPoint.active sees its wrapper, so the points it reads are computed)."""

import pytest
import torch

from model.hooks import hooks, run_with_cache

IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(5))
PATTERN = "blocks.0.attn.hook_pattern"
SAME = dict(atol=1e-6, rtol=0)


def zero_head_1(z, hook):
    """Head 1 of the layer writes nothing: its z (B, T, H, D) zeroed."""
    z = z.clone()
    z[:, :, 1] = 0
    return z


@torch.no_grad()
def test_a_pytorch_forward_hook_on_a_point_reads_and_replaces_it(tiny_gpt):
    model = tiny_gpt().eval()
    _, cache = run_with_cache(model, IDX, [PATTERN])
    seen = []
    point = model.get_submodule("blocks.0.attn.hook_pattern")
    handle = point.register_forward_hook(lambda module, args, out: seen.append(out))
    try:
        model(IDX)
    finally:
        handle.remove()
    assert len(seen) == 1 and torch.equal(seen[0], cache[PATTERN])  # (B, H, T, S)
    z = model.get_submodule("blocks.0.attn.hook_z")
    handle = z.register_forward_hook(lambda module, args, out: zero_head_1(out, module))
    try:
        patched = model(IDX)
    finally:
        handle.remove()
    with hooks(model, {"blocks.0.attn.hook_z": zero_head_1}):
        torch.testing.assert_close(patched, model(IDX), **SAME)
    assert (patched - model(IDX)).abs().max() > 1e-3  # the patch moved the logits


@torch.no_grad()
def test_nnsight_reads_and_patches_at_the_hook_points(tiny_gpt):
    nnsight = pytest.importorskip("nnsight", reason="pip install -r requirements-test.txt")
    model = tiny_gpt().eval()
    clean, cache = run_with_cache(model, IDX)
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(IDX):  # read in the order the points fire, as nnsight asks
        normalized = wrapped.blocks[0].ln_1.hook_normalized.output.save()
        pattern = wrapped.blocks[0].attn.hook_pattern.output.save()
        q = wrapped.blocks[1].attn.hook_q.output.save()
        logits = wrapped.output.save()
    torch.testing.assert_close(pattern, cache[PATTERN], **SAME)
    torch.testing.assert_close(q, cache["blocks.1.attn.hook_q"], **SAME)
    # A wrapper watching every point reads ln1 once, (B, T, C), through ln_1's own forward.
    torch.testing.assert_close(normalized, cache["blocks.0.ln1.hook_normalized"], **SAME)
    torch.testing.assert_close(logits, clean, **SAME)

    with wrapped.trace(IDX):
        wrapped.blocks[0].attn.hook_z.output[:, :, 1] = 0  # head 1 of layer 0 writes nothing
        patched = wrapped.output.save()
    with hooks(model, {"blocks.0.attn.hook_z": zero_head_1}):
        torch.testing.assert_close(patched, model(IDX), **SAME)
    assert (patched - clean).abs().max() > 1e-3
    torch.testing.assert_close(model(IDX), clean, **SAME)  # outside a trace: the model itself

"""The loss of a model while it trains: a few fixed batches of each split at every evaluation
(whole texts, the whole val split and `train.py --eval-only`: training/eval_text.py).

Every function takes the plain module, never the DDP wrapper or the compiled one: a process may
get no batch at all (eval_iters < processes) and must not wait in a collective inside forward,
and eval mode would make torch.compile build a second graph.
"""

import math

import torch

from data.loader import get_mixed_batch
from model.gpt import lm_loss
from training.console import perplexity
from training.runtime import all_sum

# Evaluation has no backward pass to hold memory for, so it runs in batches of about this many
# tokens, whatever the training batch. A GPU gains from large batches; a CPU runs fastest while a
# batch's activations stay in a core's caches, which about 2K tokens of a small model do: larger
# batches spill out of them, and much smaller ones measured slower too (the timings are in
# docs/log/performance.md).
EVAL_TOKENS = {"cpu": 2_048}
EVAL_TOKENS_OTHER = 16_384


def eval_batch_size(block_size, batch_size, device_type):
    """Windows per evaluation batch: about EVAL_TOKENS tokens for the device, at least the
    training batch."""
    return max(batch_size, EVAL_TOKENS.get(device_type, EVAL_TOKENS_OTHER) // block_size)


def token_losses(model, x, y, runtime):
    """Summed next-token loss (float64) of windows x (N, T) against targets y, in evaluation
    batches; the callers run it in inference mode."""
    step = eval_batch_size(x.size(1), 1, runtime.device.type)
    total = torch.zeros((), dtype=torch.float64, device=runtime.device)
    for i in range(0, len(x), step):
        with runtime.autocast():
            logits = model(x[i : i + step])
        total += lm_loss(logits.float(), y[i : i + step], reduction="sum").double()
    return total


@torch.inference_mode()
def evaluate(model, data, config, runtime):
    """Mean loss over eval_iters fixed batches of each split of `data` (a data.mix.Mixture);
    processes share the batches out. train_loss: batches drawn as in training (from the mix by
    weight; a curriculum's weights at its end); val_loss: of a mix, the weighted mean of each
    source's val loss, which are in val_loss_sources ({name: loss}). The batches are run through
    the model in larger chunks: the mean over batches of equal size is the mean over all their
    tokens."""
    settings = config.train
    dtype = data.meta["dtype"]

    def loss_of(files):
        def draw(g):
            return get_mixed_batch(
                files, dtype, settings.batch_size, config.model.block_size, runtime.device, g
            )

        return _fixed_batches_loss(model, draw, config, runtime)

    model.eval()
    out = {"train_loss": loss_of(data.train_files())}
    val = {p.name: loss_of([(p.prepared.val_path, 1.0)]) for p in data.parts}
    out["val_loss"] = sum(p.weight * val[p.name] for p in data.parts)
    if data.is_mix:
        out["val_loss_sources"] = val
    model.train()
    return out


def _fixed_batches_loss(model, draw, config, runtime):
    """Mean loss over the eval_iters batches draw(generator) gives for fixed seeds."""
    settings, block_size = config.train, config.model.block_size
    xs, ys = (
        [torch.zeros(0, block_size, dtype=torch.long, device=runtime.device)],
        [torch.zeros(0, block_size, dtype=torch.long, device=runtime.device)],
    )
    for k in range(runtime.rank, settings.eval_iters, runtime.world_size):
        # The same batches at every evaluation, so the curve shows the model change, not the data.
        x, y = draw(torch.Generator().manual_seed(config.seed + 7919 * (k + 1)))
        xs.append(x)
        ys.append(y)
    total = token_losses(model, torch.cat(xs), torch.cat(ys), runtime) / (
        settings.batch_size * block_size
    )
    return (all_sum(total, runtime) / settings.eval_iters).item()


def bits_per_byte(loss, meta):
    """Nats per token -> bits per byte of text, comparable across tokenizers."""
    if not meta.get("val_bytes"):
        return None
    return loss / math.log(2) * meta["val_tokens"] / meta["val_bytes"]


def mix_bits_per_byte(loss, data):
    """bits_per_byte of a loss over data's val text; of a mix (loss the weighted mean), the
    bits over the bytes of a stream whose windows come from each source by weight."""
    if not data.is_mix:
        return bits_per_byte(loss, data.meta)
    metas = [p.prepared.meta for p in data.parts]
    if not all(m.get("val_bytes") for m in metas):
        return None
    bytes_per_token = sum(
        p.weight * m["val_bytes"] / m["val_tokens"] for p, m in zip(data.parts, metas)
    )
    return loss / math.log(2) / bytes_per_token


def with_rates(final, data):
    """An evaluation's losses with val_ppl and val_bpb added: the val loss as a perplexity and
    in bits per byte of text (comparable across tokenizers)."""
    val_loss = final["val_loss"]
    return {**final, "val_ppl": perplexity(val_loss), "val_bpb": mix_bits_per_byte(val_loss, data)}

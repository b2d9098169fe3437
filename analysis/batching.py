"""The one way the analyses batch examples: by token length, so that no batch needs padding and
no padding can leak into attention; and with a bound, so that memory does not grow with the
number of examples (a forward's logits are batch x length x vocabulary floats)."""

# The most examples one forward of an analysis takes: enough rows to keep the matmuls
# efficient, few enough that one pass's activations stay small. 64 sequences of the default
# model's 64 tokens have logits of 64 MB (4096-wide), where a probe file's thousands in one
# batch took GBs.
BATCH_SIZE = 64


def by_length(
    lengths: list[int], batch_size: int | None = None, shortest_first: bool = False
) -> list[list[int]]:
    """Batches of indices into `lengths` (each item's token count): every batch holds items of
    one length, at most batch_size of them (None: all of that length). Lengths come in the order
    they first appear, or from the shortest with shortest_first; items keep their order."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    order = sorted(groups) if shortest_first else list(groups)
    size = batch_size or max(map(len, groups.values()), default=1)
    return [groups[n][at : at + size] for n in order for at in range(0, len(groups[n]), size)]

"""TransformerLens's `utilities.test_prompt(prompt, answer, model)` here: where the model ranks
each token of an expected answer after a prompt, with its logit and probability, and the tokens it
ranks first instead. The answer's tokens are read one after another, each after the prompt and
the answer's tokens before it (teacher forcing), as TransformerLens reads them. Ranks count from
0 (the model's first choice), as TransformerLens's do.

Numbers only (`test_prompt`); the words are format_test_prompt's.
"""

import torch

TOP = 10  # the tokens shown at each answer position, TransformerLens's default top_k


@torch.no_grad()
def test_prompt(model, tokenizer, prompt: str, answer: str, top: int = TOP) -> dict:
    """JSON-ready: "prompt_tokens" and "answer_tokens" (each token decoded alone), and
    "answer": for each answer token its "token", "rank", "logit", "prob" and the "top" tokens
    there ({"token", "logit", "prob"}, the most probable first). ValueError for an empty prompt
    or answer, or prompt and answer longer than the model's block_size together."""
    if not prompt or not answer:
        raise ValueError("the prompt and the answer must both be non-empty text")
    ids, answer_ids = tokenizer.encode(prompt), tokenizer.encode(answer)
    every = ids + answer_ids
    if len(every) > model.config.block_size:
        raise ValueError(
            f"the prompt and the answer are {len(every)} tokens, over the model's block_size "
            f"{model.config.block_size}; shorten the prompt"
        )
    device = next(model.parameters()).device
    logits = model(torch.tensor([every], device=device))[0].float()  # (T, V)
    vocab = tokenizer.vocab_size  # the padded rows of the token table are no tokens
    rows = []
    for i, token in enumerate(answer_ids):
        at = logits[len(ids) + i - 1, :vocab]  # the prediction of answer token i
        probs = at.softmax(-1)
        order = at.argsort(descending=True)
        rows.append(
            {
                "token": tokenizer.decode([token]),
                "rank": int((at > at[token]).sum()),
                "logit": at[token].item(),
                "prob": probs[token].item(),
                "top": [
                    {"token": tokenizer.decode([t]), "logit": at[t].item(), "prob": probs[t].item()}
                    for t in order[:top].tolist()
                ],
            }
        )
    return {
        "prompt_tokens": [tokenizer.decode([t]) for t in ids],
        "answer_tokens": [tokenizer.decode([t]) for t in answer_ids],
        "answer": rows,
    }

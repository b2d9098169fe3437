"""Runs: a model with its tokenizer and meta.json, from a run folder or a pretrained GPT-2."""

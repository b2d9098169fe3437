"""Test helpers: a tiny GPT-2 folder made by transformers, and a fake Hugging Face Hub.

FakeHub is a real HTTP server on 127.0.0.1 that answers what huggingface_hub.hf_hub_download
asks (huggingface_hub 2.x): HEAD, then GET, of /{repo_id}/resolve/{revision}/{path} for models
and /datasets/{repo_id}/resolve/{revision}/{path} for datasets. A file's answer carries
X-Repo-Commit (the commit the files belong to), ETag (the blob's name in the cache) and
Content-Length (checked against the bytes received); a missing repository or file is a 404 with
X-Error-Code RepoNotFound or EntryNotFound, as the Hub says it. `requests` records every
(method, path) asked for.

`use_hub(monkeypatch, url, cache)` points huggingface_hub at a server and a cache folder: it
reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE once, at import, into
huggingface_hub.constants, so the test patches those constants (ENDPOINT also lives on in the
URL template built from it).
"""

import hashlib
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import torch

COMMIT = "0123456789abcdef0123456789abcdef01234567"
WORDS = (
    "the a cat dog owl sat ran on under mat house garden because it was hungry tired and then "
    "they saw big small red old café naïve déjà vu über 東京 日本語 中文 😀 👍🏽 1 23 456 7890 "
    "it's they'll we've I'm"
).split()


def corpus(n_lines=600, seed=0) -> str:
    """Deterministic text with accents, CJK, emoji and digits, for a byte-level BPE to learn."""
    rng = random.Random(seed)
    lines = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(n_lines))
    return "\n".join(lines) + "\n"


def tiny_gpt2_folder(folder, bin_file=False, seed=0) -> Path:
    """A Hugging Face GPT-2 folder as transformers writes it: config.json, model.safetensors, and
    a byte-level BPE's vocab.json + merges.txt trained by the tokenizers package, whose size is the
    model's vocab_size. bin_file: the weights as an old pytorch_model.bin instead (keys without
    "transformer.", with the attn.bias / attn.masked_bias buffers), like GPT-2's first upload."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [corpus()],
        vocab_size=500,
        min_frequency=2,
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    bpe.save_model(str(folder))
    torch.manual_seed(seed)
    # Weights 10x GPT-2's init scale, so attention is far from uniform and the comparison bites.
    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        n_positions=64,
        vocab_size=bpe.get_vocab_size(),
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(folder)
    if bin_file:
        (folder / "model.safetensors").unlink()
        state = {
            k.removeprefix("transformer."): v
            for k, v in model.state_dict().items()
            if k != "lm_head.weight"
        }
        T = config.n_positions
        for i in range(config.n_layer):
            state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
            state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
        torch.save(state, folder / "pytorch_model.bin")
    return folder


class FakeHub:
    """Serves {(repo_type, repo_id): {path: bytes}} ("model" or "dataset") on 127.0.0.1."""

    def __init__(self, repos):
        self.repos = repos
        self.requests = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def fetched(self, method="GET"):
        """The file paths (.../resolve/...) fetched with `method`, in order."""
        return [path for m, path in self.requests if m == method and "/resolve/" in path]

    def _answer(self, handler, body):
        path = unquote(handler.path.split("?")[0])
        self.requests.append((handler.command, path))
        is_dataset = path.startswith("/datasets/")
        repo_type, path = (
            ("dataset", path[len("/datasets/") :]) if is_dataset else ("model", path[1:])
        )
        repo_id, _, rest = path.partition("/resolve/")
        revision, _, filename = rest.partition("/")
        files = self.repos.get((repo_type, repo_id))
        if files is None or not rest:
            return self._error(handler, "RepoNotFound")
        if revision not in ("main", COMMIT):
            return self._error(handler, "RevisionNotFound")
        if filename not in files:
            return self._error(handler, "EntryNotFound")
        data = files[filename]
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    @staticmethod
    def _error(handler, code):
        handler.send_response(404)
        handler.send_header("X-Error-Code", code)
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("Content-Length", "0")
        handler.end_headers()


def use_hub(monkeypatch, url, cache, offline=False):
    """Point huggingface_hub at `url` (a FakeHub, or any address), caching in `cache`."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    # huggingface_hub also fetches a small registry from the endpoint and keeps it in HF_HOME.
    monkeypatch.setattr(
        constants, "AGENT_HARNESSES_PATH", str(Path(cache) / "agent_harnesses.json")
    )

"""What several test files call: the repository root, its scripts run as a user runs them, a
tiny training config and run folder, and a training process to watch."""

import ast
import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import torch

from configs.load import load_config, to_yaml
from data.pronouns import ATTENTION_EXAMPLES
from data.tokenizer import train_tokenizer
from model.attention import CausalSelfAttention
from model.checkpoint import atomic_save
from model.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parent.parent
# Text a tiny run folder's tokenizer is trained on: the built-in sentences and every letter.
RUN_TEXT = (
    "\n".join(ATTENTION_EXAMPLES) + "\nabcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,'\n"
)


def imported_names(path):
    """The top-level names that the file imports, anywhere in it (lazy imports too)."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def run_script(script, *args, timeout=120, **kwargs):
    """`python SCRIPT ARGS...` in the repository root, its output captured as text."""
    return subprocess.run(
        [sys.executable, script, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


# The tiny model and batch of every quick training, as key=value overrides: a 2 x 2 x 32 model on
# characters, 4 sequences of 16 tokens a step, on the CPU.
TINY_MODEL = [
    "tokenizer.kind=char",
    "model.block_size=16",
    "model.n_layer=2",
    "model.n_head=2",
    "model.n_embd=32",
    "train.batch_size=4",
    "train.device=cpu",
    "train.peak_flops=1e12",
]


def tiny_config(corpus, out_dir, *overrides):
    """A config that trains a 2 x 2 x 32 model on the `corpus` fixture for 20 steps, in seconds."""
    return load_config(
        None,
        [
            f"out_dir={out_dir}",
            f"data.source={corpus / 'text.txt'}",
            f"data.cache_dir={corpus / 'cache'}",
            *TINY_MODEL,
            "train.max_iters=20",
            "train.warmup_iters=2",
            "train.eval_interval=10",
            "train.eval_iters=2",
            "train.log_interval=5",
            *overrides,
        ],
    )


def torchrun_two(cfg):
    """train.py on the config file `cfg` in two torchrun processes (gloo), one thread each; its
    stderr, which must hold no warning of ours or torch's (one per rank would be noise)."""
    r = run_script(
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "train.py",
        cfg,
        timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Warning" not in r.stderr, r.stderr[-2000:]
    return r.stderr


def write_yaml(config, path):
    path.write_text(to_yaml(config))
    return path


def make_run(folder, kind, block_size):
    """A run folder as train.py leaves it (ckpt.pt, meta.json and the tokenizer file) holding an
    untrained 2 x 2 x 32 model; returns (model, tokenizer)."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(kind, RUN_TEXT * 5, None if kind == "char" else 300)
    tokenizer.save(folder / "tokenizer.txt")
    (folder / "meta.json").write_text(
        json.dumps({"tokenizer_file": "tokenizer.txt", "tokenizer_kind": kind})
    )
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size,
        block_size=block_size,
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_multiple=1,
    )
    model = GPT(config).eval()
    atomic_save(
        {"model": model.state_dict(), "model_config": asdict(config), "step": 0}, folder / "ckpt.pt"
    )
    return model, tokenizer


def zeroed_gpt(keep=(), **config):
    """A GPT whose weights a test sets by hand: GPT(GPTConfig(**config)) built (drawing from
    torch's generator as GPT() does), every parameter but those named in `keep` zeroed and the
    LayerNorms taken out, so the residual stream holds only what the test writes into it."""
    model = GPT(GPTConfig(**config))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in keep:
                p.zero_()
    for block in model.blocks:
        block.ln_1, block.ln_2 = torch.nn.Identity(), torch.nn.Identity()
    model.ln_f = torch.nn.Identity()
    return model


def loud_gpt(config, scale, positions=True):
    """GPT(config) seeded with 0, its matrices `scale` times the usual size (with `positions`
    False the position table is left as drawn): attention far from uniform, so that patches
    move the logits and comparisons bite."""
    torch.manual_seed(0)
    model = GPT(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and (positions or "pos" not in name):
                p.mul_(scale)
    return model


# Text a tokenizer may not mangle on its way to a Hugging Face folder and back.
TORTURE = (
    "The animal in the jungle went out on a hunt because it was hungry.\n"
    "Ünïcödé, naïve café; 日本語のテキスト, 😀👍🏽 emoji; مرحبا بالعالم; ΑΒΓ αβγ\n"
    "numbers 1234567 3.14159 -42, it's they'll we've I'M  double  spaces\n\n\ttabs\r\n"
    "trailing spaces   \n   leading, <|endoftext|> as text, `code` {x: [1, 2]} ~!@#$%^&*()"
)


def loud_run(folder, kind="bpe", **overrides):
    """A run folder (ckpt.pt, meta.json, tokenizer) of an untrained 2 x 2 x 32 model whose
    matrices but the position table are 10x the usual scale (loud_gpt), for the exports' tests;
    `overrides` are GPTConfig keys."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(kind, RUN_TEXT * 5, None if kind == "char" else 300)
    tokenizer.save(folder / "tokenizer.bpe")
    (folder / "meta.json").write_text(
        json.dumps({"tokenizer_file": "tokenizer.bpe", "tokenizer_kind": kind})
    )
    config = GPTConfig(
        **{
            "vocab_size": tokenizer.vocab_size,
            "block_size": 64,
            "n_layer": 2,
            "n_head": 2,
            "n_embd": 32,
            "vocab_multiple": 64,
            **overrides,
        }
    )
    model = loud_gpt(config, 10, positions=False).eval()
    atomic_save(
        {"model": model.state_dict(), "model_config": asdict(config), "step": 0}, folder / "ckpt.pt"
    )
    return folder


def start_training(cfg):
    """train.py on the config file `cfg`, running in the background with its output piped."""
    # A shell that starts jobs in the background (nohup ... &, some CI runners) leaves SIGINT
    # ignored, and Python then never raises KeyboardInterrupt; a terminal's Ctrl-C is the default.
    return subprocess.Popen(
        [sys.executable, "train.py", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )


def wait_for_metrics(out, proc):
    """Wait until the run folder `out` has a metrics line, failing if `proc` exits first."""
    deadline = time.time() + 60
    while time.time() < deadline and not (
        (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text()
    ):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)


def run_generate(*argv):
    """generate.py's main() in this process: (exit code, stdout, stderr)."""
    import generate

    out, err = io.StringIO(), io.StringIO()
    code = generate.main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def run_main(script, *argv):
    """train.py's or generate.py's main() in this process, as run_script runs the script: a
    subprocess.CompletedProcess of its exit code and what it wrote (argparse's exits included)."""
    import generate
    import train

    args = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if script == "generate.py":
                code = generate.main(args, out=out, err=err)
            else:
                assert script == "train.py", script
                code = train.main(args)
        except SystemExit as e:  # --help, and argparse's own errors
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    return subprocess.CompletedProcess([script, *args], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def offline():
    """The network shut for the block, as on a machine without a hub: a connection is an
    OSError naming where it went."""
    import socket

    import pytest

    def refuse(sock, address):
        raise OSError(f"the test ran offline, and it tried to reach {address}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        yield


def boot_bridge(folder):
    """TransformerLens 4's TransformerBridge on the Hugging Face folder `folder` (an --export-hf
    folder), as the docs boot it, offline; the test is skipped where TransformerLens is not
    installed."""
    import pytest

    bridges = pytest.importorskip(
        "transformer_lens.model_bridge",
        reason="the reference is TransformerLens: pip install -r requirements-test.txt",
    )
    with offline():
        return bridges.TransformerBridge.boot_transformers(str(folder), device="cpu")


def one_line(excinfo, *names):
    """The message of a pytest.raises error, checked to be one line and to name each of `names`:
    the keys, values, paths or commands it must give, whatever the words around them."""
    message = str(excinfo.value)
    assert message and "\n" not in message
    missing = [name for name in names if name not in message]
    assert not missing, f"{message!r} does not name {missing}"
    return message


def error_line(r):
    """A script's stderr (a subprocess.CompletedProcess), checked to be the one-line error of a
    refusal: exit code 2, one line starting "error: ", no traceback. The test asserts what the
    line must name."""
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: "), r.stderr
    return r.stderr


def mount_tmpfs(stack: contextlib.ExitStack, folder: Path, size: str) -> bool:
    """Mount a tmpfs of `size` on `folder` (made if missing) until `stack` closes; False where
    this process may not mount."""
    folder.mkdir(exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]
    if os.geteuid() != 0 or subprocess.run(command, capture_output=True).returncode != 0:
        return False
    stack.callback(subprocess.run, ["umount", str(folder)], check=True)
    return True


def read_only_folder(stack, folder, files=None):
    """Make `folder` (created if missing) read-only until `stack` closes, after writing `files`
    ({name: text}) into it: as root a tmpfs remounted read-only (chmod does not stop root), else
    chmod. False where it cannot be done."""
    root = os.geteuid() == 0
    if root and not mount_tmpfs(stack, folder, "1m"):
        return False
    folder.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    if root:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        stack.callback(folder.chmod, 0o755)
    return True


def patterns(model, idx, **forward_kwargs):
    """Every layer's attention pattern (B, H, T, S) on idx, in layer order, read through the
    hook points; `model` may be a GPT or a lone attention module (its one layer)."""
    from model.hooks import run_with_cache

    _, cache = run_with_cache(
        model, idx, lambda name: name.endswith("hook_pattern"), **forward_kwargs
    )
    return list(cache.values())


def explicit_path(model):
    """A `with` block in which every attention layer of `model` takes the explicit path (a hook
    on its pattern that changes nothing)."""
    from model.hooks import hooks

    return hooks(model, {lambda name: name.endswith("hook_pattern"): lambda value, hook: None})


# The attention page's test sentences: tokens that would end a script or a string, with
# attention known by rule.
HOSTILE = [
    "The",
    " </script><script>alert(1)</script>",
    " <b>&amp;",
    ' "q"',
    " 'x'",
    "\u2028",
    " it",
]


def known_attention(L=3, H=4, T=None):
    """One-hot rows on a key that depends on (layer, head, query); L0 H1's last row is 0.3/0.7.
    T: by default HOSTILE's length."""
    T = len(HOSTILE) if T is None else T
    a = torch.zeros(L, H, T, T)
    for l in range(L):
        for h in range(H):
            for q in range(T):
                a[l, h, q, (q * (l + 1) + h) % (q + 1)] = 1.0
    a[0, 1, T - 1] = 0.0
    a[0, 1, T - 1, :2] = torch.tensor([0.3, 0.7])
    return a


SENTENCES = [
    {"tokens": HOSTILE, "attention": known_attention(), "pronoun": len(HOSTILE) - 1},
    {"tokens": ["A", " dog", " ran"], "attention": known_attention(T=3).tolist(), "pronoun": None},
]


# A stand-in model whose attention is known exactly (tests/unit/test_probe.py's docstring).
def uniform(ids, t):
    return {i: 1 / (t + 1) for i in range(t + 1)}


class KnownModel(torch.nn.Module):
    """A stand-in seen through the hook points as GPT is: one CausalSelfAttention per layer,
    named as a GPT's, whose explicit path gets queries and keys chosen so that
    softmax(q·kᵀ/√D) is each head's rule exactly: with k the identity, q = √D · log(rule). A rule
    maps (ids, t) to {key position: weight}; `layers` holds a list of rules a layer, a rule a
    head. Its logits are zeros of `vocab_size`; like GPT's, its `residual` is the pass without
    them (what the probe runs: it reads only the patterns)."""

    def __init__(self, layers, vocab_size, block_size=64):
        super().__init__()
        self.layers = layers
        self.vocab_size = vocab_size
        H = len(layers[0])
        # blocks.{l}.attn, as a GPT's attention is: its points are named from the tree.
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"attn": CausalSelfAttention(n_embd=H, n_head=H)})
            for _ in range(len(layers))
        )
        self.config = SimpleNamespace(block_size=block_size, n_layer=len(layers), n_head=H)

    def forward(self, idx):
        self.residual(idx)
        return torch.zeros(*idx.shape, self.vocab_size)

    def residual(self, idx):
        B, T = idx.shape
        for heads, module in zip(self.layers, (block.attn for block in self.blocks)):
            w = torch.zeros(B, len(heads), T, T, dtype=torch.float64)
            for b in range(B):
                ids = idx[b].tolist()
                for h, rule in enumerate(heads):
                    for t in range(T):
                        for j, weight in rule(ids, t).items():
                            w[b, h, t, j] = weight
            q = w.log().clamp(min=-1e4) * math.sqrt(T)  # (B, H, T, D = T); exp(-1e4) is 0
            k = torch.eye(T, dtype=torch.float64).expand(B, len(heads), T, T)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            module.explicit(q, k, torch.zeros_like(k), causal, 0.0)
        return torch.zeros(B, T, 1)  # no stream: nothing reads one

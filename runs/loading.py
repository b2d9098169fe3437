"""Loading a run: its model, tokenizer and meta.json together, one floor above model/ (tensors
and checkpoints) and data/ (tokenizers), for generation, analysis and fine-tuning alike.

A run folder (`out_dir`) holds everything generation needs:
    ckpt.pt      the checkpoint (model/checkpoint.py)
    config.yaml  the resolved training config
    meta.json    what data the run was trained on, and the tokenizer's file name
    <tokenizer>  the tokenizer file named in meta.json

Wherever a run folder is read, a pretrained GPT-2 serves too: a Hugging Face GPT-2 folder
(config.json, model.safetensors or pytorch_model.bin, vocab.json, merges.txt; model/gpt2_import.py)
or `hf:OWNER/NAME`, which fetches that folder into the Hugging Face cache (storage/hub.py); and
so does a nanoGPT run folder (its ckpt.pt; model/nanogpt_import.py) with the character vocabulary
of its meta.pkl, found beside ckpt.pt or given (data/nanogpt_meta.py), or else GPT-2's encoding.
"""

import hashlib
import re
from dataclasses import asdict
from pathlib import Path

from data.nanogpt_meta import nanogpt_char_tokenizer
from data.tokenizer import gpt2_tokenizer, load_tokenizer
from model.checkpoint import (
    CKPT_NAME,
    NoCheckpoint,
    build_gpt,
    load_checkpoint,
    model_parts,
    not_a_checkpoint_folder,
)
from model.gpt2_import import read_gpt2
from model.hooked import HookedGPT
from model.nanogpt_import import is_nanogpt, read_nanogpt
from runs.folder import META_FILE, Run
from storage.hub import WEIGHT_FILES, is_hub_name, model_folder
from storage.json_read import read_json

NANOGPT_META = "meta.pkl"


def load_run(source, device="cpu", nanogpt_meta=None):
    """Load a model to sample from or study: a run folder written by train.py, a Hugging Face
    GPT-2 folder, or hf:OWNER/NAME. The Run holds the model (eval mode), its tokenizer, the
    meta.json of a run (for GPT-2: {"source", "folder", "tokenizer_kind"}) and the checkpoint (for
    GPT-2: only "model_config"); the tokenizer is attached to the model too, for its
    TransformerLens methods (model.to_tokens, model.run_with_cache on text: model.hooked). A
    GPT-2 loads unpadded (vocab_multiple 1): padding the token table only speeds up training's
    matmuls, and copying it would slow every load.
    nanogpt_meta: a nanoGPT run's meta.pkl, where it is not beside its ckpt.pt."""
    config, state_dict, tokenizer, meta, ckpt = _open(
        source, device, vocab_multiple=1, nanogpt_meta=nanogpt_meta
    )
    try:
        model = build_gpt(config, state_dict, device, cls=HookedGPT)
    except ValueError as e:  # tensors that do not fit the shape the checkpoint records
        where = Path(source) / CKPT_NAME if (Path(source) / CKPT_NAME).is_file() else source
        raise ValueError(f"{where}: {e}; give a run folder train.py wrote") from None
    model.set_tokenizer(tokenizer)  # model.to_tokens and text inputs (model.hooked)
    return Run(model, tokenizer, meta, ckpt)


def load_pretrained(source, device="cpu"):
    """(GPTConfig, state_dict, tokenizer) of a run folder, a Hugging Face GPT-2 folder or
    hf:OWNER/NAME: where fine-tuning starts (training's init_from). The state dict loads into
    GPT(config) as it is; build_gpt(config, state_dict) does so without a random init. A GPT-2's
    config has gelu_approximate "tanh", dropout 0 and vocab_multiple 64: a model built from a
    training config must take those from here. Its Conv1D weights are transposed views
    (non-contiguous); .contiguous() them where a layout matters."""
    config, state_dict, tokenizer, _, _ = _open(source, device, vocab_multiple=64)
    return config, state_dict, tokenizer


def _open(source, device, vocab_multiple, nanogpt_meta=None):
    """(config, state_dict, tokenizer, meta, ckpt) of any source load_run accepts, checked to
    agree on the vocabulary size; a GPT-2's token table padded to a multiple of vocab_multiple."""
    path = Path(source)
    is_gpt2 = is_hub_name(source) or (
        (path / "config.json").is_file() and not (path / CKPT_NAME).is_file()
    )
    if is_gpt2:
        if nanogpt_meta:
            raise UnusedNanogptMeta(
                source, "a Hugging Face GPT-2, whose tokenizer files are its own"
            )
        config, state_dict, tokenizer, meta, ckpt = _open_gpt2(source, device, vocab_multiple)
    else:
        config, state_dict, tokenizer, meta, ckpt = _open_run(source, device, nanogpt_meta)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"the tokenizer of {source} has {tokenizer.vocab_size} tokens but its model "
            f"has {config.vocab_size}: the folder mixes two runs or models; train again "
            f"into a fresh out_dir, or download the model's files again"
        )
    return config, state_dict, tokenizer, meta, ckpt


def _open_gpt2(source, device, vocab_multiple):
    folder = model_folder(source) if is_hub_name(source) else Path(source)
    config, state_dict = read_gpt2(folder, vocab_multiple)
    state_dict = {name: t.to(device) for name, t in state_dict.items()}
    meta = {"source": str(source), "folder": str(folder), "tokenizer_kind": "gpt2"}
    return config, state_dict, gpt2_tokenizer(folder), meta, {"model_config": asdict(config)}


def _open_run(out_dir, device, nanogpt_meta=None):
    out_dir = Path(out_dir)
    for folder in (out_dir, out_dir / CKPT_NAME):  # --ckpt RUN/ckpt.pt, or RUN, a folder
        if folder.name == CKPT_NAME and folder.is_dir():
            raise ValueError(not_a_checkpoint_folder(folder))
    if out_dir.is_file():
        raise ValueError(
            f"{out_dir} is a file; give the run folder that holds it: {out_dir.parent}"
        )
    if out_dir.is_dir() and not (out_dir / CKPT_NAME).is_file():
        if any((out_dir / name).is_file() for name in WEIGHT_FILES):
            raise ValueError(
                f"{out_dir} holds Hugging Face weights but no config.json; download config.json "
                "(and vocab.json, merges.txt) from the model's page into it"
            )
        raise NoCheckpoint(
            out_dir / CKPT_NAME,
            f"no checkpoint at {(out_dir / CKPT_NAME).absolute()}; train one there first, or "
            "give a Hugging Face GPT-2 folder or hf:OWNER/NAME",
        )
    if not out_dir.exists() and re.fullmatch(r"\w[\w.-]*", str(out_dir)):
        # A bare name such as nanoGPT's init_from=gpt2 is a Hugging Face model here only with
        # hf:, or a folder of that name would be ambiguous.
        raise NoCheckpoint(
            out_dir / CKPT_NAME,
            f"no checkpoint at {(out_dir / CKPT_NAME).absolute()} (there is "
            f"no folder {out_dir}); for the Hugging Face model of that name, "
            f"write hf:{out_dir.as_posix()}",
        )
    ckpt = load_checkpoint(out_dir / CKPT_NAME, map_location=device)
    if is_nanogpt(ckpt):
        return _open_nanogpt(out_dir, ckpt, nanogpt_meta)
    if nanogpt_meta:
        raise UnusedNanogptMeta(out_dir, f"a train.py run, whose {META_FILE} names its tokenizer")
    meta_path = out_dir / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} is missing; the run folder {out_dir} is incomplete")
    try:
        meta = read_json(meta_path)
        tokenizer_path = out_dir / meta["tokenizer_file"]
    except (ValueError, KeyError, TypeError) as e:
        why = str(e) if isinstance(e, ValueError) else "it needs a tokenizer_file"
        raise ValueError(
            f"{meta_path} is not valid run metadata ({why}); train again to rewrite it"
        ) from None
    recorded = (ckpt.get("data") or {}).get("tokenizer_sha256")
    if (
        recorded
        and tokenizer_path.is_file()
        and hashlib.sha256(tokenizer_path.read_bytes()).hexdigest() != recorded
    ):
        raise ValueError(
            f"{out_dir} was trained with another tokenizer ({meta.get('tokenizer_kind')}: the "
            f"files differ): {tokenizer_path.name} is not the one its checkpoint records; put the "
            "run's own tokenizer file back, or train again"
        )
    config, state_dict = model_parts(ckpt, out_dir / CKPT_NAME)
    return config, state_dict, load_tokenizer(tokenizer_path), meta, ckpt


class NoNanogptMeta(ValueError):
    """A nanoGPT run of characters whose meta.pkl (its vocabulary) is not where it was looked
    for (`problem` says where). load_run(..., nanogpt_meta=FILE) names it; generate.py words
    that as --meta."""

    def __init__(self, problem: str):
        super().__init__(f"{problem}; give the meta.pkl of the run's data as nanogpt_meta")
        self.problem = problem


class UnusedNanogptMeta(ValueError):
    """A nanoGPT meta.pkl given (nanogpt_meta) for a model that is no nanoGPT run: `source`, which
    is `what`. Refused rather than ignored: the model would load with its own tokenizer while the
    caller believes the meta.pkl's is used. generate.py words it as --meta."""

    def __init__(self, source, what: str):
        super().__init__(
            f"{source} is {what}, not a nanoGPT run: a nanoGPT meta.pkl (nanogpt_meta) does not "
            "apply to it; leave it out"
        )
        self.source, self.what = source, what


def _open_nanogpt(folder, ckpt, meta_pkl=None):
    """A nanoGPT run: its weights, and the characters of its meta.pkl (given, or beside ckpt.pt)
    or, with none, GPT-2's encoding (its GPT-2 runs)."""
    given, meta_pkl = meta_pkl, Path(meta_pkl) if meta_pkl else folder / NANOGPT_META
    if given and meta_pkl.is_dir():  # nanoGPT's data/<dataset>/ folder: its meta.pkl
        if not (meta_pkl / NANOGPT_META).is_file():
            raise NoNanogptMeta(f"{meta_pkl} is a folder with no {NANOGPT_META} in it")
        meta_pkl = meta_pkl / NANOGPT_META
    if given and not meta_pkl.is_file():
        raise NoNanogptMeta(f"there is no {meta_pkl}")
    if meta_pkl.is_file():
        tokenizer, kind = nanogpt_char_tokenizer(meta_pkl), "char"
    elif ckpt["model_args"].get("vocab_size", 0) < 50257:
        raise NoNanogptMeta(
            f"{folder} is a nanoGPT run of {ckpt['model_args'].get('vocab_size')} tokens, and "
            f"there is no {meta_pkl}: copy the meta.pkl of its data (nanoGPT writes "
            "data/<dataset>/meta.pkl) beside its ckpt.pt"
        )
    else:
        tokenizer, kind = gpt2_tokenizer(), "gpt2"
    config, state_dict = read_nanogpt(ckpt, tokenizer.vocab_size)
    meta = {"source": str(folder), "tokenizer_kind": kind, "nanogpt": True}
    return config, state_dict, tokenizer, meta, {**ckpt, "model_config": asdict(config)}

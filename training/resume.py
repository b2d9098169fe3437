"""What resuming a run keeps, what it takes from the new config, and what it refuses.

A checkpoint means "these weights, trained this far, on this data, with this tokenizer, by this
optimizer". Whatever would change that meaning is refused with a one-line error that names it;
everything else is taken from the new config and listed when the run resumes:

    refused   model shape (model.block_size, n_layer, n_head, n_embd, bias, vocab_multiple) and
              architecture (mlp_activation, qk_norm, rotary, tie_embeddings),
              the data and tokenizer (compared by content: the corpus's SHA-256, the val split,
              the tokenizer file's SHA-256; of a data.mix, every source's and its weight;
              the pronoun language's settings, data.pronouns, named where they differ),
              train.optimizer
    honoured  every other key: the learning-rate schedule (lr, min_lr, warmup_iters, decay_frac,
              max_iters), weight_decay, beta1, beta2, muon_lr, muon_momentum, grad_clip, batch_size,
              grad_accum_steps, eval and log intervals, device, dtype, compile, peak_flops,
              model.dropout, seed, data.cache_dir
"""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from configs.load import flatten
from data.mix_spec import mix_entries
from data.pronouns.story_mix import StoryMix
from model.checkpoint import CKPT_NAME, model_parts, weights_problem
from model.gpt import SHAPE_KEYS, GPTConfig
from model.nanogpt_import import is_nanogpt
from runs.folder import META_FILE
from storage.json_read import read_json

VAL_SPLIT = "was trained on {} with another val split (data.val_fraction has changed)"
RESTART = "use another out_dir, or start over in this one, which replaces its checkpoint"


class CannotResume(ValueError):
    """out_dir holds a checkpoint this run cannot continue (`problem`: what differs, or what is
    wrong with it). Another out_dir, or a forced restart (train(config, force=True), which
    train.py words as --force), starts over; str() says so without naming a flag."""

    def __init__(self, problem: str):
        super().__init__(f"{problem}; {RESTART} (train(config, force=True))")
        self.problem = problem


def _fingerprint(meta, folder):
    """The corpus, where val starts, and the tokenizer file, from a meta.json and its folder; the
    pronoun language's settings where the corpus is the pronouns'."""
    tokenizer_bytes = (Path(folder) / meta["tokenizer_file"]).read_bytes()
    return {
        "source": meta.get("source"),
        "source_sha256": meta.get("source_sha256"),
        "split_char": meta.get("split_char"),
        "tokenizer_kind": meta.get("tokenizer_kind"),
        "tokenizer_sha256": hashlib.sha256(tokenizer_bytes).hexdigest(),
        **_language(meta),
    }


def _language(*metas):
    """{"pronouns": the pronoun language's settings} where a meta.json records them, else {}."""
    said = [m["pronouns"] for m in metas if "pronouns" in m]
    return {"pronouns": said[0]} if said else {}


def data_fingerprint(data):
    """What a run is trained on, by content: the corpus, where val starts, the tokenizer file;
    of a mix (data.mix.Mixture), each source's and its weight, under "mix"."""
    if not data.is_mix:
        part = data.parts[0].prepared
        return _fingerprint(part.meta, part.dir)
    mix = [
        {
            "name": p.name,
            "weight": p.weight,
            "start_weight": p.start_weight,
            "source_sha256": p.prepared.meta["source_sha256"],
            "split_char": p.prepared.meta["split_char"],
        }
        for p in data.parts
    ]
    return {
        "source": data.label,
        "source_sha256": hashlib.sha256(json.dumps(mix).encode()).hexdigest(),
        "split_char": None,
        "tokenizer_kind": data.meta["tokenizer_kind"],
        "tokenizer_sha256": hashlib.sha256(data.tokenizer_path.read_bytes()).hexdigest(),
        "mix": mix,
        **_language(*(p.prepared.meta for p in data.parts)),
    }


def recorded_fingerprint(ckpt, out_dir):
    """The fingerprint a checkpoint recorded; for checkpoints older than that record, the one its
    run folder's meta.json and tokenizer file give."""
    if "data" in ckpt:
        return ckpt["data"]
    try:
        return _fingerprint(json.loads((Path(out_dir) / META_FILE).read_text()), out_dir)
    except (OSError, ValueError, KeyError, TypeError):
        raise CannotResume(
            f"{out_dir} has a checkpoint but no readable meta.json or tokenizer file, so "
            "what it was trained on is unknown"
        ) from None


def data_mismatch(old, new):
    """How two data fingerprints differ, as words after "<out_dir> ...", or None if they agree."""
    languages = old.get("pronouns"), new.get("pronouns")
    if None not in languages and languages[0] != languages[1]:
        if old["source_sha256"] != new["source_sha256"]:  # equal weights may write one text
            return (
                f"was trained on the pronoun language {languages[0]}, not {languages[1]} as "
                "now (data.pronouns)"
            )
    if ("mix" in old or "mix" in new) and old["source_sha256"] != new["source_sha256"]:
        return _mix_mismatch(old, new)
    if old["source_sha256"] == new["source_sha256"] and old["split_char"] != new["split_char"]:
        return VAL_SPLIT.format(old["source"])
    if old["source_sha256"] != new["source_sha256"] or old["split_char"] != new["split_char"]:
        if old["source"] == new["source"]:
            return (
                f"was trained on other data ({old['source']} as it was then: its text has "
                "changed since, or the val split)"
            )
        return (
            f"was trained on other data ({old['source']}, not {new['source']} as now, "
            "or another val split)"
        )
    if old["tokenizer_sha256"] != new["tokenizer_sha256"]:
        return (
            f"was trained with another tokenizer ({old['tokenizer_kind']}, now "
            f"{new['tokenizer_kind']}: the files differ)"
        )
    return None


def _mix_mismatch(old, new):
    """How two mixes' fingerprints differ, in the words data_mismatch returns."""

    def texts(fingerprint, keys=("name", "source_sha256", "split_char")):
        return [tuple(m[k] for k in keys) for m in fingerprint.get("mix", [])]

    def weighted(fingerprint):
        return texts(fingerprint, ("name", "source_sha256", "split_char", "weight", "start_weight"))

    if texts(old) == texts(new):
        what = "the same sources with other weights"
    elif sorted(weighted(old)) == sorted(weighted(new)):
        order = ", ".join(m["name"] for m in old["mix"])
        return (
            f"was trained on the same mix in another order ({order}); give its sources in "
            "that order (the order draws the batches)"
        )
    elif texts(old, ("name", "source_sha256")) == texts(new, ("name", "source_sha256")):
        return VAL_SPLIT.format(old["source"])
    else:
        what = "other data"
    return f"was trained on {old['source']}, not {new['source']} as now ({what})"


def check_language(config, force: bool) -> None:
    """CannotResume, before any corpus is generated, where the run in config.out_dir would be
    resumed in a pronoun language that draws other stories than the one it was trained in (its
    meta.json's); the data's fingerprint checks the rest once the data is prepared."""
    sources = [e.source for e in mix_entries(config.data.mix, config.data.source)]
    out_dir = Path(config.out_dir)
    if force or "pronouns" not in sources or not (out_dir / CKPT_NAME).is_file():
        return
    try:
        old = read_json(out_dir / META_FILE)["pronouns"]
        trained = StoryMix.from_label(old)
    except (OSError, ValueError, KeyError, TypeError):
        return  # none recorded: the fingerprint decides
    new = config.data.pronouns.story_mix
    if not trained.draws_like(new):
        raise CannotResume(
            f"{out_dir} was trained on the pronoun language {old}, not {new.label} as now "
            "(data.pronouns)"
        )


def check_written_by_train(ckpt, path):
    """ValueError naming `path` unless `ckpt` is a checkpoint train.py wrote: a model this code
    can build (finite weights), its optimizer's state, the step and the best val loss."""
    if is_nanogpt(ckpt):
        raise CannotResume(
            f"{path} is a nanoGPT checkpoint, which training does not resume; start "
            f"from its weights with train.init_from={Path(path).parent} in another out_dir"
        )
    try:
        model_parts(ckpt, path, fix="")
    except ValueError as e:
        raise CannotResume(str(e)) from None
    kinds = {"optimizer": dict, "step": int, "best_val_loss": float}
    wrong = [key for key, kind in kinds.items() if not isinstance(ckpt.get(key), kind)]
    if wrong:
        raise CannotResume(
            f"{path} is not a checkpoint train.py wrote: it has no "
            f"{' or '.join(wrong)} to resume from"
        )


def check_resume(ckpt, config_dict, model_config_dict, fingerprint, out_dir):
    """ValueError (one line naming what differs) if the checkpoint cannot be continued under the
    new config; otherwise the list of honoured keys that changed, as "key old -> new"."""
    check_written_by_train(ckpt, Path(out_dir) / CKPT_NAME)
    old_config = GPTConfig.from_saved(ckpt["model_config"])
    old_model, new_model = asdict(old_config), model_config_dict
    shape = [k for k in SHAPE_KEYS if old_model[k] != new_model[k]]
    old_vocab = old_config.padded_vocab_size
    new_vocab = GPTConfig(**new_model).padded_vocab_size
    if shape or old_vocab != new_vocab:
        diff = [f"{k} {old_model.get(k)} -> {new_model[k]}" for k in shape]
        if old_vocab != new_vocab:
            diff.append(f"vocabulary {old_vocab} -> {new_vocab}")
        raise CannotResume(f"{out_dir} holds a model of another shape ({', '.join(diff)})")
    problem = weights_problem(old_config, ckpt["model"])
    if problem:
        raise CannotResume(
            f"{Path(out_dir) / CKPT_NAME} is not a checkpoint train.py wrote: its "
            f"weights do not fit its model_config ({problem})"
        )
    mismatch = data_mismatch(recorded_fingerprint(ckpt, out_dir), fingerprint)
    if mismatch:
        raise CannotResume(f"{out_dir} {mismatch}")
    old_cfg, new_cfg = flatten(ckpt.get("config", {})), flatten(config_dict)
    if old_cfg.get("train.init_from", "") != new_cfg["train.init_from"]:
        raise CannotResume(
            f"{out_dir} holds a run started from {old_cfg.get('train.init_from') or 'scratch'!r}; "
            f"train.init_from={new_cfg['train.init_from'] or '(none)'} would be another run, "
            "not this one resumed"
        )
    if old_cfg.get("train.optimizer", new_cfg["train.optimizer"]) != new_cfg["train.optimizer"]:
        raise CannotResume(
            f"{out_dir} was trained with another optimizer (train.optimizer="
            f"{old_cfg['train.optimizer']}); resume with that one"
        )
    skip = {
        "out_dir",
        "train.resume",
        "train.run_steps",
        "data.source",
        "data.mix",
        "tokenizer.kind",
        "tokenizer.vocab_size",
        "data.val_fraction",
    } | {f"model.{k}" for k in SHAPE_KEYS}
    return [
        f"{key} {old_cfg[key]!r} -> {value!r}"
        for key, value in new_cfg.items()
        if key not in skip
        and not key.startswith("data.pronouns.")  # the data: compared by its fingerprint
        and key in old_cfg
        and old_cfg[key] != value
    ]


def load_optimizer_state(optimizer, state):
    """Load a checkpoint's optimizer state (moments, step counts) but keep the hyperparameters
    (peak_lr, weight decay, betas, momentum...) the optimizer was built with from the new config:
    load_state_dict would otherwise bring back the old ones."""
    current = [
        {k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups
    ]
    try:
        optimizer.load_state_dict(state)
    except (ValueError, KeyError, TypeError) as e:
        raise CannotResume(
            f"the checkpoint's optimizer state does not fit this optimizer ({e}); it was "
            "written by another optimizer or an older version of this one"
        ) from None
    for group, hyper in zip(optimizer.param_groups, current):
        group.update(hyper)


def load_scaler_state(scaler, state):
    """Restore the fp16 GradScaler; a note (or None) when there is nothing to restore: a
    checkpoint trained in bf16 or fp32 has an empty state, so fp16 starts a fresh scale."""
    if scaler.is_enabled() and not state:
        return "the checkpoint was not trained in float16: the loss scaler starts afresh"
    if scaler.is_enabled():
        scaler.load_state_dict(state)
    return None

"""The training config: typed dataclasses, one per YAML section (configs/ranges.py checks the
value ranges a type alone cannot say). configs.load reads a file and overrides into them
strictly.

Each field is documented once, here, in its `help` (the model section's in MODEL_HELP, its
fields taken from GPTConfig); `python train.py --help` prints it.
"""

from collections.abc import Callable
from dataclasses import Field, asdict, dataclass, field, fields, make_dataclass, replace
from pathlib import Path

from configs.paths import DEFAULT_CACHE, cache_folder
from configs.run_dir import DEMO_OUT_DIR, Origin
from data.mix_spec import MIX_FORM, parse_mix
from data.pronouns.story_mix import StoryMix
from model.gpt import ACTIVATIONS, GPTConfig


def setting(
    default: object, help: str, choices: tuple | None = None, parse: Callable | None = None
) -> Field:
    """A config field: its default, its --help text and, for a string, its allowed values; a
    list-valued field has `parse`, which turns what YAML or the command line gives into the list
    (ValueError, one line, for a bad value)."""
    metadata = {"help": help, "choices": choices, "parse": parse}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def mix_list(value: object) -> list[dict]:
    """data.mix as stored in a config: [{source, weight[, start_weight]}] (mix_spec.parse_mix)."""
    return [
        {"source": e.source, "weight": e.weight}
        | ({} if e.start_weight is None else {"start_weight": e.start_weight})
        for e in parse_mix(value)
    ]


LOGGERS = ("tensorboard", "wandb")


def logger_list(value: object) -> list[str]:
    """train.loggers: a list of names, or "tensorboard,wandb" on the command line."""
    names = [] if value in (None, "", []) else value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"expected a list of {' and '.join(LOGGERS)}, got {value!r}")
    names = [n.strip() for n in names]
    for name in names:
        if name not in LOGGERS:
            raise ValueError(f"{name!r} is not a logger; choose from {', '.join(LOGGERS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{value!r} names a logger twice")
    return names


@dataclass
class PronounsConfig:
    """The data.pronouns section: what the generated pronoun language (data.source pronouns, or
    a data.mix that holds it) draws, data/pronouns/story_mix.py's StoryMix. The defaults draw
    the language as it always was; any other setting is another corpus, cached and fingerprinted
    apart."""

    agreement: float = setting(
        1.0,
        "weight of the agreement shapes (the candidates take different pronouns): each drawn "
        "this many times as often as at 1",
    )
    role: float = setting(
        1.0, "weight of the role shapes (the subject of the pronoun's clause is meant)"
    )
    meaning: float = setting(
        1.0, "weight of the meaning shapes (a description before the pronoun fits one kind)"
    )
    role_same_kind: bool = setting(
        False,
        "role stories whose candidates that take the pronoun are of one kind and number, so "
        "that every one has a role choice twin (the candidates exchanged)",
    )
    heldout_cue_pairs: bool = setting(
        False,
        "each (describing word, noun) pair is written in one split only: test's cue-and-noun "
        "pairs are never in the training text",
    )
    prose: float = setting(
        1.0,
        "how much text without a pronoun the corpus holds, as a multiple of the language's own "
        "(1: 30% of the lines, and a sentence after half of the examples; 0: none; at most 2)",
    )

    @property
    def story_mix(self) -> StoryMix:
        """These settings as the generator takes them (ValueError: a weight below 0, or all 0)."""
        return StoryMix(**asdict(self))


@dataclass
class DataConfig:
    source: str = setting(
        "pronouns",
        "a .txt file, a folder of .txt files, hf:OWNER/DATASET/PATH (a text file of a Hugging "
        "Face dataset), or a named corpus: pronouns, tinyshakespeare",
    )
    mix: list = setting(
        [],
        parse=mix_list,
        help=f"several sources in one run, each window drawn from one of them by weight, one "
        f"tokenizer for all: {MIX_FORM}, or in YAML a list of {{source, weight}}; replaces "
        "data.source",
    )
    pronouns: PronounsConfig = field(default_factory=PronounsConfig)
    val_fraction: float = setting(
        0.1, "share of the text, cut on a line boundary at the end, held out for validation"
    )
    cache_dir: str = setting(
        DEFAULT_CACHE,
        "where downloaded corpora and prepared token files are "
        "kept (the default is the checkout's .cache, from any folder)",
    )

    @property
    def cache_path(self) -> Path:
        """The folder cache_dir names (configs.paths.cache_folder)."""
        return cache_folder(self.cache_dir)


@dataclass
class TokenizerConfig:
    kind: str = setting(
        "bpe",
        "char, bpe (trained on the corpus) or gpt2 (GPT-2's: from a Hugging Face folder in the "
        "hub cache, else tiktoken's)",
        ("char", "bpe", "gpt2"),
    )
    vocab_size: int | None = setting(1024, "bpe vocabulary size (ignored by char and gpt2)")


# The model section is GPTConfig's fields, in its order, with its defaults and types, but the
# vocabulary (the tokenizer gives it) and gelu_approximate (GPT-2 imports set it). Each field's
# --help line is here, once; a GPTConfig field with none is an error at import.
NOT_IN_MODEL_SECTION = ("vocab_size", "gelu_approximate")
MODEL_HELP = {
    "block_size": "context length in tokens",
    "n_layer": "number of transformer blocks",
    "n_head": "attention heads per block",
    "n_embd": "width of the residual stream; divisible by n_head",
    "dropout": "dropout probability in [0, 1)",
    "bias": "biases in linear layers and LayerNorms",
    "vocab_multiple": "pad the embedding table to a multiple of this (faster GPU matmuls); padded "
    "ids are never scored or sampled",
    "mlp_activation": "the MLP's nonlinearity: gelu (GPT-2), or relu2, relu(x) squared "
    "(modded-nanogpt)",
    "qk_norm": "RMS-normalise every head's queries and keys before the scores (stabler at high "
    "learning rates)",
    "rotary": "rotary position embeddings: rotate queries and keys by position instead of adding "
    "a learned position table",
    "tie_embeddings": "the LM head is the token embedding matrix (GPT-2); false: the head has its "
    "own matrix",
    "local_window": "layer 0's heads see only their last this many positions, themselves "
    "included (a local first layer); 0: every earlier position",
}
MODEL_CHOICES = {"mlp_activation": ACTIVATIONS}


def model_section(source: type = GPTConfig, help: dict[str, str] = MODEL_HELP) -> type:
    """The model section's dataclass, made from the dataclass `source`'s fields (GPTConfig's)
    less NOT_IN_MODEL_SECTION, each with its `help` line (a field without one is a TypeError)."""
    kept = [f for f in fields(source) if f.name not in NOT_IN_MODEL_SECTION]
    if missing := [f.name for f in kept if f.name not in help]:
        raise TypeError(f"{source.__name__} fields without a --help line: {', '.join(missing)}")
    made = [
        (f.name, f.type, setting(f.default, help[f.name], MODEL_CHOICES.get(f.name))) for f in kept
    ]
    section = make_dataclass("ModelConfig", made, namespace={"__module__": __name__})
    section.__doc__ = "The model section: GPTConfig's fields but its vocabulary and GELU's form."
    return section


ModelConfig = model_section()


@dataclass
class TrainConfig:
    batch_size: int = setting(32, "sequences per micro-batch, per process")
    grad_accum_steps: int = setting(
        1, "micro-batches per optimizer step, summed over all processes"
    )
    max_iters: int = setting(1000, "optimizer steps in the whole run")
    run_steps: int = setting(
        0,
        "stop after this many steps of this invocation, with a checkpoint; the same command "
        "goes on (a job with a time limit); 0: train to max_iters",
    )
    lr: float = setting(3e-3, "peak learning rate")
    min_lr: float = setting(3e-4, "learning rate at the end of the decay")
    warmup_iters: int = setting(50, "steps of linear warmup from 0 to lr")
    decay_frac: float = setting(
        0.0, "0: cosine; f: lr held, then a straight line to min_lr over the last f of the steps"
    )
    optimizer: str = setting(
        "adamw",
        "adamw, or muon (Muon for the blocks' matrices, AdamW for the rest)",
        ("adamw", "muon"),
    )
    weight_decay: float = setting(
        0.1, "AdamW weight decay, on weights of 2 or more dimensions only"
    )
    beta1: float = setting(0.9, "AdamW beta1")
    beta2: float = setting(0.99, "AdamW beta2")
    muon_lr: float = setting(0.02, "peak learning rate of Muon's matrices (optimizer: muon)")
    muon_momentum: float = setting(0.95, "Muon's Nesterov momentum (optimizer: muon)")
    grad_clip: float = setting(1.0, "clip the gradient's global norm to this; 0 turns clipping off")
    eval_interval: int = setting(200, "steps between evaluations (and checkpoints)")
    eval_iters: int = setting(20, "batches per split in each evaluation")
    final_full_eval: bool = setting(
        True, "at the end, also measure the loss on the whole val split (not a few batches)"
    )
    log_interval: int = setting(10, "steps between log lines in metrics.jsonl")
    device: str = setting("auto", "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    dtype: str = setting(
        "auto",
        "auto, float32, bfloat16 or float16 (autocast on CUDA)",
        ("auto", "float32", "bfloat16", "float16"),
    )
    compile: bool = setting(False, "torch.compile the model")
    init_from: str = setting(
        "",
        "fine-tune: start from these weights with a fresh optimizer and their tokenizer: a run "
        "folder, a Hugging Face GPT-2 folder, or hf:OWNER/NAME; the model keys must match its "
        "shape (block_size may be smaller, dropout may differ)",
    )
    resume: str = setting(
        "auto",
        "auto: continue from out_dir/ckpt.pt if there is one; never: refuse to run where a "
        "checkpoint exists (--force starts over)",
        ("auto", "never"),
    )
    probe_interval: int | None = setting(
        None,
        "steps between coreference probes while training (every head's cand@1 on the pronoun "
        "corpus's dev set, or train.probe_file), logged to metrics.jsonl and drawn in probe.png; "
        "null: every eval_interval when the data holds the pronoun corpus or probe_file is set, "
        "else off; 0: off",
    )
    probe_file: str = setting(
        "",
        "labelled JSONL examples for train.probe_interval instead of the pronoun corpus's dev "
        "set (needed when the corpus is not the built-in pronouns); natural: the built-in "
        "hand-written natural sentences",
    )
    loggers: list = setting(
        [],
        parse=logger_list,
        help="experiment trackers that receive every record of metrics.jsonl (rank 0): "
        "tensorboard (into out_dir/tensorboard) and/or wandb (WANDB_MODE=offline and its other "
        "variables respected); each needs its package installed",
    )
    peak_flops: float | None = setting(
        None,
        "FLOP/s of one process taken as 100% MFU; default: the GPU's bf16 peak (n/a for a GPU "
        "not in the table), or the best of several CPU matmul timings",
    )


@dataclass
class Config:
    out_dir: str = setting(
        DEMO_OUT_DIR, "run folder: checkpoint, config, tokenizer, metrics, loss.png"
    )
    seed: int = setting(1337, "seed for initialisation, data order and dropout")
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    # Not a key: what load_config read, from which run_dir is decided. A field, so that
    # dataclasses.replace and copy keep it; left out of comparisons, repr and config_dict.
    origin: Origin | None = field(default=None, compare=False, repr=False, metadata={"key": False})

    @property
    def run_dir(self) -> str:
        """Where the run goes (configs/run_dir.py): out_dir, or out/<source> for a run on other
        data than its config file's. A Config built directly, not by load_config, has no
        origin: its out_dir is taken as chosen."""
        if self.origin is None:
            return self.out_dir
        return self.origin.run_dir(self.out_dir, self.data.source, self.data.mix)


def key_fields(cls: type) -> list[Field]:
    """The fields of a config dataclass that are keys of the YAML (all but Config.origin)."""
    return [f for f in fields(cls) if f.metadata.get("key", True)]


def config_dict(config: Config) -> dict:
    """The config's keys as a nested dict: dataclasses.asdict without the origin."""
    tree = asdict(config)
    del tree["origin"]
    return tree


def resolved(config: Config) -> Config:
    """A copy of `config` whose out_dir is its run_dir: what a run works in and records in its
    config.yaml. The config given is left as it is."""
    return replace(config, out_dir=config.run_dir)


class ConfigError(ValueError):
    """A config that cannot be used: one line, kept short however long the value it quotes (the
    middle of a message over MAX_MESSAGE characters is left out, so what to do still shows)."""

    MAX_MESSAGE = 600

    def __init__(self, message: str):
        message = " ".join(str(message).split("\n"))
        if len(message) > self.MAX_MESSAGE:
            half = self.MAX_MESSAGE // 2
            message = f"{message[:half]} [...] {message[-half:]}"
        super().__init__(message)

"""The config's model section is made from GPTConfig (configs.schema.model_section), so the two
cannot drift: the same fields in the same order, types and defaults, and a field added to
GPTConfig is a key of the section (with its --help line, or an error saying it has none)."""

from dataclasses import asdict, dataclass, fields

import pytest

from configs.load import ConfigError, describe, load_config
from configs.schema import MODEL_HELP, NOT_IN_MODEL_SECTION, ModelConfig, model_section
from model.gpt import GPTConfig


def test_the_section_is_gptconfigs_fields_with_their_types_and_defaults():
    ours = [(f.name, f.type, f.default) for f in fields(ModelConfig)]
    theirs = [
        (f.name, f.type, f.default) for f in fields(GPTConfig) if f.name not in NOT_IN_MODEL_SECTION
    ]
    assert ours == theirs
    assert len(ours) == len(fields(GPTConfig)) - len(NOT_IN_MODEL_SECTION)
    assert set(MODEL_HELP) == {name for name, _, _ in ours}  # no help line for a field gone
    # The section's values are GPTConfig's keyword arguments, as the training job builds it.
    assert GPTConfig(vocab_size=50, **asdict(ModelConfig())) == GPTConfig(vocab_size=50)


def test_a_field_added_to_gptconfig_is_a_key_of_the_section():
    @dataclass
    class Grown(GPTConfig):
        n_experts: int = 8

    with pytest.raises(TypeError, match="n_experts"):
        model_section(Grown)  # no --help line yet: an error at import, not a silent key
    section = model_section(Grown, {**MODEL_HELP, "n_experts": "experts per MLP"})
    added = {f.name for f in fields(section)} - {f.name for f in fields(ModelConfig)}
    assert added == {"n_experts"} and section().n_experts == 8
    assert fields(section)[-1].metadata["help"] == "experts per MLP"


def test_yaml_keys_of_the_section_convert_and_check_as_before():
    config = load_config(None, ["model.n_layer=3", "model.qk_norm=true"])
    assert (config.model.n_layer, config.model.qk_norm) == (3, True)
    with pytest.raises(ConfigError, match="relu2"):
        load_config(None, ["model.mlp_activation=tanh"])  # the choices come along
    with pytest.raises(ConfigError, match="vocab_size"):
        load_config(None, ["model.vocab_size=9"])  # the tokenizer gives it: no key
    help_line = next(line for line in describe().splitlines() if "model.n_embd" in line)
    assert MODEL_HELP["n_embd"] in help_line and "default 128" in help_line

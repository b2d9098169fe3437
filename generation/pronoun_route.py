"""From one's own corpus to a pronoun head: a run trained on its own text alone (no pronoun
language in its data) has no head that looks a pronoun's antecedent up, since nothing in its
text rewards one. generate.py's --attention and --probe say so in one line, with the command
that mixes the pronoun language into the same corpus (data.mix, a curriculum as in
configs/shakespeare_pronouns.yaml)."""

import shlex
from pathlib import Path

from data.mix_spec import parse_mix, source_name
from runs.loading import Run

MIX_CONFIG = "configs/shakespeare_pronouns.yaml"  # the default's model, a curriculum, 2200 steps
PRONOUNS = "pronouns"


def trained_sources(run: Run) -> list[str] | None:
    """The data sources the run was trained on (data.mix's, or data.source), as its checkpoint's
    config names them; None for a model not trained here (no config: GPT-2, a hand-made run)."""
    data = (run.ckpt or {}).get("config", {}).get("data")
    if not isinstance(data, dict) or not data.get("source"):
        return None
    entries = parse_mix(data.get("mix"))
    return [e.source for e in entries] if entries else [str(data["source"])]


def mix_command(sources: list[str]) -> str:
    """The train.py command that mixes the pronoun language into `sources`: the pronouns alone
    at first, where the head forms, half of the windows at the end."""
    mix = ",".join([*(f"{s}:0..0.5" for s in sources), f"{PRONOUNS}:1..0.5"])
    name = "+".join([*(source_name(s) for s in sources), PRONOUNS])
    out = Path("out") / name
    return (
        f"python train.py {MIX_CONFIG} data.mix={shlex.quote(mix)} out_dir={shlex.quote(str(out))}"
    )


def pronoun_route(run: Run) -> str | None:
    """The one line for a run trained without the pronoun language: it has no pronoun head, and
    the command that grows one on the same corpus; None where the pronouns were in its data or
    the run's data is unknown."""
    sources = trained_sources(run)
    if sources is None or any(source_name(s) == PRONOUNS for s in sources):
        return None
    return (
        f"note: this model was trained on {', '.join(sources)} without the pronoun language, so "
        "it has no pronoun head (no head learned to look a pronoun's antecedent up); to grow "
        f"one on the same text, mix the pronouns in: {mix_command(sources)}"
    )

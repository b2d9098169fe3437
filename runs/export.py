"""A run folder as a Hugging Face folder (`train.py --export-hf DIR`): config.json,
generation_config.json, model.safetensors and the tokenizer files, which transformers opens as
it opens GPT-2 itself, or GPT-Neo for a model with a local first layer (model/hf_export.py for
the config and weights, data/hf_tokenizer.py for the tokenizer and the ids generation stops at).
Every file goes through the one atomic writer; a folder that already holds files is refused, so
an export never overwrites anything."""

import json
from collections.abc import Sequence
from pathlib import Path

from data.hf_tokenizer import boundary_token, end_ids, hf_tokenizer_files
from model.hf_export import generation_config_json, hf_config_json, hf_state_dict
from runs.loading import load_run
from runs.output_path import check_output_path
from storage.atomic import write_atomic


class ExportFolderError(ValueError):
    """The export's folder `dest` cannot be made (`why`: the system's reason); the run folder is
    untouched. train.py words it as --export-hf."""

    def __init__(self, dest: Path, why: str):
        super().__init__(
            f"cannot make {dest} for the export ({why}); give a folder you can write to"
        )
        self.dest, self.why = dest, why


def export_hf(run_folder: str | Path, dest: str | Path, caches: Sequence[Path] = ()) -> list[str]:
    """Write the run in `run_folder` to the new folder `dest` as a Hugging Face GPT-2 or GPT-Neo;
    return the names written. ValueError (one line) for a model or tokenizer with neither form,
    or a `dest` that is not an empty or missing folder or is an input (runs.output_path), or is
    in one of `caches`, the data caches; then nothing is written."""
    from safetensors.torch import save

    dest = Path(dest)
    check_output_path(dest, run_folder, caches=caches)  # not onto the run's files, its corpus
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ValueError(
            f"{dest} already exists and is not an empty folder; give a new folder for the export"
        )
    run = load_run(run_folder)
    config = run.model.config
    # Everything is built before the first write: a refusal leaves nothing behind.
    files = hf_tokenizer_files(run.tokenizer, config.block_size)
    bos, eos = boundary_token(run.tokenizer)[1], end_ids(run.tokenizer)
    files["config.json"] = json.dumps(hf_config_json(config, bos, eos), indent=2)
    files["generation_config.json"] = json.dumps(generation_config_json(bos, eos), indent=2)
    weights = save(hf_state_dict(config, run.model.state_dict()), metadata={"format": "pt"})
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a read-only disk, a folder not ours: the export's folder, not the run's
        raise ExportFolderError(dest, e.strerror or str(e)) from None
    write_atomic(dest / "model.safetensors", weights)
    for name, text in files.items():
        write_atomic(dest / name, text)
    return ["model.safetensors", *files]

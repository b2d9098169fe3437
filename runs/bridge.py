"""TransformerLens's own model of a run, in one call: the run exported as a GPT-2 folder
(runs.export.export_hf, what train.py --export-hf writes) into a temporary folder, and
TransformerLens 4's TransformerBridge booted on it, offline (a local folder needs no hub). Its
weight views (W_U, W_E, W_Q, ...), weight processing and every cache method are TransformerLens's
own, so its demos run on a run folder with only the loading line changed:

    from runs.bridge import to_transformer_lens
    model = to_transformer_lens("out/default")       # a TransformerBridge
    tokens = model.to_tokens("The dog barked because", prepend_bos=False)  # our ids, as they are
    logits, cache = model.run_with_cache(tokens)
    parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)

TransformerLens is not one of the project's requirements (requirements-test.txt installs it):
it is imported here only when the call is made, and its absence is a one-line error that says
what to install.
"""

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from runs.export import export_hf

OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
INSTALL = "pip install transformer-lens (the version requirements-test.txt pins)"


@contextmanager
def _offline():
    """The hub's libraries told to stay offline for the block, the environment restored after."""
    saved = {key: os.environ.get(key) for key in OFFLINE}
    os.environ.update(dict.fromkeys(OFFLINE, "1"))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def to_transformer_lens(run_folder: str | Path, device: str = "cpu", compatibility: bool = False):
    """TransformerLens's TransformerBridge of the run in `run_folder` (see the module docstring),
    on `device`; with `compatibility`, its enable_compatibility_mode() (the LayerNorms folded and
    the weights centred, as TransformerLens's demos load GPT-2). ValueError (one line) for a run
    with no GPT-2 form (export_hf's); ModuleNotFoundError saying what to install where
    TransformerLens is missing."""
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        raise ModuleNotFoundError(f"to_transformer_lens needs TransformerLens: {INSTALL}") from None
    with tempfile.TemporaryDirectory(prefix="tinygpt-lens-") as tmp:
        folder = Path(tmp) / "export"
        export_hf(run_folder, folder)
        with _offline():
            model = TransformerBridge.boot_transformers(str(folder), device=device)
    if compatibility:
        model.enable_compatibility_mode(disable_warnings=True)
    return model.eval()

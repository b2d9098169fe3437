import sys
from pathlib import Path

# The packages (model/, data/, ...) are imported from the repository root, as the scripts do.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest
import torch

# Test models are tiny: one thread is as fast, and several pytest or torchrun processes on a small
# machine would otherwise fight over the cores.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A small deterministic text and a shared data cache, so data is prepared once."""
    d = tmp_path_factory.mktemp("corpus")
    words = "the cat sat on a mat while one dog ran to the old red barn and it barked".split()
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(9)) + "." for i in range(400)]
    (d / "text.txt").write_text("\n".join(lines) + "\n")
    return d

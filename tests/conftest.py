import sys
from pathlib import Path

# The packages (model/, data/, ...) are imported from the repository root, as the scripts do.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch

# Test models are tiny: one thread is as fast, and several pytest or torchrun processes on a small
# machine would otherwise fight over the cores.
torch.set_num_threads(1)

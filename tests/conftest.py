import sys
from pathlib import Path

# The packages (model/, data/, ...) are imported from the repository root, as the scripts do.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

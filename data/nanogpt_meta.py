"""nanoGPT's character vocabulary, meta.pkl ({"vocab_size", "itos", "stoi"}), read as a pickle
that may hold only plain dicts, lists, tuples, strings and numbers: unpickling never looks up a
class or function (find_class refuses every one), so a file that needs one is refused and
nothing in it runs."""

import io
import pickle
from pathlib import Path

from data.tokenizer import CharTokenizer


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"it needs {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it refers to outside objects")


def read_plain_pickle(path):
    """The object in a pickle file of plain data only; ValueError (one line) otherwise."""
    try:
        return _PlainUnpickler(io.BytesIO(Path(path).read_bytes())).load()
    except OSError as e:
        raise ValueError(f"cannot read {path} ({e.strerror or e})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as e:
        raise ValueError(
            f"{path} is not a plain-data pickle ({e}); only dicts, lists, strings and numbers "
            "are read, and nothing in the file ran"
        ) from None


def nanogpt_char_tokenizer(path) -> CharTokenizer:
    """The character tokenizer of nanoGPT's meta.pkl at `path`."""
    meta = read_plain_pickle(path)
    try:
        itos = meta["itos"]
        chars = [itos[i] for i in range(len(itos))]
    except (KeyError, TypeError):
        raise ValueError(
            f"{path} is not nanoGPT's meta.pkl: it needs itos, id -> character for every id"
        ) from None
    if not all(isinstance(c, str) and len(c) == 1 for c in chars) or sorted(set(chars)) != chars:
        raise ValueError(
            f"{path}: itos must map the ids 0.. to single characters in sorted order, as "
            "nanoGPT's prepare.py writes it"
        )
    return CharTokenizer(chars)

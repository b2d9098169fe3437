"""A file of your own clean/corrupt prompt pairs, for activation patching and the circuit
(`generate.py --probe --patch --circuit --pairs FILE`): JSONL, one object per line,

    {"clean": "The owl sat in the tree because it", "corrupt": "The cat sat in the tree because it",
     "answer": " hooted", "other": " purred"}

`clean` and `corrupt` are the two prompts (the same number of tokens under the model's
tokenizer: analysis/user_pairs.py checks that), `answer` the continuation the clean prompt
should get and `other` the one the corrupt prompt should: the metric is the logit difference
logit(answer's first token) - logit(other's first token) at each prompt's last token. Blank
lines are skipped; other keys are refused (a misspelt key would silently mean nothing).
"""

import json
from pathlib import Path
from typing import NamedTuple

from checks import shown
from storage.json_read import parse_json

KEYS = ("clean", "corrupt", "answer", "other")


class TextPair(NamedTuple):
    clean: str
    corrupt: str
    answer: str
    other: str
    line: int  # its line in the file, for errors that name it


def read_prompt_pairs(path) -> list[TextPair]:
    """The pairs of the JSONL file at `path`. ValueError naming the file (and the line) for a
    line that is not such an object, a file with none, or one that cannot be opened (missing,
    a folder, no permission)."""
    if Path(path).is_dir():
        raise ValueError(f"{path} is a folder; give a JSONL file of pairs")
    pairs = []
    try:
        f = open(path, encoding="utf-8-sig")  # a byte-order mark is read past
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}; give a JSONL file") from None
    with f:
        try:
            for lineno, line in enumerate(f, start=1):
                if line.strip():
                    pairs.append(TextPair(*_fields(line), lineno))
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8 JSONL") from None
        except ValueError as e:
            raise ValueError(f"{path}, line {lineno}: {e}") from None
    if not pairs:
        raise ValueError(
            f"{path} holds no pairs; write one JSON object a line with "
            + ", ".join(f'"{k}"' for k in KEYS)
        )
    return pairs


def _fields(line: str) -> tuple[str, ...]:
    try:
        obj = parse_json(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg}); write one JSON object a line") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object; write one object a line")
    missing = [k for k in KEYS if k not in obj]
    extra = sorted(set(obj) - set(KEYS))
    if missing or extra:
        said = [f"missing {', '.join(missing)}"] if missing else []
        said += [f"unknown {', '.join(shown(k)[1:-1] for k in extra[:5])}"] if extra else []
        raise ValueError(f"{'; '.join(said)}: a pair has exactly the keys {', '.join(KEYS)}")
    for k in KEYS:
        if not isinstance(obj[k], str) or not obj[k]:
            raise ValueError(f'"{k}" must be a non-empty string, got {shown(obj[k])}')
    if obj["clean"] == obj["corrupt"]:
        raise ValueError('"clean" and "corrupt" are the same text; a pair must differ somewhere')
    return tuple(obj[k] for k in KEYS)

"""A labelled pronoun example (Example), its checks, and the JSONL file of examples: the probe's
input, either the generator's (data/pronouns/generator.py) or a file a user writes.

One object per line, character offsets with end exclusive:
    {"text": str, "pronoun": [start, end], "antecedent": [start, end],
     "distractors": [[start, end], ...]}
and, optionally, "decided_by": what tells the antecedent apart (DECIDED_BY): "agreement" (no
distractor can take the pronoun: the king / the kettle), "role" (all can, and the syntax decides:
the subject of the clause the pronoun continues) or "meaning" (what the words say decides). The
probe reports its heads on each kind apart. Also optional, "twin": the example's choice twin,
the same sentence with another candidate the answer (data/pronouns/twin_field.py).
"""

import json
import re
from dataclasses import dataclass, replace

from checks import did_you_mean, shown
from data.pronouns.twin_field import Twin, parse_twin
from storage.atomic import write_atomic
from storage.json_read import parse_json

DECIDED_BY = ("agreement", "role", "meaning")
REQUIRED_KEYS = ("text", "pronoun", "antecedent", "distractors")
OPTIONAL_KEYS = ("decided_by", "twin")  # a key a line may leave out; any other key is refused


@dataclass(frozen=True)
class Example:
    """One labelled pronoun. Spans are (start, end) character offsets into text, end exclusive;
    antecedent and distractors span the bare noun ("dog", not "the dog"). Lists are stored as
    tuples so that examples compare equal after a JSONL round trip."""

    text: str
    pronoun: tuple[int, int]
    antecedent: tuple[int, int]
    distractors: tuple[tuple[int, int], ...]
    decided_by: str | None = None  # one of DECIDED_BY, or None: not said
    twin: Twin | None = None  # its choice twin (data/pronouns/twin_field.py), or None

    def __post_init__(self):
        object.__setattr__(self, "pronoun", tuple(self.pronoun))
        object.__setattr__(self, "antecedent", tuple(self.antecedent))
        object.__setattr__(self, "distractors", tuple(tuple(d) for d in self.distractors))


# A word is a run of letters, digits and apostrophes ("it", "it's"); as in analysis.words, a
# query word only needs no letter or digit right beside it ("it" is a word in "it's", not in "hit").
_WORD = re.compile(r"(?:[^\W_]|['’])+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def validate_example(example: Example) -> None:
    """Raise ValueError saying what is wrong with an example's spans (read_jsonl uses it): each
    span inside the text, none overlapping, the pronoun exactly one word, and every candidate
    ending before the pronoun starts. The pronoun's word need not be in PRONOUNS (the probe's
    report says when it is not)."""
    text = example.text
    if not isinstance(text, str) or not text:
        raise ValueError('"text" must be a non-empty string')
    if not example.distractors:
        raise ValueError('"distractors" needs at least one [start, end] span')
    named = [("pronoun", example.pronoun), ("antecedent", example.antecedent)]
    named += [(f"distractors[{i}]", span) for i, span in enumerate(example.distractors)]
    _check_spans(text, named)
    if example.decided_by is not None and example.decided_by not in DECIDED_BY:
        raise ValueError(
            f'"decided_by" is {example.decided_by!r}; use one of '
            f"{', '.join(DECIDED_BY)}, or leave the key out"
        )
    _check_words(text, named)


def _check_spans(text, named):
    """ValueError unless each (name, span) of `named` is a [start, end] pair inside the text and
    none overlaps another."""
    for name, span in named:
        if len(span) != 2 or not all(type(x) is int for x in span):
            raise ValueError(f'"{name}" must be a [start, end] pair of integers, got {list(span)}')
        if not 0 <= span[0] < span[1] <= len(text):
            raise ValueError(
                f'"{name}" span {list(span)} is empty or outside the text (length {len(text)}); '
                "use character offsets with 0 <= start < end <= len(text)"
            )
    ordered = sorted(named, key=lambda item: item[1])
    for (name_a, a), (name_b, b) in zip(ordered, ordered[1:]):
        if b[0] < a[1]:
            raise ValueError(
                f'"{name_a}" {list(a)} and "{name_b}" {list(b)} overlap; make the spans disjoint'
            )


def _check_words(text, named):
    """ValueError unless the pronoun (named[0]) is one whole word, each candidate whole words,
    and every candidate ends before the pronoun starts."""
    start, end = named[0][1]
    beside = text[start - 1 : start] + text[end : end + 1]
    if not _WORD.fullmatch(text[start:end]) or _LETTER_OR_DIGIT.search(beside):
        raise ValueError(
            f'"pronoun" {[start, end]} covers {text[start:end]!r}, which is not one '
            'whole word of the text; point it at exactly one word, such as "it"'
        )
    for name, (s, e) in named[1:]:
        if not _whole(text, s, e):
            raise ValueError(
                f'"{name}" {[s, e]} covers {text[s:e]!r}, which is not whole words of the '
                'text; point it at the noun from its first letter to its last, such as "dog"'
            )
    for name, span in named[1:]:
        if span[1] > start:
            raise ValueError(
                f'"{name}" {list(span)} comes after the pronoun {[start, end]}; a causal model at '
                "the pronoun cannot see it, so candidates must end before the pronoun starts"
            )


def _whole(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] begins and ends with a letter or digit and has none right beside
    it: whole words ("dog", "old dog"), not "og" of "dog" nor " dog"."""
    inside = text[start] + text[end - 1]
    beside = text[start - 1 : start] + text[end : end + 1]
    return (
        bool(_LETTER_OR_DIGIT.fullmatch(inside[0]))
        and bool(_LETTER_OR_DIGIT.fullmatch(inside[1]))
        and not _LETTER_OR_DIGIT.search(beside)
    )


def write_jsonl(examples: list[Example], path) -> None:
    """Write examples to `path` atomically (storage.atomic), one JSON object per line (format in
    the module docstring)."""
    lines = (
        json.dumps(
            {
                "text": ex.text,
                "pronoun": list(ex.pronoun),
                "antecedent": list(ex.antecedent),
                "distractors": [list(d) for d in ex.distractors],
                **({"decided_by": ex.decided_by} if ex.decided_by else {}),
                **({"twin": ex.twin.record()} if ex.twin else {}),
            }
        )
        + "\n"
        for ex in examples
    )
    write_atomic(path, "".join(lines))


def _parse_line(line: str) -> Example:
    try:
        record = parse_json(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg}); write one JSON object per line") from None
    keys = REQUIRED_KEYS
    if not isinstance(record, dict):
        what = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(
            type(record), "a number"
        )
        raise ValueError(
            f"the line is {what}, not a JSON object; write one object per line "
            f"with the keys {', '.join(keys)}"
        )
    unknown = [k for k in record if k not in REQUIRED_KEYS + OPTIONAL_KEYS]
    if unknown:
        hint = did_you_mean(f'"{unknown[0]}"', [f'"{k}"' for k in REQUIRED_KEYS + OPTIONAL_KEYS])
        hint = f"{hint} " if hint else ""
        raise ValueError(
            f'unknown key "{shown(unknown[0])[1:-1]}"; {hint}a line has the keys '
            f"{', '.join(keys)}"
            f" and, if it says them, {', '.join(OPTIONAL_KEYS)}"
        )
    missing = [k for k in keys if k not in record]
    if missing:
        raise ValueError(f'missing key "{missing[0]}"; each line needs {", ".join(keys)}')
    spans = [record["pronoun"], record["antecedent"]]
    if isinstance(record["distractors"], list):
        spans += record["distractors"]
    if not isinstance(record["distractors"], list) or not all(isinstance(s, list) for s in spans):
        raise ValueError("spans must be [start, end] lists and distractors a list of them")
    example = Example(record["text"], spans[0], spans[1], spans[2:], record.get("decided_by"))
    validate_example(example)
    if "twin" in record:
        twin = parse_twin(record["twin"], example.text, example.pronoun)
        example = replace(example, twin=twin)
        _check_twin_answer(example)
    return example


def _check_twin_answer(example: Example) -> None:
    """ValueError unless the twin's antecedent is whole words of its text and names another of
    the example's candidates (a distractor's words): the twin flips the answer to it."""
    twin = example.twin
    s, e = twin.antecedent
    if not _whole(twin.text, s, e):
        raise ValueError(
            f'"twin.antecedent" {[s, e]} covers {twin.text[s:e]!r}, which is not whole words of '
            'twin.text; point it at the noun of a candidate, such as "dog"'
        )
    others = [example.text[a:b].lower() for a, b in example.distractors]
    if twin.text[s:e].lower() not in others:
        raise ValueError(
            f'"twin.antecedent" {[s, e]} covers {twin.text[s:e]!r}, which is none of the '
            f"other candidates ({', '.join(map(repr, others))}); a twin makes one of them the "
            "answer"
        )


def read_examples(path, named="", check=None) -> list[Example]:
    """read_jsonl for a file a user named (`named`: how, e.g. "train.probe_file "): ValueError in
    one line for a file that cannot be read (a folder, missing, no permission) or holds no
    examples."""
    try:
        labelled = read_jsonl(path, check)
    except OSError as e:
        raise ValueError(f"{named or 'cannot read '}{path}: {e.strerror or e}") from None
    if not labelled:
        raise ValueError(f"{named}{path} holds no examples; write one JSON object per line")
    return labelled


def read_jsonl(path, check=None) -> list[Example]:
    """Read and validate examples; blank lines are skipped. A bad line raises ValueError naming
    the file and line number (text that is not UTF-8: naming the file); a missing file raises
    FileNotFoundError. `check(example)`, when given, is one more check of each line's example
    (what a reader of the file needs besides the format): its ValueError names the line too."""
    out = []
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (Windows editors) is read past
        try:
            for lineno, line in enumerate(f, start=1):  # noqa: B007 - the except below names it
                if line.strip():
                    out.append(_parse_line(line))
                    if check is not None:
                        check(out[-1])
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8 JSONL") from None
        except ValueError as e:
            raise ValueError(f"{path}, line {lineno}: {e}") from None
    return out

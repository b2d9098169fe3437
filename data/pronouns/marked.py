"""The probe's JSONL from sentences marked by words, not character offsets: one sentence a line,
the antecedent in [square brackets], every other candidate in {braces}, the pronoun in
<angle brackets>, and after a tab, optionally, the reason (agreement, role or meaning):

    The [dog] chased the {cat} because <it> was hungry.	role

becomes the line `--probe FILE` reads (data/pronouns/jsonl.py), its offsets counted here:

    python -m data.pronouns.marked sentences.txt sentences.jsonl
    python generate.py --ckpt out/my --probe sentences.jsonl
"""

import re
import sys
from pathlib import Path

from data.pronouns.jsonl import DECIDED_BY, Example, validate_example, write_jsonl

MARKS = {"[": ("]", "antecedent"), "{": ("}", "candidate"), "<": (">", "pronoun")}
_MARK = re.compile(r"\[([^\[\]{}<>]+)\]|\{([^\[\]{}<>]+)\}|<([^\[\]{}<>]+)>")


def marked_example(line: str) -> Example:
    """One marked sentence (see the module docstring) as an Example; ValueError naming what is
    missing or extra."""
    sentence, _, reason = line.rstrip("\n").partition("\t")
    reason = reason.strip() or None
    if reason is not None and reason not in DECIDED_BY:
        raise ValueError(f"reason {reason!r} is not one of {', '.join(DECIDED_BY)}")
    text, spans = "", {"antecedent": [], "candidate": [], "pronoun": []}
    at = 0
    for m in _MARK.finditer(sentence):
        text += sentence[at : m.start()]
        word = next(g for g in m.groups() if g is not None)
        kind = MARKS[m.group(0)[0]][1]
        spans[kind].append((len(text), len(text) + len(word)))
        text += word
        at = m.end()
    text += sentence[at:]
    if any(c in text for c in "[]{}<>"):
        raise ValueError(f"an unclosed or nested mark in {sentence!r}")
    for kind in ("antecedent", "pronoun"):
        if len(spans[kind]) != 1:
            raise ValueError(f"mark exactly one {kind} ({kind_mark(kind)}), got {len(spans[kind])}")
    if not spans["candidate"]:
        raise ValueError("mark at least one other candidate in {braces}")
    example = Example(text, spans["pronoun"][0], spans["antecedent"][0], spans["candidate"], reason)
    validate_example(example)
    return example


def kind_mark(kind: str) -> str:
    opening = next(o for o, (_, k) in MARKS.items() if k == kind)
    return f"{opening}...{MARKS[opening][0]}"


def write_marked(source, path) -> int:
    """The probe's JSONL at `path` from the marked sentences of the UTF-8 file `source` (blank
    lines skipped); the number of examples. ValueError names the line that is wrong."""
    examples = []
    lines = Path(source).read_text(encoding="utf-8-sig").splitlines()
    for n, line in enumerate(lines, start=1):
        if line.strip():
            try:
                examples.append(marked_example(line))
            except ValueError as e:
                raise ValueError(f"{source}, line {n}: {e}") from None
    if not examples:
        raise ValueError(f"{source}: no marked sentence; write one a line, as --help shows")
    write_jsonl(examples, path)
    return len(examples)


def main(argv=None) -> int:
    """python -m data.pronouns.marked IN.txt OUT.jsonl: one line said, or a one-line error."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if len(argv) != 2:
        print(
            "error: give IN.txt OUT.jsonl (python -m data.pronouns.marked --help)", file=sys.stderr
        )
        return 2
    try:
        n = write_marked(*argv)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {argv[1]}: {n} examples; read it with generate.py --probe {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

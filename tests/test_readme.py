"""The README's line-by-line math table must point at the lines that really hold that code."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_math_table_line_numbers_match_attention_py():
    source = (ROOT / "model" / "attention.py").read_text().splitlines()
    rows = re.findall(r"^\| .*? \| lines? (\d+)(?:–\d+)?: `([^`]+)`", (ROOT / "README.md").read_text(), re.M)
    assert len(rows) >= 5
    for number, code in rows:
        assert code in source[int(number) - 1], f"README says line {number} holds {code!r}"


def test_jsonl_example_in_readme_is_valid_and_points_at_its_words(tmp_path):
    from data.pronouns import read_jsonl

    blocks = re.findall(r"```json\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert blocks
    path = tmp_path / "example.jsonl"
    path.write_text(blocks[0] + "\n")
    (example,) = read_jsonl(path)
    word = lambda span: example.text[span[0] : span[1]]
    assert word(example.pronoun) == "it" and word(example.antecedent) == "dog"
    assert [word(d) for d in example.distractors] == ["bell"]

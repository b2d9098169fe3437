"""The line-by-line math table (docs/math.md) must quote code that really is in the function it
names: tied by content, so an added import or comment never breaks it."""

import ast
import re

from tests.helpers import ROOT


def function_sources(path):
    """{"name": source, "Class.name": source} for every function in a file."""
    text = path.read_text()
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = ast.get_source_segment(text, item)
        elif isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, ast.get_source_segment(text, node))
    return out


def test_math_table_quotes_code_that_is_in_the_function_it_names():
    functions = function_sources(ROOT / "model" / "attention.py")
    rows = re.findall(r"^\| .*? \| `([\w.]+)`: `([^`]+)`", (ROOT / "docs" / "math.md").read_text(), re.M)
    assert len(rows) >= 6
    for name, code in rows:
        assert name in functions, f"docs/math.md names {name}, which model/attention.py does not define"
        assert code in functions[name], f"docs/math.md says {name} holds {code!r}"


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

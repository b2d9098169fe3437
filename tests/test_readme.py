"""The documentation's claims about the code: the line-by-line math table (docs/math.md) quotes code
that really is in the function it names, tied by content so an added import or comment never
breaks it; the README's JSONL example is a valid probe example; every relative link in README.md
and docs/*.md reaches a file of the checkout and, with an anchor, a heading of that file."""

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


def heading_anchors(text):
    """The anchors a Markdown renderer gives the headings of `text`, as GitHub makes them:
    lower case, punctuation dropped, spaces as hyphens, a repeated one numbered."""
    anchors, seen = set(), {}
    for title in re.findall(r"^#+ (.+)$", without_code_blocks(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def without_code_blocks(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def test_every_relative_link_in_the_docs_reaches_a_file_and_heading():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(pages) > 1
    broken = []
    for page in pages:
        text = without_code_blocks(page.read_text())
        for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto: — not a file of the checkout
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            name = f"{page.relative_to(ROOT)}: {target}"
            if not file.is_relative_to(ROOT.resolve()) or not file.is_file():
                broken.append(f"{name} (no such file)")
            elif anchor and anchor not in heading_anchors(file.read_text()):
                broken.append(f"{name} (no such heading)")
    assert broken == []

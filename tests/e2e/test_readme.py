"""The documentation's claims about the code: the line-by-line math table (docs/math.md) quotes code
that really is in the function it names, tied by content so an added import or comment never
breaks it; the JSONL example of docs/reference/probe-files.md is a valid probe example; the "From
Python" block of docs/reference/python.md runs as printed from another folder; every relative
link in README.md and the pages under docs/ reaches a file of the checkout and, with an anchor, a
heading of that file; the README stays a short door, and docs/README.md lists every page."""

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT, make_run


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
    rows = re.findall(
        r"^\| .*? \| `([\w.]+)`: `([^`]+)`", (ROOT / "docs" / "math.md").read_text(), re.M
    )
    assert len(rows) >= 6
    for name, code in rows:
        assert name in functions, (
            f"docs/math.md names {name}, which model/attention.py does not define"
        )
        assert code in functions[name], f"docs/math.md says {name} holds {code!r}"


PROBE_FILES = ROOT / "docs" / "reference" / "probe-files.md"
PYTHON_API = ROOT / "docs" / "reference" / "python.md"


def test_jsonl_example_of_the_probe_files_is_valid_and_points_at_its_words(tmp_path):
    from data.pronouns import read_jsonl

    blocks = re.findall(r"```json\n(.*?)\n```", PROBE_FILES.read_text(), re.S)
    assert blocks
    path = tmp_path / "example.jsonl"
    path.write_text(blocks[0] + "\n")
    (example,) = read_jsonl(path)

    def word(span):
        return example.text[span[0] : span[1]]

    assert word(example.pronoun) == "it" and word(example.antecedent) == "dog"
    assert [word(d) for d in example.distractors] == ["bell"]


PLACEHOLDER = "/path/to/your/checkout"  # the From Python block's two paths start with it


def from_python_block():
    """The first ```python block under the Python API's "From Python" heading."""
    page = PYTHON_API.read_text()
    section = page.split("\n## From Python", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)\n```", section, re.S).group(1)


@pytest.mark.slow
def test_the_from_python_block_runs_as_printed_from_another_folder(tmp_path):
    code = from_python_block()
    _, tokenizer = make_run(tmp_path / "run", "bpe", 64)  # a small run folder, untrained
    paths = ((f"{PLACEHOLDER}/out/default", tmp_path / "run"), (PLACEHOLDER, ROOT))
    for placeholder, real in paths:
        assert code.count(placeholder) == 1, placeholder  # the two paths, and nothing else
        code = code.replace(placeholder, str(real))
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    (notebook / "snippet.py").write_text(code)
    text = "".join(
        f"the cat {i} sat on the mat because it was tired, and the dog ran.\n" for i in range(400)
    )
    (notebook / "my.txt").write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # the block's choice
    try:
        r = subprocess.run(
            [sys.executable, "snippet.py"],
            cwd=notebook,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        said = dict(
            line.split(" ", 1)
            for line in r.stdout.splitlines()
            if line.split(" ", 1)[0]
            in ("threads", "sample", "attention", "probe", "knockout", "trained")
        )
        assert said["threads"] == "1"  # a 32-wide model: one thread, as generate.py
        assert ast.literal_eval(said["sample"]).startswith("The owl")
        T = len(tokenizer.encode("The animal went out on a hunt because it was hungry."))
        assert said["attention"] == str((1, 2, T, T))  # layer 0: (1, heads, T, T)
        assert set(ast.literal_eval(said["probe"])) == {"layer", "head", "dev", "test"}
        float(said["knockout"])
        # The folder the user named, in the user's folder; the corpus prepared in the
        # checkout's cache, none made here.
        assert said["trained"] == "my_run" and (notebook / "my_run" / "ckpt.pt").is_file()
        assert not (notebook / ".cache").exists() and not (notebook / "out").exists()
    finally:
        prepared = [
            p
            for p in (ROOT / ".cache" / "prepared").glob("*/meta.json")
            if json.loads(p.read_text()).get("source_sha256") == sha
        ]
        for meta in prepared:  # this test's own corpus, left in the checkout's cache
            shutil.rmtree(meta.parent)
    assert prepared


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


def doc_pages():
    """README.md and every Markdown page under docs/, its folders included."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_in_the_docs_reaches_a_file_and_heading():
    pages = doc_pages()
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


def relative_links(page):
    """The files `page` links to (anchors and web addresses left out), resolved."""
    text = without_code_blocks(page.read_text())
    targets = re.findall(r"\[[^\]]*\]\(([^)\s#]+)[^)\s]*\)", text)
    return {(page.parent / t).resolve() for t in targets if not re.match(r"[a-z]+:", t)}


def test_the_readme_is_a_door_to_the_docs():
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 250  # results and records live in docs/
    assert (ROOT / "docs" / "README.md").resolve() in relative_links(readme)


def test_the_docs_map_links_every_page():
    index = ROOT / "docs" / "README.md"
    pages = {p.resolve() for p in doc_pages()} - {index.resolve(), (ROOT / "README.md").resolve()}
    unlisted = sorted(str(p.relative_to(ROOT.resolve())) for p in pages - relative_links(index))
    assert unlisted == [], f"docs/README.md does not list {unlisted}"

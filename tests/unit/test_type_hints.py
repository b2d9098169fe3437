"""docs/reference/style.md's type-hint rule on the modules it names as following it: every public
function and public method has a hint on each parameter (self and cls aside) and on its
return value. The list is read from the document, so a module named there stays true to it."""

import ast
import re

import pytest

from tests.helpers import ROOT

STYLE = ROOT / "docs" / "reference" / "style.md"


def named_modules():
    """The modules docs/reference/style.md says follow the rule: the paths in its "These modules
    follow it" paragraph."""
    text = STYLE.read_text(encoding="utf-8")
    paragraph = text.split("These modules follow it", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"`([\w/]+\.py)`", paragraph.split(":", 1)[1])


def unhinted(source):
    """["name(param, ...)" or "name -> ?"] for each public function or method of a public class
    that lacks a hint."""
    missing = []

    def check(fn, owner):
        if fn.name.startswith("_"):
            return
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
        if owner:
            params = [p for p in params if p.arg not in ("self", "cls")]
        bare = [p.arg for p in params if p.annotation is None]
        name = f"{owner}{fn.name}"
        if bare:
            missing.append(f"{name}({', '.join(bare)})")
        if fn.returns is None:
            missing.append(f"{name} -> ?")

    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.parse(source).body:
        if isinstance(node, functions):
            check(node, "")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, functions):
                    check(item, f"{node.name}.")
    return missing


def test_the_list_names_modules_of_the_tree():
    modules = named_modules()
    assert len(modules) >= 10 and len(set(modules)) == len(modules), modules
    assert [m for m in modules if not (ROOT / m).is_file()] == []


@pytest.mark.parametrize("module", named_modules())
def test_every_public_function_of_a_named_module_has_hints(module):
    assert unhinted((ROOT / module).read_text(encoding="utf-8")) == []


def test_the_check_finds_a_missing_hint():
    source = (
        "def f(a: int, b) -> int: ...\n"
        "def g(a: int): ...\n"
        "def _private(a): ...\n"
        "class C:\n"
        "    def m(self, x: int, **kw) -> None: ...\n"
        "    def ok(self) -> None: ...\n"
    )
    assert unhinted(source) == ["f(b)", "g -> ?", "C.m(kw)"]

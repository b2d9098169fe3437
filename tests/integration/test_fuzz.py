"""The fuzzer of issue 60: property-based tests (Hypothesis) that generate what a user or an
accident hands the project (configs and overrides, probe and pairs JSONL, probe.json contents:
deep, huge, non-finite, duplicate and mistyped values) and hold that each gives a result or a
one-line error (ValueError or TypeError, a short message; exit code 2 at the CLI), never a
traceback and never a write outside the run's folder. Each runs a few examples in the suite
(the "suite" profile, tests/conftest.py); `make fuzz` runs the "fuzz" profile, many more. The
cases they found, fixed since, are kept as @example."""

import copy
import json

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from configs.load import flatten, load_config
from configs.schema import config_dict
from data.prompt_pairs import read_prompt_pairs
from data.pronouns.jsonl import read_jsonl
from tests.helpers import make_run, run_main

MAX_MESSAGE = 1_000  # what a one-line error may run to
KEYS = sorted(flatten(config_dict(load_config(None)))) + ["data.mix"]
SECTIONS = sorted({key.split(".")[0] for key in KEYS})


def deep(n: int) -> str:
    return "[" * n + "]" * n


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.just(10**400),  # past any float
    st.floats(),  # NaN and the infinities among them
    st.text(max_size=20),
    st.integers(1_000, 5_000).map(lambda n: "x" * n),  # huge
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def outcome(call):
    """Run `call`: (its result, None), or (None, the message) for a ValueError or TypeError. Any
    other exception (a traceback at the CLI) propagates and fails the test."""
    try:
        return call(), None
    except (ValueError, TypeError) as e:
        return None, str(e)


def is_one_line(message) -> bool:
    """Whether a refusal's message is one short line (None: there was no refusal)."""
    return message is None or (
        bool(message) and "\n" not in message and len(message) <= MAX_MESSAGE
    )


def refused_in_one_line(call):
    """Run `call`: its result, or None for a ValueError or TypeError of one short line. Any other
    exception (a traceback at the CLI) fails the test."""
    result, message = outcome(call)
    assert is_one_line(message), (message or "")[:2_000]
    return result


# --- configs and overrides --------------------------------------------------------------------


def config_text(draw) -> str:
    """A config file's text: YAML of generated sections and keys, or a hostile text."""
    section = st.dictionaries(
        st.sampled_from(KEYS).map(lambda k: k.split(".")[-1]) | st.text(max_size=8),
        VALUES,
        max_size=4,
    )
    tree = draw(
        st.dictionaries(
            st.sampled_from(SECTIONS) | st.text(max_size=8), section | VALUES, max_size=4
        )
    )
    hostile = st.sampled_from(
        [
            "data:\n  mix: " + deep(500) + "\n",  # past the stack, unless refused first
            "train:\n  lr: 1\n  lr: 2\n",  # a key written twice
            "a: &a [1, 1]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n",  # aliases
            "- a\n",
            "train: 5\n",
        ]
    )
    return draw(st.just(yaml.safe_dump(tree, allow_unicode=True)) | hostile)


@given(data=st.data())
@example(data=None)  # stands for each hostile text, drawn below too
def test_any_config_file_loads_or_is_one_line(tmp_path_factory, data):
    texts = ["data:\n  mix: " + deep(500) + "\n"] if data is None else [config_text(data.draw)]
    folder = tmp_path_factory.mktemp("config")
    for text in texts:
        (folder / "c.yaml").write_text(text)
        refused_in_one_line(lambda: load_config(folder / "c.yaml"))
    assert sorted(p.name for p in folder.iterdir()) == ["c.yaml"]  # nothing written


OVERRIDE_VALUES = st.one_of(
    st.text(max_size=30),
    VALUES.map(lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**9).strip()),
    st.integers(1, 6_000).map(deep),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-0", "0x10", "null", "[]", "{}", "~"]),
)


@given(key=st.sampled_from(KEYS) | st.text(max_size=12), value=OVERRIDE_VALUES)
@example(key="data.mix", value=deep(5_000))  # issue 60, 2: a RecursionError, 10,000 characters
@example(key="data.mix", value="\x1b")  # found: YAML's error ran to two lines
@example(key="model.n_layer", value="x" * 5_000)  # found: the error quoted all 5,000
@example(key="data.pronouns.meaning", value="1e308")  # with role=1e308 below: an infinite sum
def test_any_override_loads_or_is_one_line(key, value):
    overrides = [f"{key}={value}"]
    if key == "data.pronouns.meaning":
        overrides.append("data.pronouns.role=1e308")
    config, message = outcome(lambda: load_config(None, overrides))
    assert is_one_line(message), (message or "")[:2_000]
    assert (config is None) != (message is None)  # loaded, or refused: never both, never neither
    if config is not None and key.startswith("data.pronouns."):
        _, message = outcome(lambda: config.data.pronouns.story_mix)
        assert is_one_line(message), (message or "")[:2_000]


# --- probe and pairs JSONL ----------------------------------------------------------------------

LINES = st.one_of(
    VALUES.map(lambda v: json.dumps(v)),
    st.dictionaries(
        st.sampled_from(["text", "pronoun", "antecedent", "distractors", "decided_by", "twin"])
        | st.sampled_from(["clean", "corrupt", "answer", "other"]),
        VALUES,
        max_size=6,
    ).map(json.dumps),
    st.integers(1, 200_000).map(deep),
    st.text(max_size=40),
    st.just('{"text": "a", "text": "b"}'),  # a key written twice
)


@given(lines=st.lists(LINES, min_size=1, max_size=4))
@example(lines=[deep(100_000)])
@example(lines=['{"\\n": null}'])  # found: a key with a newline made a two-line error
def test_any_probe_or_pairs_file_reads_or_is_one_line(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("jsonl") / "file.jsonl"
    path.write_text("\n".join(lines) + "\n")
    for read in (read_jsonl, read_prompt_pairs):
        items, message = outcome(lambda read=read: read(path))
        assert is_one_line(message), (message or "")[:2_000]
        assert items is not None or message is not None  # read, or refused with a message


# --- probe.json ---------------------------------------------------------------------------------

SENTENCE = "the dog ran to the barn and it barked."
PROBE_KEYS = ["best_head", "layer", "head", "heads", "counts", "dev", "p_value", "checkpoint"]
PROBE_KEYS += ["format_version", "examples", "measured", "causal", "patching", "circuit"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """An untrained run folder with its probe result saved in probe.json, and that result."""
    folder = tmp_path_factory.mktemp("fuzz") / "run"
    make_run(folder, "bpe", 64)
    r = run_main("generate.py", "--ckpt", folder, "--probe", "--no-causal", "--permutations", "5")
    assert r.returncode == 0, r.stderr
    return folder, json.loads((folder / "probe.json").read_text())


def changed(saved, path, value):
    """`saved` with the value at `path` (keys and indices, followed while they exist) replaced
    by `value`, or added under the path's next key."""
    saved = copy.deepcopy(saved)
    node = saved
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, dict) and isinstance(step, str) and (last or step not in node):
            node[step] = value
            return saved
        if isinstance(node, list) and isinstance(step, int) and step < len(node):
            if last or not isinstance(node[step], (dict, list)):
                node[step] = value
                return saved
            node = node[step]
        elif isinstance(node, dict) and step in node:
            node = node[step]
    return value if not path else saved


@given(
    path=st.lists(st.sampled_from(PROBE_KEYS) | st.integers(0, 3), max_size=4),
    value=VALUES,
    raw=st.sampled_from([None, deep(100_000), '{"step": 1, "step": 2}', "NaN", ""]),
)
@example(path=["best_head", "layer"], value=5, raw=None)  # issue 60, 5: was an exit-2 error
@example(path=["heads"], value=[], raw=None)
@example(path=["counts"], value={}, raw=None)  # an exit-2 error: no split to count
@example(path=["baselines", "first"], value={}, raw=None)  # the same
@example(path=["logit_lens", "mean_probability"], value=[], raw=None)  # was a traceback
def test_any_probe_json_is_used_or_measured_again(measured, path, value, raw):  # 60: 5
    folder, saved = measured
    text = raw if raw is not None else json.dumps(changed(saved, path, value))
    (folder / "probe.json").write_text(text)
    outside = sorted(p.name for p in folder.parent.iterdir())
    page = ["--attention", SENTENCE, "--html", folder / "page.html", "--no-probe"]
    r = run_main("generate.py", "--ckpt", folder, *page)
    # The run's own saved result: read past or measured again (promises.md), never an error.
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in folder.parent.iterdir()) == outside

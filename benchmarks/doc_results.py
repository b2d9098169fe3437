"""The default model's numbers in README.md and every page under docs/, from one named run, and
the one command that refreshes them all:

    make doc-results                                  # RUN=out/default: the commands, then the docs
    python -m benchmarks.doc_results out/default      # the same
    python -m benchmarks.doc_results --docs-only      # rewrite the docs from the saved JSON

RESULTS (docs/results/default.json) holds what COMMANDS printed on one run folder (its name, the
checkpoint's sha256, the date and the machine beside them): `generate.py --probe --patch
--circuit --json`, `--probe natural --json`, `--probe --query next --json`, the headline
sentence's `--attention` table and docs/guide/generate.md's `--test-prompt --json`. The docs
quote it through two kinds of marks, which this script rewrites and tests/unit/test_doc_results.py
holds to the JSON:

- a block: a line `<!-- results:NAME -->`, the generated text, a line `<!-- /results -->`; the
  text is BLOCKS[NAME] of the results, the project's own reports (reports/probe_report.py,
  reports/text_reports.py) of the saved result;
- a number in prose: `<!--n:NAME-->TEXT<!--/n-->`, TEXT being NUMBERS[NAME] of the results.

What the prose says about the numbers (which is larger, which head) is not generated: after a
refresh, `git diff` shows what changed, and the words around a changed number are read again.
"""

import hashlib
import json
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.doc_tables import answer_table, choice_table, circuit_kinds_table
from reports.circuit_report import format_circuit
from reports.lens_report import format_lens
from reports.probe_report import format_report
from reports.prompt_report import format_test_prompt
from reports.text_reports import format_causal, format_patching
from storage.atomic import write_atomic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results" / "default.json"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SENTENCE = "The animal in the jungle went out on a hunt because it was hungry."
TEST_PROMPT = ("The owl sat in the old tree because it", " hooted")  # docs/guide/generate.md's
COMMANDS = {  # name: generate.py's flags after --ckpt RUN
    "probe": ["--probe", "--patch", "--circuit", "--json"],
    "natural": ["--probe", "natural", "--json"],
    "query_next": ["--probe", "--query", "next", "--json"],
    "attention": ["--attention", SENTENCE],
    "test_prompt": ["--test-prompt", TEST_PROMPT[0], "--answer", TEST_PROMPT[1], "--json"],
}
BLOCK_RE = re.compile(r"(<!-- results:([\w-]+) -->\n)(.*?)(<!-- /results -->)", re.S)
NUMBER_RE = re.compile(r"(<!--n:([\w.:-]+)-->)(.*?)(<!--/n-->)", re.S)


def collect(run: str) -> dict:
    """Run COMMANDS on the run folder `run` (generate.py in a process of its own, as a user runs
    it) and return the results: each command line, its output (JSON parsed), and the run named."""
    outputs, commands = {}, {}
    for name, flags in COMMANDS.items():
        argv = ["generate.py", "--ckpt", run, *flags]
        commands[name] = "python " + " ".join(_quoted(a) for a in argv)
        print(f"running {commands[name]}", file=sys.stderr)
        done = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{commands[name]} failed: {done.stderr.strip()}")
        outputs[name] = json.loads(done.stdout) if "--json" in flags else done.stdout.rstrip()
    ckpt = (ROOT / run / "ckpt.pt").read_bytes()
    return {
        "run": run,
        "ckpt_sha256": hashlib.sha256(ckpt).hexdigest(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": _machine(),
        "made_by": f"python -m benchmarks.doc_results {run}",
        "commands": commands,
        "outputs": outputs,
    }


def _quoted(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def _machine() -> str:
    """The CPU's name and the kernels torch picks on it (its capability: AVX512, AVX2, ...),
    which decide the last digits of the numbers."""
    import torch

    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {torch.backends.cpu.get_cpu_capability()}"


def lines_from(text: str, start: str) -> list[str]:
    """The lines of `text` from the first that starts with `start` up to the next blank one."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    rest = lines[first:]
    return rest[: rest.index("")] if "" in rest else rest


def probe_excerpt(result: dict) -> str:
    """The probe report's grid, its baselines and best head, and its table by kind."""
    report = format_report(result)
    grid = lines_from(report, next(s for s in report.splitlines() if "by layer (rows)" in s))
    said = lines_from(report, "Baselines (")[:2]
    kinds = lines_from(report, "By reason, what tells")
    return "\n".join([*grid, "", *said, "", *kinds])


def test_prompt_excerpt(result: dict) -> str:
    """The --test-prompt report with only the first answer token's three top tokens."""
    lines = format_test_prompt(result).splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("Top 3th token"))
    return "\n".join([*lines[:cut], "...", lines[-1]])


def _fenced(text: str, command: str | None = None) -> str:
    return "```\n" + (f"$ {command}\n" if command else "") + text + "\n```"


BLOCKS = {  # name: the text between a block's marks, from the results
    "attention": lambda r: _fenced(
        r["outputs"]["attention"], f'python generate.py --attention "{SENTENCE}"'
    ),
    "probe": lambda r: _fenced(probe_excerpt(r["outputs"]["probe"])),
    "natural": lambda r: _fenced(probe_excerpt(r["outputs"]["natural"])),
    "query-next": lambda r: _fenced(probe_excerpt(r["outputs"]["query_next"])),
    "answer-table": answer_table,
    "causal": lambda r: _fenced(format_causal(r["outputs"]["probe"]["causal"])),
    "lens": lambda r: _fenced(format_lens(r["outputs"]["probe"]["logit_lens"])),
    "patching": lambda r: _fenced(format_patching(r["outputs"]["probe"]["patching"])),
    "circuit": lambda r: _fenced(
        "\n".join(lines_from(format_circuit(r["outputs"]["probe"]["circuit"]), "all "))
    ),
    "circuit-kinds": circuit_kinds_table,
    "choice-table": choice_table,
    "test-prompt": lambda r: _fenced(
        test_prompt_excerpt(r["outputs"]["test_prompt"]),
        f'python generate.py --test-prompt "{TEST_PROMPT[0]}" --answer "{TEST_PROMPT[1]}"',
    ),
}

FORMATS = {  # a number mark's `:FORMAT`: how its value is written
    "pct": lambda x: f"{x:.1%}",
    "pct0": lambda x: f"{x:.0%}",
    "pctn": lambda x: f"{100 * x:.1f}",  # a share as a percentage without its sign
    "f1": lambda x: f"{x:.1f}",
    "f2": lambda x: f"{x:.2f}",
    "f3": lambda x: f"{x:.3f}",
    "s2": lambda x: f"{x:+.2f}".replace("-", "\u2212"),  # signed, a typographic minus
    "abs2": lambda x: f"{abs(x):.2f}",
    "int": lambda x: str(int(x)),
    "head": lambda x: f"L{x['layer']} H{x['head']}",
    "text": str,
}


def number(results: dict, name: str) -> str:
    """The text of the number mark `name`, `OUTPUT.KEY.KEY...:FORMAT` (a list's items by index;
    also `run`, `date`, `machine`, `ckpt_sha256`):
    `probe.best_head.test:pct` is the probe's best head's test cand@1 as "91.0%". KeyError for a
    path the results lack, ValueError for an unknown format."""
    path, _, fmt = name.partition(":")
    if fmt not in FORMATS:
        raise ValueError(f"number mark {name!r}: its format is one of {', '.join(FORMATS)}")
    value = {**results, **results["outputs"]}  # run, date, machine, ckpt_sha256; each output
    try:
        for part in path.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
    except (KeyError, IndexError, TypeError, ValueError):
        raise KeyError(f"number mark {name!r}: the results have no value at {path}") from None
    return FORMATS[fmt](value)


def rewritten(text: str, results: dict) -> str:
    """`text` with every block and number mark rewritten from `results`."""
    text = BLOCK_RE.sub(lambda m: m[1] + BLOCKS[m[2]](results) + "\n" + m[4], text)
    return NUMBER_RE.sub(lambda m: m[1] + number(results, m[2]) + m[4], text)


def marks(text: str) -> list[tuple[str, str]]:
    """(name, text between) of every block and number mark in `text`, blocks first."""
    blocks = [(m[2], m[3].removesuffix("\n")) for m in BLOCK_RE.finditer(text)]
    return blocks + [(m[2], m[3]) for m in NUMBER_RE.finditer(text)]


def load_results(path: Path = RESULTS) -> dict:
    return json.loads(path.read_text())


def rewrite_docs(results: dict, docs: list[Path] = DOCS) -> list[Path]:
    """Rewrite the marks of each file of `docs` from `results`; return the files that changed."""
    changed = []
    for doc in docs:
        text = doc.read_text()
        try:
            new = rewritten(text, results)
        except KeyError as e:  # a mark the new results cannot fill: say which, change nothing
            raise ValueError(f"{doc.name}: {e.args[0]}; fix or remove the mark") from None
        if new != text:
            write_atomic(doc, new)
            changed.append(doc)
    return changed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--docs-only"]:
        results = load_results()
    elif len(argv) == 1 and not argv[0].startswith("-"):
        if not (ROOT / argv[0] / "ckpt.pt").is_file():
            print(f"error: no checkpoint at {ROOT / argv[0] / 'ckpt.pt'}", file=sys.stderr)
            return 2
        results = collect(argv[0])
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(RESULTS, json.dumps(results, indent=1) + "\n")
        print(f"written: {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    else:
        print("usage: python -m benchmarks.doc_results RUN_FOLDER | --docs-only", file=sys.stderr)
        return 2
    try:
        changed = rewrite_docs(results)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for doc in changed:
        print(f"rewritten: {doc.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""generate.py --probe, --json and --html, driven through main() on a real run folder."""

import json
import os
import re
import stat

import pytest

from analysis.conform import mismatches
from analysis.results import SavedStudy, Study
from data.pronouns import examples, natural, write_jsonl
from reports.formatting import signed
from tests.helpers import ROOT, make_run, run_generate, run_script


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    make_run(folder, "bpe", 64)
    return folder


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    """A user's JSONL file: 40 of the built-in dev examples."""
    path = tmp_path_factory.mktemp("mine") / "mine.jsonl"
    write_jsonl(examples("dev")[:40], path)
    return path


def test_probe_json_has_the_documented_keys(run_folder):
    code, out, _ = run_generate("--ckpt", run_folder, "--probe", "--json", "--permutations", "20")
    assert code == 0
    result = json.loads(out)
    assert {"layer", "head", "dev", "test"} <= result["best_head"].keys()
    assert {"random", "first", "nearest", "position"} <= result["baselines"].keys()
    assert 0 < result["p_value"] <= 1 and len(result["heads"]) == 2 * 2
    assert result["selection"] == "dev" and result["counts"]["test"]["examples"] == len(
        examples("test")
    )
    assert_causal_shape(result["causal"], result["best_head"], len(examples("test")))
    lens = result["logit_lens"]
    assert lens["points"] == ["embedding", "block 0", "block 1"] and lens["n"] == len(
        examples("test")
    )
    assert all(len(lens[key]) == 3 for key in ("mean_probability", "median_rank", "top1_share"))
    assert mismatches(result, Study) == []  # and every other key is of its type
    # What --html shows is saved with it.
    saved = json.loads((run_folder / "probe.json").read_text())
    assert saved["causal"] == result["causal"] and mismatches(saved, SavedStudy) == []


def test_probe_natural_scores_the_head_chosen_on_dev_on_the_natural_set(run_folder, tmp_path):
    code, out, _ = run_generate(
        "--ckpt", run_folder, "--probe", "natural", "--json", "--permutations", "20"
    )
    assert code == 0
    result = json.loads(out)
    code, builtin, _ = run_generate(
        "--ckpt", run_folder, "--probe", "--json", "--permutations", "20"
    )
    # The same keys as the built-in sets', and the natural sentences split by the lexicon
    assert set(result) == set(json.loads(builtin)) | {"by_lexicon"}
    assert sum(row["examples"] for row in result["by_lexicon"].values()) == len(natural())
    assert result["test_set"] == "natural" and json.loads(builtin)["test_set"] == "test"
    assert result["selection"] == "dev" and result["counts"]["dev"]["examples"] == len(
        examples("dev")
    )
    assert result["counts"]["test"]["examples"] == len(natural()) >= 200
    assert result["best_head"]["dev"] == json.loads(builtin)["best_head"]["dev"]  # chosen on dev
    assert mismatches(result, Study) == []
    assert_causal_shape(result["causal"], result["best_head"], len(natural()))
    code, report, _ = run_generate(
        "--ckpt", run_folder, "--probe", "natural", "--permutations", "20", "--no-causal"
    )
    assert code == 0 and "natural cand@1 by layer" in report
    assert f"natural: {len(natural())} of {len(natural())} used" in report
    # a file the user names "natural" in another folder is still theirs
    write_jsonl(examples("dev")[:5], tmp_path / "natural")
    code, out, _ = run_generate(
        "--ckpt",
        run_folder,
        "--probe",
        str(tmp_path / "natural"),
        "--json",
        "--permutations",
        "5",
        "--no-causal",
    )
    assert code == 0 and json.loads(out)["counts"]["all"]["examples"] == 5


def assert_causal_shape(causal, best, examples_given, L=2, H=2):
    """causal_tests' result with the probe's best head (analysis.causal), for an L x H model."""

    def ci(d, names):
        return all(d[f"{n}_ci"][0] <= d[n] <= d[f"{n}_ci"][1] for n in names)

    together = ("antecedent", "distractor")
    assert set(causal) == {
        "all_heads",
        "layers",
        "heads",
        "best_head",
        "n",
        "skipped",
        "clean_loss",
        "seed",
        "resamples",
    }
    assert causal["n"] > 0 and causal["n"] + causal["skipped"] == examples_given
    assert set(causal["all_heads"]) == {*together, *(f"{n}_ci" for n in together)}
    assert len(causal["layers"]) == L and all(ci(d, together) for d in causal["layers"])
    assert [len(row) for row in causal["heads"]] == [H] * L
    each = (*together, "ablation")
    assert all(
        set(c) == {*each, *(f"{n}_ci" for n in each)} and ci(c, each)
        for row in causal["heads"]
        for c in row
    )
    l, h = best["layer"], best["head"]
    assert causal["best_head"] == {"layer": l, "head": h, **causal["heads"][l][h]}


def test_no_causal_leaves_the_causal_tests_out_of_json_and_report(run_folder):
    code, out, _ = run_generate(
        "--ckpt", run_folder, "--probe", "--json", "--permutations", "5", "--no-causal"
    )
    assert code == 0 and "causal" not in json.loads(out)
    code, out, _ = run_generate(
        "--ckpt", run_folder, "--probe", "--permutations", "5", "--no-causal"
    )
    assert code == 0 and "Pronoun probe" in out and "Causal test" not in out


def test_the_report_prints_the_causal_table_under_the_probes(run_folder, user_file):
    path = user_file
    code, out, _ = run_generate("--ckpt", run_folder, "--probe", path, "--permutations", "5")
    assert code == 0 and out.index("Best head L") < out.index("Causal test at the pronoun")
    code, js, _ = run_generate(
        "--ckpt", run_folder, "--probe", path, "--permutations", "5", "--json"
    )
    result = json.loads(js)
    causal, best = result["causal"], result["best_head"]
    assert_causal_shape(causal, best, 40)  # on the user's one set of examples
    assert f"(mean over {causal['n']} examples, {causal['skipped']} skipped;" in out
    row = next(line for line in out.splitlines() if line.startswith("L1 ") and " | " in line)
    assert row.split(" | ")[0].split()[1:] == [signed(c["antecedent"]) for c in causal["heads"][1]]

    def with_ci(deltas, name):  # written out, not analysis.causal's: what the report must show
        lo, hi = deltas[f"{name}_ci"]
        return f"{signed(deltas[name])} [{signed(lo)}, {signed(hi)}]"

    every, alone = causal["all_heads"], causal["best_head"]
    assert (
        f"  all layers    antecedent {with_ci(every, 'antecedent')}   control "
        f"{with_ci(every, 'distractor')}"
    ) in out
    assert (
        f"  L{best['layer']} H{best['head']} alone   antecedent {with_ci(alone, 'antecedent')}   "
        f"control {with_ci(alone, 'distractor')}\n{'':<15} ablation   {with_ci(alone, 'ablation')}"
    ) in out


def test_probe_report_on_a_user_file_shows_the_numbers_of_its_json(run_folder, user_file):
    code, out, _ = run_generate("--ckpt", run_folder, "--probe", user_file, "--permutations", "20")
    assert code == 0
    code, js, _ = run_generate(
        "--ckpt", run_folder, "--probe", user_file, "--permutations", "20", "--json"
    )
    result = json.loads(js)
    assert code == 0 and result["selection"] == "same data"  # one set: chosen and scored on it
    lines = out.splitlines()
    at = lines.index("cand@1 by layer (rows) and head (columns):")
    assert lines[at + 1].split() == ["H0", "H1"]
    table = {line.split()[0]: line.split()[1:] for line in lines[at + 2 : at + 4]}
    assert table == {
        f"L{layer}": [f"{h['all']:.1%}" for h in result["heads"] if h["layer"] == layer]
        for layer in (0, 1)
    }
    best, b = result["best_head"], result["baselines"]
    assert max(map(len, lines)) <= 80  # piped: prose wrapped to 80 columns
    prose = " ".join(out.split())  # the wrapped lines read as one
    assert (
        f"Best head L{best['layer']} H{best['head']}: {best['all']:.1%} cand@1; permutation "
        f"test p = {result['p_value']:.4f} (20 shuffles"
    ) in prose
    assert (
        f"Baselines (cand@1): random {b['random']['all']:.1%}, first {b['first']['all']:.1%}, "
        f"nearest before the pronoun {b['nearest']['all']:.1%}"
    ) in prose
    assert "chosen and scored on the same data" in prose and "Clark et al." not in prose


def test_a_one_example_file_has_one_set_and_no_p_value_in_json_and_text(run_folder, tmp_path):
    write_jsonl(examples("dev")[:1], tmp_path / "one.jsonl")
    argv = ("--ckpt", run_folder, "--probe", tmp_path / "one.jsonl", "--permutations", "20")
    code, js, _ = run_generate(*argv, "--json")
    result = json.loads(js)
    assert (
        code == 0 and result["p_value"] is None and result["p_value_reason"] == "too few examples"
    )
    assert set(result["counts"]) == {"all"} and set(result["best_head"]) == {"layer", "head", "all"}
    assert all("dev" not in h and "test" not in h for h in result["heads"])
    code, text, _ = run_generate(*argv)
    assert code == 0 and "p = " not in text and "too small for a p-value" in " ".join(text.split())


def test_attention_html_writes_a_self_contained_page(run_folder, tmp_path):
    page = tmp_path / "maps.html"
    code, out, _ = run_generate(
        "--ckpt",
        run_folder,
        "--attention",
        "The king smiled because he ruled the land.",
        "--html",
        page,
    )
    assert code == 0 and f"wrote {page}" in out
    html = page.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "<script src" not in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--json"], ("--json", "--probe")),
        (["--html", "x.html"], ("--html", "--attention")),
        (["--probe", "--attention"], ("--probe", "--attention", "separate runs")),
        (["--probe", "--permutations", "0"], ("--permutations", "positive integer")),
        (["--patch"], ("--patch", "--probe")),
        (["--permutations", "5"], ("--permutations", "--probe", "--html")),
        (["--attention", "--permutations", "5"], ("--permutations", "--probe")),
        (["--no-causal"], ("--no-causal", "--probe", "--html")),
        (["--probe", "missing.jsonl"], ("missing.jsonl",)),
        (["--query", "last"], ("--query", "--attention", "--probe")),
        (["--probe", "--query", "dog"], ("--query dog", "pronoun, next, last")),
        (
            ["--attention", "the dog ran so it hid.", "--word", "dog", "--query", "hid"],
            ("--word", "--query"),
        ),
        (["--attention", "the dog saw it", "--query", "next"], ("'it'",)),
        (["--attention", "--html", ""], ("--html is empty",)),
        (["--attention", "--html", " "], ("--html is empty",)),
        (
            ["--attention", "the dog saw it and it ran.", "--occurrence", "3"],
            ("occurs 2 times", "from 1 to 2", "--occurrence"),
        ),
        (["--attention", "--occurrence", "0"], ("--occurrence", "positive integer")),
        (["--occurrence", "2"], ("--occurrence", "--attention")),
        (["--prompt", "x", "--summary"], ("--summary", "--probe")),
        (["--probe", "--json", "--summary"], ("--summary", "--json")),
        (["--probe", "mine.jsonl", "--summary"], ("--summary", "report.txt")),
        (["--probe", "--query", "next", "--summary"], ("--summary", "report.txt")),
        (["--attention", "--summary"], ("--summary", "--html FILE")),
    ],
)
def test_probe_and_page_errors_are_one_line(run_folder, argv, names):
    code, _, err = run_generate("--ckpt", run_folder, *argv)
    assert code == 2 and err.count("\n") == 1 and all(name in err for name in names), err


def test_occurrence_reads_the_maps_at_the_nth_occurrence_of_the_query_word(run_folder):
    sentence = "the dog saw it and it ran."
    code, first, _ = run_generate("--ckpt", run_folder, "--attention", sentence)
    assert code == 0
    code, second, _ = run_generate(
        "--ckpt", run_folder, "--attention", sentence, "--occurrence", "2"
    )
    assert code == 0
    # The maps' header names the query's token: the second "it" comes later, with more words.
    at = [int(re.search(r"#(\d+)\)", out)[1]) for out in (first, second)]
    assert at[1] > at[0] and "and" in second.split("\n")[2] and "and" not in first.split("\n")[2]
    code, word, _ = run_generate(
        "--ckpt", run_folder, "--attention", sentence, "--word", "it", "--occurrence", "2"
    )
    assert code == 0 and word == second


def test_a_pronoun_final_line_with_query_next_names_the_file_and_line(run_folder, tmp_path):
    path = tmp_path / "mine.jsonl"
    write_jsonl(examples("dev")[:3], path)
    with path.open("a") as f:
        f.write(
            '{"text": "The dog sat by the cat and then saw it", "pronoun": [36, 38], '
            '"antecedent": [4, 7], "distractors": [[19, 22]]}\n'
        )
    code, out, err = run_generate("--ckpt", run_folder, "--probe", path, "--query", "next")
    assert code == 2 and err.count("\n") == 1 and not out, err
    assert f"{path}, line 4: nothing follows 'it'" in err, err


def test_probe_natural_says_it_reads_the_built_in_set_beside_a_file_named_natural(
    run_folder, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write_jsonl(examples("dev")[:3], tmp_path / "natural")
    args = ("--ckpt", run_folder, "--probe", "natural", "--json", "--permutations", "1")
    code, out, err = run_generate(*args, "--no-causal")
    assert code == 0 and "built-in natural set, not the file ./natural" in err, err
    assert json.loads(out)["counts"]["test"]["examples"] == len(natural())
    code, out, err = run_generate(*args[:3], "./natural", *args[4:], "--no-causal")
    assert code == 0 and "built-in" not in err
    assert [c["examples"] for c in json.loads(out)["counts"].values()] == [3]


def test_query_last_reads_the_probe_and_the_maps_at_the_last_token(run_folder, user_file):
    code, out, _ = run_generate(
        "--ckpt",
        run_folder,
        "--probe",
        user_file,
        "--query",
        "last",
        "--permutations",
        "5",
        "--no-causal",
        "--json",
    )
    last = json.loads(out)
    code, out, _ = run_generate(
        "--ckpt", run_folder, "--probe", user_file, "--permutations", "5", "--no-causal", "--json"
    )
    pronoun = json.loads(out)
    assert (last["query"], pronoun["query"]) == ("last", "pronoun")
    assert [h["all"] for h in last["heads"]] != [h["all"] for h in pronoun["heads"]]  # one set
    sentence = "The king smiled because he ruled the land."
    code, out, _ = run_generate("--ckpt", run_folder, "--attention", sentence, "--query", "last")
    assert code == 0 and 'attention of "."' in out
    code, out, _ = run_generate("--ckpt", run_folder, "--attention", sentence, "--query", "ruled")
    assert code == 0 and 'attention of "ruled"' in out


MINE = {
    "text": "The king saw the bell because it rang.",
    "pronoun": [30, 32],
    "antecedent": [17, 21],
    "distractors": [[4, 8]],
}


def test_a_query_word_that_is_not_a_pronoun_is_noted_in_report_and_json(run_folder, tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(MINE) + "\n" + json.dumps({**MINE, "pronoun": [22, 29]}) + "\n")
    code, out, _ = run_generate("--ckpt", run_folder, "--probe", path, "--permutations", "5")
    [note] = [line for line in out.splitlines() if "('because')" in line]  # the word quoted
    assert code == 0 and note.startswith("Note: ") and "1 of 2" in note  # how many of how many
    code, out, _ = run_generate(
        "--ckpt", run_folder, "--probe", path, "--permutations", "5", "--json"
    )
    words = json.loads(out)["query_words"]
    assert code == 0 and words == {"examples": 2, "not_pronouns": 1, "words": ["because"]}


def test_a_probe_file_that_is_a_folder_or_empty_is_a_one_line_error(run_folder, tmp_path):
    code, _, err = run_generate("--ckpt", run_folder, "--probe", tmp_path)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert str(tmp_path) in err and "directory" in err
    (tmp_path / "empty.jsonl").write_text("\n")
    code, _, err = run_generate("--ckpt", run_folder, "--probe", tmp_path / "empty.jsonl")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert str(tmp_path / "empty.jsonl") in err and "no examples" in err and "JSON object" in err


def html_error(run_folder, target):
    code, out, err = run_generate("--ckpt", run_folder, "--attention", "--html", target)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and str(target) in err
    assert "wrote" not in out
    return err


def test_html_to_a_folder_is_a_one_line_error_and_the_folder_is_untouched(run_folder, tmp_path):
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "keep.txt").write_text("mine")
    assert "is a folder" in html_error(run_folder, tmp_path / "page")
    assert [p.name for p in tmp_path.iterdir()] == ["page"]  # no temp file left behind
    assert [p.name for p in (tmp_path / "page").iterdir()] == ["keep.txt"]


def test_html_to_a_fifo_is_a_one_line_error_and_the_fifo_stays_a_fifo(run_folder, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "regular file" in html_error(run_folder, fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_html_to_a_read_only_place_is_a_one_line_error(run_folder):
    # chmod cannot make a folder read-only for root; /proc refuses new files even to root.
    assert "could not write" in html_error(run_folder, "/proc/tinygpt-maps.html")


def test_html_under_a_file_is_a_one_line_error(run_folder, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert f"{tmp_path / 'notes.txt'} is a file" in html_error(
        run_folder, tmp_path / "notes.txt" / "maps.html"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def short_run_folder(tmp_path_factory):
    """block_size 16: most built-in sentences are longer than that up to their pronoun."""
    folder = tmp_path_factory.mktemp("short_run")
    make_run(folder, "bpe", 16)
    return folder


def test_the_probe_reads_long_examples_in_the_window_instead_of_skipping_them(short_run_folder):
    code, out, _ = run_generate(
        "--ckpt", short_run_folder, "--probe", "--json", "--permutations", "5"
    )
    assert code == 0
    result = json.loads(out)
    for split in ("dev", "test"):
        c = result["counts"][split]
        assert c["used"] == c["examples"] == len(examples(split))
        assert 0 < c["antecedent_unseen"] <= c["windowed"] <= c["used"]
    code, out, _ = run_generate("--ckpt", short_run_folder, "--probe", "--permutations", "5")
    windowed = result["counts"]["test"]["windowed"]
    assert f"  {windowed} read in the model's window, the last 16 tokens up to the pronoun" in out


def test_attention_and_its_page_take_sentences_longer_than_block_size(short_run_folder, tmp_path):
    page = tmp_path / "maps.html"
    code, out, _ = run_generate("--ckpt", short_run_folder, "--attention", "--html", page)
    assert code == 0 and out.count("note: the model sees 16 tokens up to") >= 3
    assert "outside its window" in page.read_text()  # the page says so too


def probe_line(step, ante):
    """A metrics.jsonl probe line as training logs it, for a 2 x 2 model whose L0 H1 is best."""
    return {
        "step": step,
        "probe_best": ante,
        "probe_best_head": [0, 1],
        "probe_heads": [[0.5, ante], [0.4, 0.45]],
        "probe_baselines": {"random": 0.45, "first": 0.46, "nearest": 0.47},
    }


def test_the_page_shows_the_saved_causal_tests_and_the_runs_probe_curve(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "bpe", 64)
    lines = [
        json.dumps(r)
        for r in (
            probe_line(200, 0.6),
            {"step": 200, "val_loss": 2.5},
            probe_line(400, 0.9),
            {"step": 400, "val_loss": 1.5},
        )
    ]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 600, "probe_he\n')  # torn
    assert run_generate("--ckpt", folder, "--probe", "--permutations", "5")[0] == 0
    saved = json.loads((folder / "probe.json").read_text())
    causal = saved["causal"]
    # 5 shuffles cannot show a head beating chance (p >= 1/6); said so here, so that the page
    # outlines the head the causal tests studied (a head at chance gets no outline).
    (folder / "probe.json").write_text(json.dumps({**saved, "p_value": 0.001}))
    page = tmp_path / "maps.html"
    code, _, err = run_generate("--ckpt", folder, "--attention", "--html", page)
    assert code == 0 and err == ""  # the saved result is reused: the probe does not run again
    html = page.read_text()
    # The curve early, right after the table of where the pronoun looks.
    at = [html.index(f'class="{part}"') for part in ("heads", "training", "causal")]
    assert at == sorted(at) and at[-1] < html.index('id="sentences"')
    b = causal["best_head"]
    assert '<td class="best" style="background:rgba(' in html
    assert re.search(
        f"L{b['layer']} H{b['head']} alone</th><td [^>]*>"
        + re.escape(f'{signed(b["antecedent"])}<span class="ci"> ['),
        html,
    )
    assert html.count('class="head"') == 3 and html.count('class="head best"') == 1
    assert html.count('class="baseline"') == 3 and html.count('class="loss"') == 1


def test_a_page_without_probe_lines_or_causal_tests_has_no_curve_and_no_causal_table(tmp_path):
    folder, page = tmp_path / "run", tmp_path / "maps.html"
    make_run(folder, "bpe", 64)  # no metrics.jsonl, as for a Hugging Face model
    assert run_generate("--ckpt", folder, "--attention", "--html", page, "--no-probe")[0] == 0
    html = page.read_text()
    assert 'class="training"' not in html and "<svg" not in html and 'class="causal"' not in html
    assert run_generate("--ckpt", folder, "--probe", "--permutations", "5", "--no-causal")[0] == 0
    code, out, err = run_generate("--ckpt", folder, "--attention", "--html", page)
    assert code == 0 and err == "" and 'class="causal"' not in page.read_text()
    # 5 shuffles cannot put a head above chance (p >= 1/6): none is outlined, and it says why.
    assert "(outlined, the probe's best head: none, no head beats chance here)" in out


@pytest.mark.parametrize("n", [1, 5])
def test_a_set_too_small_for_statistics_prints_point_values_only(run_folder, tmp_path, n):
    path = tmp_path / "few.jsonl"
    write_jsonl(examples("test")[:n], path)
    code, out, err = run_generate("--ckpt", run_folder, "--probe", path, "--permutations", "20")
    assert code == 0, err
    prose = " ".join(out.split())  # the wrapped lines read as one
    assert (
        f"with {n} examples the set is too small for a p-value (at least 20" in prose
        and "p = " not in prose
    )
    assert f"means only: {n} examples are too few for intervals" in prose
    together = out[out.index("heads together") :]
    assert "[" not in together.split("\n\n")[0]  # no interval on any row


@pytest.mark.slow
def test_the_probe_report_fits_80_columns_through_a_real_pipe(run_folder):

    r = run_script("generate.py", "--ckpt", run_folder, "--probe", "--patch", "--permutations", "5")
    assert r.returncode == 0 and max(map(len, r.stdout.splitlines())) <= 80, r.stderr


def test_a_summary_the_run_folder_cannot_keep_prints_the_full_report_and_says_why(
    run_folder, tmp_path
):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in os.listdir(run_folder):
        if name not in ("probe.json", "report.txt"):
            (folder / name).write_bytes((run_folder / name).read_bytes())
    argv = ("--ckpt", folder, "--probe", "natural", "--permutations", "5", "--no-causal")
    code, out, err = run_generate(*argv, "--summary")  # nothing to keep it beside yet
    assert code == 0 and "--probe saves it" in err and "so the full report is printed" in err
    assert out == run_generate(*argv)[1] and not (folder / "report.txt").exists()


def test_the_natural_sets_result_is_kept_beside_the_built_in_one_and_shown_on_the_page(
    run_folder, tmp_path
):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in os.listdir(run_folder):
        if name != "probe.json":
            (folder / name).write_bytes((run_folder / name).read_bytes())
    assert run_generate("--ckpt", folder, "--probe", "natural", "--permutations", "5")[0] == 0
    assert not (folder / "probe.json").exists()  # nothing to keep it beside yet
    assert run_generate("--ckpt", folder, "--probe", "--permutations", "5", "--no-causal")[0] == 0
    assert run_generate("--ckpt", folder, "--probe", "natural", "--permutations", "5")[0] == 0
    saved = json.loads((folder / "probe.json").read_text())
    assert saved["test_set"] == "test" and saved["natural"]["test_set"] == "natural"
    saved["natural"]["p_value"] = 0.001  # a head that beats chance there: outlined
    (folder / "probe.json").write_text(json.dumps(saved))
    page = tmp_path / "maps.html"
    code, _, err = run_generate("--ckpt", folder, "--attention", "--html", page)
    assert code == 0 and err == ""
    html = page.read_text()
    assert html.index('class="facts"') < html.index('class="probe"') < html.index('id="sentences"')
    assert "natural cand@1 by layer and head" in html and "test cand@1 by layer and head" in html
    best = saved["natural"]["best_head"]
    assert '<td class="best" style="background:rgba(33,102,172,' in html
    assert f"{best['test']:.1%}</td>" in html


def test_patch_on_a_char_run_prints_the_report_and_says_why_patching_was_skipped(tmp_path):
    from tests.helpers import run_main

    make_run(tmp_path / "run", "char", 64)
    r = run_main(
        "generate.py",
        "--ckpt",
        tmp_path / "run",
        "--probe",
        "--patch",
        "--no-causal",
        "--permutations",
        "10",
    )
    assert r.returncode == 0, r.stderr
    # The report's first line says where its terms are defined, a page that is there.
    first, _, rest = r.stdout.partition("\n\n")
    assert first == "terms: see docs/reference/glossary.md" and (ROOT / first[11:]).is_file()
    assert rest.startswith("Pronoun probe") and "best head" in r.stdout.lower(), r.stdout
    skipped = r.stdout[r.stdout.index("Activation patching skipped") :]
    assert "char tokenizer" in skipped and "bpe" in skipped, skipped

"""What a command writes, or reports as measured, as a user meets it at generate.py and train.py:
an output path never lands on an input (a run's files, a checkpoint, a config, the run's corpus,
the command's own input), reversed --pairs are said to be reversed rather than given recovered
fractions, and --meta for a model it does not apply to is refused. Each refusal is one line
(exit code 2) and leaves every file as it was. The battery of issue 53 (cases 2, 5, 14);
docs/reference/promises.md says what each case holds the project to."""

import hashlib
import json
import shutil

import pytest

from tests.helpers import error_line, run_main, tiny_config

SENTENCE = "the dog ran to the barn and it barked."  # words of the corpus fixture


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """A 2-step bpe run as train.py leaves it (config.yaml, metrics.jsonl, loss.png, ...), on
    its own copy of the corpus text, made once for this file; tests take a copy (`place`)."""
    from training.loop import train

    root = tmp_path_factory.mktemp("attack_outputs")
    (root / "data").mkdir()
    shutil.copy(corpus / "text.txt", root / "data" / "text.txt")
    config = tiny_config(
        root / "data",
        root / "run",
        "tokenizer.kind=bpe",
        "tokenizer.vocab_size=300",
        "train.max_iters=2",
        "train.warmup_iters=1",
        "train.eval_interval=2",
        "train.probe_interval=0",
        "train.final_full_eval=false",
    )
    train(config)
    return root


@pytest.fixture
def place(trained, tmp_path):
    """A copy of `trained`: tmp_path/run (the run folder; meta.json names the corpus at its own
    path) and tmp_path/data/text.txt (that corpus)."""
    shutil.copytree(trained / "data", tmp_path / "data")
    shutil.copytree(trained / "run", tmp_path / "run", symlinks=True)
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    meta["source"] = str(tmp_path / "data" / "text.txt")
    (tmp_path / "run" / "meta.json").write_text(json.dumps(meta))
    return tmp_path


def snapshot(root):
    """Every file under `root` (links as their target's name) and its sha256."""
    return {
        str(p.relative_to(root)): str(p.readlink())
        if p.is_symlink()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


# Where --html must not go, relative to `place`, and what the refusal says it is.
ON_INPUTS = [
    ("run/ckpt.pt", "checkpoint"),
    ("run/config.yaml", "run folder"),
    ("run/meta.json", "run folder"),
    ("run/metrics.jsonl", "run folder"),
    ("run/tokenizer.bpe", "run folder"),
    ("run/loss.png", "run folder"),
    ("run/.lock", "run folder"),
    ("run/probe.json", "run folder"),  # not there yet: the probe's file all the same
    ("data/text.txt", "trained on"),  # the run's corpus
    ("other.yaml", "config"),
    ("weights.pt", "checkpoint"),
    ("link.html", "checkpoint"),  # a symlink to run/ckpt.pt: written through, so refused
    ("sentences.txt", "reads"),  # this command's own --attention-file
]


@pytest.mark.parametrize("target, what", ON_INPUTS)
def test_html_never_lands_on_an_input(place, target, what):  # 2
    (place / "other.yaml").write_text("train:\n  lr: 0.1\n")
    shutil.copy(place / "run" / "ckpt.pt", place / "weights.pt")
    (place / "link.html").symlink_to(place / "run" / "ckpt.pt")
    (place / "sentences.txt").write_text(SENTENCE + "\n")
    before = snapshot(place)
    r = run_main(
        "generate.py",
        "--ckpt",
        place / "run",
        "--attention-file",
        place / "sentences.txt",
        "--no-probe",
        "--html",
        place / target,
    )
    said = error_line(r)
    assert str(place / target) in said and what in said, said
    assert snapshot(place) == before and "wrote" not in r.stdout


def test_html_may_write_its_own_page_in_the_run_folder_and_rewrite_it(place):
    for _ in range(2):
        r = run_main(
            "generate.py",
            "--ckpt",
            place / "run",
            "--attention",
            SENTENCE,
            "--no-probe",
            "--html",
            f"{place / 'run'}/",
        )
        assert r.returncode == 0 and (place / "run" / "attention.html").is_file(), r.stderr


@pytest.mark.parametrize("name", ["probe.json", "tensorboard"])
def test_export_hf_never_lands_on_a_file_of_the_run_folder(place, name):  # 2
    before = snapshot(place)
    args = [f"out_dir={place / 'run'}", "--export-hf", place / "run" / name]
    said = error_line(run_main("train.py", *args))
    assert str(place / "run" / name) in said and "run folder" in said, said
    assert snapshot(place) == before and not (place / "run" / name).exists()


@pytest.mark.parametrize("where", ["checkout", "run"])
def test_html_and_export_never_land_in_a_data_cache(place, monkeypatch, where):  # issue 60: 1
    # The checkout's .cache (a pronoun corpus there, as the issue wrote over), or the cache the
    # run's config.yaml names (its prepared token files); monkeypatched so nothing real is touched.
    monkeypatch.setattr("configs.paths.PROJECT_ROOT", place / "checkout")
    config = place / "run" / "config.yaml"
    config.write_text(config.read_text().replace("cache_dir:", f"cache_dir: {place}/data/cache #"))
    corpus = place / "checkout" / ".cache" / "corpora" / "pronouns-seed0-68ec561fb29d.txt"
    corpus.parent.mkdir(parents=True)
    corpus.write_text("the corpus\n")
    prepared = next((place / "data" / "cache" / "prepared").iterdir())
    target = corpus if where == "checkout" else prepared / "page.html"
    before = snapshot(place)
    for script, args in (
        ("generate.py", ["--ckpt", place / "run", "--attention", SENTENCE, "--html", target]),
        ("train.py", [f"out_dir={place / 'run'}", "--export-hf", target.parent / "hf"]),
    ):
        said = error_line(run_main(script, *args))
        assert "data cache" in said and str(target.parent) in said, said
    assert snapshot(place) == before


def test_a_run_folder_never_goes_in_a_data_cache(place):  # issue 60: 1, train.py as a writer
    cache = place / "data" / "cache"
    before = snapshot(place)
    args = [f"data.source={place / 'data' / 'text.txt'}", f"data.cache_dir={cache}"]
    said = error_line(run_main("train.py", *args, f"out_dir={cache / 'corpora' / 'run'}"))
    assert "data cache" in said and str(cache) in said, said
    assert snapshot(place) == before and not (cache / "corpora").exists()


def test_html_onto_a_stream_is_one_clear_line(place):  # issue 60: 10
    args = ["--ckpt", place / "run", "--attention", SENTENCE, "--no-probe", "--html"]
    said = error_line(run_main("generate.py", *args, "/dev/stdout"))
    assert "/dev/stdout" in said and "give a file path" in said and "Errno" not in said, said


def test_reversed_pairs_say_so_instead_of_recovered_fractions(place):  # 5
    pair = {"answer": " barked", "other": " ran"}
    clean, corrupt = "the cat sat on the mat and it", "the dog sat on the mat and it"
    said = {}
    for name, a, b in (("one.jsonl", clean, corrupt), ("other.jsonl", corrupt, clean)):
        path = place / name
        path.write_text(json.dumps({"clean": a, "corrupt": b, **pair}) + "\n")
        said[name] = run_main(
            "generate.py", "--ckpt", place / "run", "--patch", "--pairs", path, "--json"
        )
    # One way round the clean prompt favours the answer more than the corrupt one; the other way
    # round, the same pair reversed, it favours it less: that one is refused.
    [ok] = [r for r in said.values() if r.returncode == 0]
    [reversed_] = [(n, r) for n, r in said.items() if r.returncode != 0]
    patching = json.loads(ok.stdout)["patching"]
    assert patching["clean_ld"] > patching["corrupt_ld"]
    line = error_line(reversed_[1])
    assert str(place / reversed_[0]) in line and "swap clean and corrupt" in line, line
    assert reversed_[1].stdout == ""  # no fraction printed


def test_meta_for_a_run_folder_of_ours_is_refused_not_ignored(place):  # 14
    (place / "meta.pkl").write_bytes(b"not read")
    before = snapshot(place)
    r = run_main(
        "generate.py",
        "--ckpt",
        place / "run",
        "--meta",
        place / "meta.pkl",
        "--prompt",
        "the",
        "--max-new-tokens",
        "2",
    )
    said = error_line(r)
    assert "--meta" in said and str(place / "run") in said and r.stdout == "", said
    assert snapshot(place) == before

"""data.mix: its two written forms and their errors, the weighted loader, one tokenizer for the
mix with each source prepared on its own, per-source evaluation, and resume with another mix."""

import json
import math

import numpy as np
import pytest
import torch

from configs.load import load_config
from configs.schema import ConfigError
from data.loader import get_batch, get_mixed_batch
from data.mix import prepare_mix
from data.mix_spec import MixEntry, parse_mix, source_name
from lab.live_probe import probe_examples, probe_interval
from lab.run import train
from tests.helpers import run_main, tiny_config, torchrun_two, write_yaml
from training.console import Console
from training.runtime import Runtime

CPU = Runtime(torch.device("cpu"), torch.float32)


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Two small corpora with disjoint letters (a window's letters say which one it came from)
    and a shared cache."""
    folder = tmp_path_factory.mktemp("mix")
    (folder / "low.txt").write_text("".join(f"abc def {i % 7} ghi\n" for i in range(300)))
    (folder / "up.txt").write_text("".join(f"XYZ UVW {i % 5} RST\n" for i in range(500)))
    (folder / "text.txt").write_text("".join(f"abc XYZ {i % 3}\n" for i in range(300)))
    return folder


def mix_config(texts, out, mix, *overrides):
    return tiny_config(
        texts, out, f"data.mix={mix}", f"data.cache_dir={texts / 'cache'}", *overrides
    )


# --- the two written forms ---------------------------------------------------------------------


def test_the_command_line_form_and_the_yaml_form_give_the_same_mix(tmp_path):
    line = parse_mix("tinyshakespeare:0.8, pronouns:0.2")
    yaml_form = parse_mix(
        [{"source": "tinyshakespeare", "weight": 0.8}, {"source": "pronouns", "weight": 0.2}]
    )
    assert line == yaml_form == [MixEntry("tinyshakespeare", 0.8), MixEntry("pronouns", 0.2)]
    # The weight is after the last colon, so hf: sources keep theirs.
    assert parse_mix("hf:me/set/books.txt:3,pronouns:1") == [
        MixEntry("hf:me/set/books.txt", 3.0),
        MixEntry("pronouns", 1.0),
    ]
    config_file = tmp_path / "c.yaml"
    config_file.write_text(
        "data:\n  mix:\n    - {source: tinyshakespeare, weight: 4}\n"
        "    - {source: pronouns, weight: 1}\n"
    )
    from_yaml = load_config(config_file).data.mix
    from_override = load_config(None, ["data.mix=tinyshakespeare:4,pronouns:1"]).data.mix
    assert (
        from_yaml
        == from_override
        == [{"source": "tinyshakespeare", "weight": 4.0}, {"source": "pronouns", "weight": 1.0}]
    )


def test_source_names_are_short():
    assert [
        source_name(s) for s in ("pronouns", "data/books/moby.txt", "corpora/", "hf:me/set/a/b.txt")
    ] == ["pronouns", "moby", "corpora", "b"]


@pytest.mark.parametrize(
    "mix, says",
    [
        ("tinyshakespeare:0,pronouns:1", "above 0"),
        ("tinyshakespeare:-1,pronouns:1", "above 0"),
        ("tinyshakespeare:nan,pronouns:1", "above 0"),
        ("tinyshakespeare,pronouns:1", "no weight"),
        ("tinyshakespeare:lots,pronouns:1", "no weight"),
        ("a/moby.txt:1,b/moby.txt:1", "both named 'moby'"),
        ("pronouns:1,pronouns:2", "both named 'pronouns'"),
        (
            "[{source: pronouns}]",
            "weight.*'source': 'pronouns'",
        ),  # the key missing, the entry given
    ],
)
def test_a_bad_mix_is_a_one_line_error_before_anything_is_written(tmp_path, mix, says):
    with pytest.raises(ConfigError, match=says) as error:
        load_config(None, [f"data.mix={mix}"])
    assert "\n" not in str(error.value)
    r = run_main(  # train.py's main() in this process: the same line, nothing written
        "train.py",
        f"data.mix={mix}",
        f"out_dir={tmp_path / 'run'}",
        f"data.cache_dir={tmp_path / 'c'}",
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "c").exists()


def test_a_missing_source_is_a_one_line_error_before_anything_is_written(texts, tmp_path):
    r = run_main(
        "train.py",
        f"data.mix={texts / 'low.txt'}:1,{tmp_path / 'gone.txt'}:1",
        f"out_dir={tmp_path / 'run'}",
        f"data.cache_dir={tmp_path / 'c'}",
        "tokenizer.kind=char",
    )
    assert r.returncode == 2 and "gone.txt" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "run").exists()


def test_a_source_the_given_tokenizer_cannot_encode_is_refused_before_anything_is_written(
    texts, tmp_path
):
    from data.tokenizer import train_tokenizer

    lower_only = train_tokenizer("char", (texts / "low.txt").read_text())
    with pytest.raises(ValueError, match="data.mix: .*up.txt") as error:
        prepare_mix(
            [MixEntry(str(texts / "low.txt"), 1), MixEntry(str(texts / "up.txt"), 1)],
            "char",
            cache_dir=tmp_path / "c",
            tokenizer=lower_only,
        )
    assert "\n" not in str(error.value)
    assert not any((tmp_path / "c" / "prepared").glob("*/meta.json")) or all(
        "up.txt" not in p.read_text() for p in (tmp_path / "c" / "prepared").glob("*/meta.json")
    )


# --- the loader ---------------------------------------------------------------------------------


def token_files(tmp_path, sizes):
    """One token file per size, file i holding only ids 100 * i .. 100 * i + 99."""
    files = []
    for i, n in enumerate(sizes):
        path = tmp_path / f"{i}.bin"
        (100 * i + np.arange(n) % 100).astype(np.uint16).tofile(path)
        files.append(path)
    return files


def test_windows_come_from_each_file_in_proportion_to_its_weight_and_never_straddle_two(tmp_path):
    paths = token_files(tmp_path, [5_000, 300, 2_000])
    weights = [0.6, 0.3, 0.1]
    counts, n = np.zeros(3), 0
    for step in range(200):
        x, y = get_mixed_batch(
            list(zip(paths, weights)), "uint16", 16, 8, "cpu", torch.Generator().manual_seed(step)
        )
        windows = torch.cat([x, y[:, -1:]], 1)
        source = windows // 100
        assert (source == source[:, :1]).all()  # every token of a window from one file
        assert (windows % 100 == (windows[:, :1] % 100 + torch.arange(9)) % 100).all()  # contiguous
        counts += np.bincount(source[:, 0].numpy(), minlength=3)
        n += len(x)
    for count, w in zip(counts, weights):
        assert abs(count / n - w) < 4 * math.sqrt(w * (1 - w) / n), (counts / n, weights)


def test_a_mix_of_one_draws_exactly_what_a_single_file_does(tmp_path):
    (path,) = token_files(tmp_path, [1_000])
    a = get_mixed_batch([(path, 1.0)], "uint16", 8, 16, "cpu", torch.Generator().manual_seed(3))
    b = get_batch(path, "uint16", 8, 16, "cpu", torch.Generator().manual_seed(3))
    assert all(torch.equal(u, v) for u, v in zip(a, b))


# --- preparing a mix ----------------------------------------------------------------------------


def test_one_tokenizer_serves_the_mix_and_new_char_weights_prepare_nothing_again(texts, tmp_path):
    cache = tmp_path / "c"
    low, up = str(texts / "low.txt"), str(texts / "up.txt")
    first = prepare_mix([MixEntry(low, 3), MixEntry(up, 1)], "char", cache_dir=cache)
    assert [p.weight for p in first.parts] == [0.75, 0.25]
    assert set(first.tokenizer.decode(list(range(first.tokenizer.vocab_size)))) == set(
        (texts / "low.txt").read_text() + (texts / "up.txt").read_text()
    )
    for part in first.parts:  # each source's own ids, in the mix's vocabulary
        ids = np.fromfile(part.prepared.train_path, dtype=part.prepared.meta["dtype"])
        assert (
            first.tokenizer.decode(ids.tolist())
            == open(part.prepared.meta["source"]).read()[: part.prepared.meta["split_char"]]
        )
    folders = sorted(p.name for p in (cache / "prepared").iterdir())
    again = prepare_mix([MixEntry(low, 1), MixEntry(up, 1)], "char", cache_dir=cache)
    assert sorted(p.name for p in (cache / "prepared").iterdir()) == folders
    assert [p.prepared.dir for p in again.parts] == [p.prepared.dir for p in first.parts]


def test_a_bpe_mix_samples_its_sources_by_weight(texts, tmp_path):
    low, up = str(texts / "low.txt"), str(texts / "up.txt")
    mostly_low = prepare_mix(
        [MixEntry(low, 9), MixEntry(up, 1)], "bpe", 300, cache_dir=tmp_path / "c"
    )
    mostly_up = prepare_mix(
        [MixEntry(low, 1), MixEntry(up, 9)], "bpe", 300, cache_dir=tmp_path / "c"
    )
    # The favoured source's words become whole tokens first.
    assert len(mostly_low.tokenizer.encode(" ghi")) <= len(mostly_up.tokenizer.encode(" ghi"))
    assert len(mostly_up.tokenizer.encode(" RST")) <= len(mostly_low.tokenizer.encode(" RST"))
    assert mostly_low.tokenizer_path != mostly_up.tokenizer_path


# --- training on a mix --------------------------------------------------------------------------


def test_a_mixed_run_reports_each_sources_val_loss_and_refuses_another_mix(texts, tmp_path, capsys):
    out = tmp_path / "run"
    low, up = texts / "low.txt", texts / "up.txt"
    train(mix_config(texts, out, f"{low}:3,{up}:1", "train.max_iters=10", "train.eval_interval=5"))
    printed = capsys.readouterr().out
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "val_loss_sources" in r]
    assert [r["step"] for r in evals] == [5, 10]
    for r in evals:
        per = r["val_loss_sources"]
        assert set(per) == {"low", "up"}
        assert r["val_loss"] == pytest.approx(0.75 * per["low"] + 0.25 * per["up"])
    assert f"val low {evals[-1]['val_loss_sources']['low']:.4f}, up " in printed
    full = next(r for r in records if "val_loss_full" in r)
    assert set(full["val_loss_full_sources"]) == {"low", "up"}
    assert json.loads((out / "meta.json").read_text())["source"] == "low:0.75,up:0.25"

    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for changed, says in (
        (f"{low}:1,{up}:1", "other weights"),
        (f"{low}:3,{texts / 'text.txt'}:1", "other data"),
    ):
        with pytest.raises(ValueError, match=says):
            train(mix_config(texts, out, changed, "train.max_iters=20"))
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    with pytest.raises(ValueError, match="other data"):
        train(mix_config(texts, out, "", f"data.source={low}", "train.max_iters=20"))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_the_probe_turns_on_by_itself_when_the_mix_holds_the_pronouns(texts, tmp_path):
    with_pronouns = mix_config(
        texts, tmp_path / "a", f"{texts / 'low.txt'}:1,pronouns:1", "train.eval_interval=7"
    )
    without = mix_config(texts, tmp_path / "b", f"{texts / 'low.txt'}:1,{texts / 'up.txt'}:1")
    assert probe_interval(with_pronouns) == 7 and probe_examples(with_pronouns, CPU, Console(True))
    assert probe_interval(without) == 0 and probe_examples(without, CPU, Console(True)) is None
    off = mix_config(
        texts, tmp_path / "c", f"{texts / 'low.txt'}:1,pronouns:1", "train.probe_interval=0"
    )
    assert probe_interval(off) == 0 and probe_examples(off, CPU, Console(True)) is None


@pytest.mark.slow
def test_two_gloo_processes_draw_the_same_mixed_windows_as_one(texts, tmp_path):
    mix = f"{texts / 'low.txt'}:2,{texts / 'up.txt'}:1"
    single = mix_config(
        texts, tmp_path / "single", mix, "train.grad_accum_steps=2", "train.max_iters=10"
    )
    train(single)
    cfg = write_yaml(
        mix_config(texts, tmp_path / "ddp", mix, "train.grad_accum_steps=2", "train.max_iters=10"),
        tmp_path / "ddp.yaml",
    )
    torchrun_two(cfg)
    a = [
        json.loads(line)
        for line in (tmp_path / "single" / "metrics.jsonl").read_text().splitlines()
    ]
    b = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in a] == [r["step"] for r in b] and any(
        "val_loss_sources" in r for r in a
    )
    for ra, rb in zip(a, b):
        for key in ("loss", "train_loss", "val_loss"):
            if key in ra:
                assert rb[key] == pytest.approx(ra[key], abs=1e-4), (ra["step"], key)
        for name, value in ra.get("val_loss_sources", {}).items():
            assert rb["val_loss_sources"][name] == pytest.approx(value, abs=1e-4)


# --- a curriculum -------------------------------------------------------------------------------


def test_a_curriculum_moves_the_shares_from_the_start_weights_to_the_end_weights(texts, tmp_path):
    assert parse_mix("tinyshakespeare:0..0.8,pronouns:1..0.2") == [
        MixEntry("tinyshakespeare", 0.8, 0.0),
        MixEntry("pronouns", 0.2, 1.0),
    ]
    assert load_config(None, ["data.mix=tinyshakespeare:0..3,pronouns:1"]).data.mix == [
        {"source": "tinyshakespeare", "weight": 3.0, "start_weight": 0.0},
        {"source": "pronouns", "weight": 1.0},
    ]
    low, up = str(texts / "low.txt"), str(texts / "up.txt")
    mix = prepare_mix([MixEntry(low, 3, 0), MixEntry(up, 1)], "char", cache_dir=tmp_path / "c")

    def shares(progress):
        return [w for _, w in mix.train_files(progress)]

    assert (
        shares(0.0) == [0.0, 1.0] and shares(1.0) == [0.75, 0.25] and shares(0.5) == [0.375, 0.625]
    )
    assert mix.label == "low:0..0.75,up:1..0.25"
    # At the start only up.txt is drawn: no window holds low.txt's lowercase letters.
    x, _ = get_mixed_batch(
        mix.train_files(0.0), mix.meta["dtype"], 64, 8, "cpu", torch.Generator().manual_seed(0)
    )
    assert all(not any(c.islower() for c in mix.tokenizer.decode(row.tolist())) for row in x)
    x, _ = get_mixed_batch(
        mix.train_files(1.0), mix.meta["dtype"], 64, 8, "cpu", torch.Generator().manual_seed(0)
    )
    assert sum(any(c.islower() for c in mix.tokenizer.decode(row.tolist())) for row in x) > 32
    with pytest.raises(ConfigError, match="start weight"):
        load_config(None, ["data.mix=tinyshakespeare:-1..1,pronouns:1"])
    with pytest.raises(ConfigError, match="every start weight"):
        load_config(None, ["data.mix=tinyshakespeare:0..1,pronouns:0..1"])

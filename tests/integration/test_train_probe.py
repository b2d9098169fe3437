"""The coreference probe while training: metrics.jsonl records, probe.png, bad probe files."""

import json

import pytest
import torch

from data.pronouns import natural
from lab.live_probe import probe_examples, probe_schedule
from lab.run import train
from tests.helpers import tiny_config
from training.console import Console
from training.runtime import Runtime

SENTENCES = [
    ("the dog and the cat sat while it barked.", "it", "dog", ["cat"]),
    ("the cat and the dog sat while it barked.", "it", "dog", ["cat"]),
    ("the red dog ran to the barn and it barked.", "it", "dog", ["barn"]),
]


def write_probe_file(path):
    lines = []
    for text, pronoun, antecedent, distractors in SENTENCES:

        def span(word, text=text):
            return [text.index(word), text.index(word) + len(word)]

        p = text.index(f" {pronoun} ") + 1
        lines.append(
            json.dumps(
                {
                    "text": text,
                    "pronoun": [p, p + len(pronoun)],
                    "antecedent": span(antecedent),
                    "distractors": [span(d) for d in distractors],
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_probe_records_appear_at_their_steps_survive_resume_and_draw_probe_png(corpus, tmp_path):
    probe_file = write_probe_file(tmp_path / "probe.jsonl")
    overrides = ("train.probe_interval=6", f"train.probe_file={probe_file}")
    out = tmp_path / "run"
    schedule = sorted(probe_schedule(20, 6))
    # Every 6 steps and the last, and 12 steps spaced in log(step) from 1 to 20.
    assert schedule == [1, 2, 3, 4, 6, 7, 9, 12, 16, 18, 20]
    train(tiny_config(corpus, out, *overrides, "train.run_steps=13"))
    assert [r["step"] for r in records(out) if "probe_heads" in r] == [
        s for s in schedule if s <= 13
    ]
    train(tiny_config(corpus, out, *overrides))
    probes = [r for r in records(out) if "probe_heads" in r]
    assert [r["step"] for r in probes] == schedule
    last = probes[-1]
    assert len(last["probe_heads"]) == 2 and len(last["probe_heads"][0]) == 2  # 2 layers x 2 heads
    layer, head = last["probe_best_head"]
    assert (
        last["probe_best"]
        == max(max(row) for row in last["probe_heads"])
        == last["probe_heads"][layer][head]
    )
    assert set(last["probe_baselines"]) == {"random", "first", "nearest"}
    # The dog comes first in 2 of 3, but block_size 16 leaves the first noun of those two out of
    # the window at "it": a rule may pick only what the model reads, so "first" hits once.
    assert last["probe_baselines"]["first"] == pytest.approx(1 / 3)
    assert (out / "probe.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_labels_means_no_probe_and_a_note(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    train(tiny_config(corpus, out, "train.probe_interval=5", "train.max_iters=5"))
    assert "train.probe_file" in capsys.readouterr().err
    assert not any("probe_heads" in r for r in records(out)) and not (out / "probe.png").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "No such file"),
        ("not json\n", "line 1.*JSON"),
        ("", "holds no examples"),
    ],
)
def test_a_missing_or_malformed_probe_file_stops_before_training(
    corpus, tmp_path, content, message
):
    probe_file = tmp_path / "probe.jsonl"
    if content is not None:
        probe_file.write_text(content)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=message):
        train(tiny_config(corpus, out, "train.probe_interval=5", f"train.probe_file={probe_file}"))
    assert not (out / "ckpt.pt").exists() and not (out / "metrics.jsonl").exists()


def test_the_probe_file_natural_means_the_built_in_natural_sentences(corpus, tmp_path):
    config = tiny_config(
        corpus, tmp_path / "run", "train.probe_interval=5", "train.probe_file=natural"
    )
    assert (
        probe_examples(config, Runtime(torch.device("cpu"), torch.float32), Console(True))
        == natural()
    )


def test_the_default_run_probes_at_least_12_times_most_of_them_early():
    steps = sorted(probe_schedule(1200, 200))
    assert len(steps) >= 12 and steps[-1] == 1200 and set(range(200, 1201, 200)) <= set(steps)
    assert sum(s < 200 for s in steps) >= 6  # before the first evaluation
    assert probe_schedule(1200, 0) == frozenset()


def test_the_plots_mark_where_the_best_head_first_reaches_90_percent():
    from reports.curve import curve_section, first_pass

    def grid(v):
        return [[0.1, v], [0.2, 0.3]]

    probes = [
        {
            "step": s,
            "probe_heads": grid(v),
            "probe_best_head": [0, 1],
            "probe_baselines": {"random": 0.4, "first": 0.5, "nearest": 0.4},
        }
        for s, v in ((1, 0.2), (10, 0.5), (100, 0.92), (1000, 0.95))
    ]
    assert first_pass(probes) == 100
    assert first_pass(probes[:2]) is None
    assert "reaches 90% at step 100" in curve_section(probes)


def test_both_plots_are_written_at_each_evaluation_and_probe_png_uses_the_pages_colours(
    corpus, tmp_path
):
    import numpy as np
    from PIL import Image

    probe_file = write_probe_file(tmp_path / "probe.jsonl")
    out = tmp_path / "run"
    # Stopped after its first evaluation: the plots are there already, before any finish.
    train(
        tiny_config(
            corpus,
            out,
            f"train.probe_file={probe_file}",
            "train.run_steps=10",
            "train.eval_interval=10",
        )
    )
    assert (out / "loss.png").exists() and (out / "probe.png").exists()
    rgb = np.asarray(Image.open(out / "probe.png").convert("RGB")).reshape(-1, 3).astype(int)

    def near(colour):
        return int((np.abs(rgb - colour).sum(1) < 30).sum())

    assert near((0xD9, 0x5F, 0x02)) > 50  # the best head in the page's orange
    assert near((0xD6, 0x27, 0x28)) == 0  # not matplotlib's red, as before


def test_loss_png_labels_the_range_where_the_evaluations_sit(monkeypatch, tmp_path):
    from lab import plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    records = [{"step": s, "loss": 4.2 * 0.9 ** (s / 10) + 1.2} for s in range(10, 2010, 10)]
    records += [
        {"step": s, "train_loss": 1.2 + 0.2 * 500 / s, "val_loss": 1.25 + 0.2 * 500 / s}
        for s in (500, 1000, 1500, 2000)
    ]  # 1.30 to 1.45
    plots.plot_losses(records, tmp_path / "loss.png")
    (ax,) = drawn[0].axes
    low, high = ax.get_ylim()
    labelled = [t for t in ax.yaxis.get_majorticklocs() if low <= t <= high]
    evals = [r["val_loss"] for r in records if "val_loss" in r]
    assert ax.get_yscale() == "log"
    assert len([t for t in labelled if 0.95 * min(evals) <= t <= 1.05 * max(evals)]) >= 2, labelled


def test_both_plots_have_a_title_and_the_evaluations_are_drawn_over_the_star(monkeypatch, tmp_path):
    """loss.png's star (the whole val split, at the last step) hid the last evaluation's points
    under it, and neither plot said what it shows."""
    from lab import plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    records = [{"step": s, "loss": 3 - s / 1000} for s in range(100, 1300, 100)]
    records += [
        {"step": s, "train_loss": 2.4 - s / 2000, "val_loss": 2.5 - s / 2000} for s in (600, 1200)
    ]
    records.append({"step": 1200, "val_loss_full": 1.9})
    records.append(
        {
            "step": 1200,
            "probe_heads": [[0.5, 0.9], [0.4, 0.45]],
            "probe_best_head": [0, 1],
            "probe_baselines": {"random": 0.45, "first": 0.5, "nearest": 0.4},
        }
    )
    plots.plot_losses(records, tmp_path / "loss.png")
    plots.plot_probe(records, tmp_path / "probe.png")
    (loss_ax,) = drawn[0].axes
    assert loss_ax.get_title() == plots.LOSS_TITLE
    assert drawn[1].axes[0].get_title() == plots.PROBE_TITLE
    by_marker = {line.get_marker(): line for line in loss_ax.get_lines()}
    star, points = by_marker["*"], [by_marker["o"], by_marker["s"]]
    assert list(star.get_xdata()) == [1200] and all(1200 in p.get_xdata() for p in points)
    assert all(p.get_zorder() > star.get_zorder() for p in points)
    assert all(p.get_markersize() < star.get_markersize() for p in points)  # the star shows round


def test_probe_pngs_legend_lies_inside_the_figure_with_a_margin(monkeypatch, tmp_path):
    """probe.png's legend had three columns, wider than the figure: its right edge was cut
    ("nats/toker") and its first swatch touched the left edge."""
    from lab import plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig))
    records = []
    for i, step in enumerate((2, 20, 200, 1200)):  # as the default run logs them, 2 x 4 heads
        grid = [[0.45 + 0.01 * h for h in range(4)] for _ in range(2)]
        grid[0][2] = 0.45 + 0.15 * i
        records += [
            {"step": step, "train_loss": 3 - i / 2, "val_loss": 3.25 - i / 2},
            {
                "step": step,
                "probe_best": grid[0][2],
                "probe_best_head": [0, 2],
                "probe_heads": grid,
                "probe_baselines": {"random": 0.451, "first": 0.5, "nearest": 0.407},
            },
        ]
    plots.plot_probe(records, tmp_path / "probe.png")
    [fig] = drawn
    fig.canvas.draw()  # constrained layout places the legend as the file is written
    # The val loss is a panel of its own below the probe's, its axis in nats: no second axis
    # on the shares, where two loss points once sat near the top of the cand@1 scale.
    probe_ax, loss_ax = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [plots.PROBE_TITLE, plots.VAL_TITLE]
    assert probe_ax.get_ylim() == (0, 1.02) and loss_ax.get_ylim()[1] > 1.02
    page = fig.bbox
    margin = 5  # pixels at the file's 100 dpi
    for ax in fig.axes:
        box = ax.get_legend().get_window_extent()
        assert box.x0 >= page.x0 + margin and box.x1 <= page.x1 - margin, (box, page)
        assert box.y0 >= page.y0, (box, page)
    labels = [t.get_text() for t in loss_ax.get_legend().get_texts()]
    assert labels == ["val loss (nats/token)"]


def test_each_kinds_choice_at_a_probe_follows_a_model_that_reads_only_the_pronoun():
    """A hand-built model whose next-token scores are a fixed function of the current token (no
    attention, no MLP, no positions): at the pronoun it prefers A's continuation to B's by the
    pronoun alone. So each kind's accuracy is the share of twins the pronoun's scores put A
    first, and it can flip only where its twin changes the pronoun: agreement's."""
    from types import SimpleNamespace

    from analysis.choice_pairs import choice_pairs
    from data.pronouns import examples
    from data.tokenizer import train_tokenizer
    from lab.live_probe import LiveProbe
    from tests.helpers import RUN_TEXT, zeroed_gpt

    dev = examples("dev")
    tokenizer = train_tokenizer("bpe", RUN_TEXT + "\n".join(e.text for e in dev), 600)
    torch.manual_seed(0)
    model = zeroed_gpt(
        ("tok_emb.weight", "lm_head.weight"),
        vocab_size=tokenizer.vocab_size,
        block_size=64,
        n_layer=1,
        n_head=2,
        n_embd=32,
        bias=False,
        tie_embeddings=False,
        vocab_multiple=1,
    ).double()
    scores = (model.tok_emb.weight @ model.lm_head.weight.T).detach()  # (V, V): token -> next

    logged = []
    job = SimpleNamespace(
        raw_model=model,
        data=SimpleNamespace(tokenizer=tokenizer),
        metrics=SimpleNamespace(log=lambda **record: logged.append(record)),
        runtime=SimpleNamespace(is_main=True),
        console=SimpleNamespace(say=lambda line: None),
        config=SimpleNamespace(train=SimpleNamespace(eval_interval=1, max_iters=1)),
    )
    probe = LiveProbe()
    probe.examples, probe.steps = dev, frozenset({1})
    probe.after_step(job, SimpleNamespace(step=1, paused=0.0, started=0.0))
    (record,) = logged
    assert {"probe_best", "probe_heads", "probe_baselines"} <= set(record)
    made = choice_pairs(tokenizer, dev, 64)
    for kind, row in record["probe_by_kind"].items():
        pairs = [p for p, k in zip(made.pairs, made.kinds) if k == kind]
        right = [
            scores[p.clean[-1], p.clean_next] > scores[p.clean[-1], p.corrupt_next] for p in pairs
        ]
        turned = [
            scores[p.corrupt[-1], p.clean_next] < scores[p.corrupt[-1], p.corrupt_next]
            for p in pairs
        ]
        assert row["twins"] == len(pairs) >= 10
        assert row["accuracy"] == pytest.approx(sum(right) / len(pairs))
        assert row["flip"] == pytest.approx(
            sum(r and t for r, t in zip(right, turned)) / len(pairs)
        )
        assert row["examples"] == sum(e.decided_by == kind for e in dev)
        assert row["cand_at_1"] == row["kind_best"]  # with no weights, every head is alike
    by_kind = record["probe_by_kind"]
    kinds_mean = sum(r["cand_at_1"] * r["examples"] for r in by_kind.values()) / len(dev)
    assert kinds_mean == pytest.approx(record["probe_best"])
    assert (
        by_kind["agreement"]["flip"] > 0.1
        and by_kind["role"]["flip"] == by_kind["meaning"]["flip"] == 0
    )
    assert 0.2 < by_kind["meaning"]["accuracy"] < 0.8

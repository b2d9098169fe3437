"""The circuit: patching every edge gives the twin and none the clean run, attribution equals
real patching where the first order is exact, and a hand-built model's circuit is found."""

import copy
import json
import random

import pytest
import torch

from analysis.circuit import circuit_of_pairs
from analysis.edge_measures import attribution, patched_lds, single_lds, twin_runs
from analysis.edge_runs import Recorded, record
from analysis.edges import build_graph, make_batches
from analysis.patching import Pair, make_pair
from data.pronouns import examples
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig
from reports.circuit_svg import circuit_svg
from tests.helpers import RUN_TEXT, make_run, run_generate, zeroed_gpt


@pytest.fixture(scope="module")
def setup():
    """A BPE of the built-in sentences, a tiny model in float64 with weights 5x the usual scale
    (so that patches move the logits), and the first test examples' twin pairs."""
    text = RUN_TEXT + "\n".join(ex.text for ex in examples("dev") + examples("test"))
    tokenizer = train_tokenizer("bpe", text, 600)
    torch.manual_seed(0)
    model = (
        GPT(
            GPTConfig(
                vocab_size=tokenizer.vocab_size, block_size=128, n_layer=2, n_head=2, n_embd=32
            )
        )
        .eval()
        .double()
    )
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(5)
    rng = random.Random(0)
    pairs = [p for p in (make_pair(tokenizer, ex, 128, rng) for ex in examples("test")[:40]) if p]
    return model, pairs


def prepared(model, pairs):
    graph = build_graph(model.config.n_layer, model.config.n_head)
    batches = make_batches(
        pairs, [None] * len(pairs), len(graph.senders), model.config.n_embd, "cpu"
    )
    twins, corrupt = twin_runs(model, graph, batches)
    return graph, batches, twins, corrupt


def plain_ld(model, pairs, which):
    """(N,) the LD of each pair's `which` ("clean" or "corrupt") input, by a plain forward."""
    out = []
    with torch.no_grad():
        for p in pairs:
            last = model(torch.tensor([getattr(p, which)]))[0, -1]
            out.append(last[p.clean_next] - last[p.corrupt_next])
    return torch.stack(out)


def test_the_graph_has_an_edge_exactly_where_the_sender_is_upstream():
    graph = build_graph(2, 2)

    def edge(u, v):
        return graph.allowed[graph.senders.index(u), graph.receivers.index(v)].item()

    assert edge("embed:antecedent", "L0H1.k") and edge("L0H0", "MLP0") and edge("MLP0", "L1H1.q")
    assert not edge("L0H0", "L0H1.v") and not edge("MLP0", "MLP0") and not edge("L1H0", "L1H1.q")
    assert edge("MLP1", "logits") and int(graph.allowed.sum()) == 2 * 15 + 2 * 9 + 8 + 2 * 2 + 1


def test_no_edge_patched_is_the_clean_run_and_every_edge_patched_is_the_twin(setup):
    model, pairs = setup
    graph, batches, twins, corrupt = prepared(model, pairs)
    clean = patched_lds(model, graph, batches, twins, torch.zeros_like(graph.allowed))
    every = patched_lds(model, graph, batches, twins, graph.allowed)
    assert torch.allclose(clean, plain_ld(model, pairs, "clean"), atol=1e-10)
    assert torch.allclose(corrupt, plain_ld(model, pairs, "corrupt"), atol=1e-10)
    gap = clean.mean() - corrupt.mean()

    def faithfulness(lds):
        return ((lds.mean() - corrupt.mean()) / gap).item()

    assert (clean - corrupt).abs().mean() > 0.05  # the twin moves every example
    assert faithfulness(clean) == 1.0  # the whole graph kept
    assert faithfulness(every) == pytest.approx(0.0, abs=1e-9)  # the empty circuit
    assert torch.allclose(every, corrupt, atol=1e-10)


def test_attribution_is_real_patching_where_the_first_order_is_exact(setup):
    """With the final LayerNorm taken out, the LD is linear in the final stream: an edge into the
    logits changes the LD by exactly its attribution. Elsewhere the model is not linear."""
    model, pairs = setup
    linear = copy.deepcopy(model)
    linear.ln_f = torch.nn.Identity()
    graph, batches, twins, corrupt = prepared(linear, pairs)
    scores, clean = attribution(linear, graph, batches, twins)
    logits = graph.receivers.index("logits")

    def real(s, r):  # (N,) each example's LD change with edge s -> r patched
        patched = torch.zeros_like(graph.allowed)
        patched[s, r] = True
        return patched_lds(linear, graph, batches, twins, patched) - clean

    moved = 0
    for s in range(len(graph.senders)):
        assert torch.allclose(real(s, logits), scores[:, s, logits], atol=1e-9)
        moved += scores[:, s, logits].abs().mean().item() > 1e-3
    assert moved >= 5  # every head and MLP; the embeddings do not reach the pronoun directly
    inner = [(s, r) for s, r in graph.allowed.nonzero().tolist() if r != logits]
    assert (
        max(
            (real(s, r) - scores[:, s, r]).abs().max().item() for s, r in inner[:: len(inner) // 12]
        )
        > 1e-4
    )


def test_an_edge_patched_alone_from_its_block_on_is_the_whole_pass(setup):
    """single_lds starts each pass where its edge is read, from the clean run it kept; the
    whole pass of patched_lds gives the same LDs, for edges into every kind of receiver."""
    model, pairs = setup
    graph, batches, twins, _ = prepared(model, pairs)
    cleans = []
    attribution(model, graph, batches, twins, cleans)
    S, R = graph.allowed.shape
    named = [
        ("embed:antecedent", "L0H1.v"),  # from block 0
        ("L0H0", "MLP0"),
        ("L0H1", "L1H0.k"),  # a head's write read a block later: starts at its sender's
        ("MLP0", "L1H1.q"),
        ("MLP1", "logits"),  # no block at all
        ("L1H0", "logits"),
    ]
    for u, v in named:
        edge = graph.senders.index(u) * R + graph.receivers.index(v)
        alone = torch.zeros(S * R, dtype=torch.bool)
        alone[edge] = True
        whole = patched_lds(model, graph, batches, twins, alone.view(S, R))
        started = single_lds(model, graph, batches, twins, cleans, edge)
        assert torch.allclose(started, whole, atol=1e-10), (u, v)
        assert (
            whole - patched_lds(model, graph, batches, twins, 0 * alone.view(S, R))
        ).abs().max() > 1e-6


def test_a_layer_fed_the_twins_stream_runs_unsplit_to_the_same_lds(setup):
    """Every edge into layer 1's heads patched: they all read the twin's stream, and the layer
    runs unsplit on the twin's normalised stream. Keeping one edge whose sender's difference is
    exactly 0 (embed:other: the twins differ at the antecedent only) forces the split path and
    must change nothing."""
    model, pairs = setup
    graph, batches, twins, _ = prepared(model, pairs)
    heads = [r for r, name in enumerate(graph.receivers) if name.startswith("L1H")]
    into = torch.zeros_like(graph.allowed)
    into[:, heads] = True
    unsplit = patched_lds(model, graph, batches, twins, into)
    into[graph.senders.index("embed:other"), heads[0]] = False
    split = patched_lds(model, graph, batches, twins, into)
    clean = patched_lds(model, graph, batches, twins, torch.zeros_like(into))
    assert torch.allclose(unsplit, split, atol=1e-10)
    assert (unsplit - clean).abs().max() > 1e-3


def test_attribution_is_the_derivative_of_patching_each_edge(setup):
    """The one backward pass against a directional derivative taken edge by edge: patching an
    edge from a twin only eps of the way from the clean run (its senders' writes clean +
    eps (twin - clean)) moves the LD by eps times the edge's score, to first order."""
    model, pairs = setup
    graph, batches, twins, _ = prepared(model, pairs)
    scores, clean = attribution(model, graph, batches, twins)
    eps = 1e-6
    near = []
    for batch, twin in zip(batches, twins):
        clean_acts = record(model, graph, batch, batch.clean)[0].acts
        near.append(
            Recorded(clean_acts + eps * (twin.acts - clean_acts), twin.inputs, twin.normalized)
        )
    S, R = graph.allowed.shape
    edges = graph.allowed.flatten().nonzero().flatten().tolist()
    for edge in edges[:: max(1, len(edges) // 15)]:
        alone = torch.zeros(S * R, dtype=torch.bool)
        alone[edge] = True
        moved = (patched_lds(model, graph, batches, near, alone.view(S, R)) - clean) / eps
        assert torch.allclose(moved, scores[:, edge // R, edge % R], rtol=1e-3, atol=1e-5), edge


def hand_built():
    """Two layers, two heads, 24 channels, LayerNorms taken out and attention uniform (W_Q =
    W_K = 0). The antecedent's token (1 or 2, channel 0 or 1) is read by L0H0's value and
    written to channels 4-7; MLP0 (GELU) moves them to 8-11; L1H0's value reads those and writes
    12-15, which alone the unembedding reads. L0H1, L1H1 and MLP1 write channels nobody reads."""
    torch.manual_seed(0)
    model = zeroed_gpt(
        vocab_size=8,
        block_size=8,
        n_layer=2,
        n_head=2,
        n_embd=24,
        bias=False,
        tie_embeddings=False,
        vocab_multiple=1,
    )
    model = model.double().eval()
    with torch.no_grad():
        model.tok_emb.weight[1, 0] = model.tok_emb.weight[2, 1] = 3.0
        model.tok_emb.weight[:, 2:4] = torch.randn(8, 2, dtype=torch.float64)  # noise, not 0/1
        model.pos_emb.weight[:, 2:4] = torch.randn(8, 2, dtype=torch.float64)

        def move(w, row, col):  # w[row:row+4, col:col+4] = I: four channels copied
            w[row : row + 4, col : col + 4] = torch.eye(4, dtype=torch.float64)

        for l, (src, dst) in enumerate(((0, 4), (8, 12))):
            block = model.blocks[l]
            w_v = block.attn.w_qkv.weight[
                2 * 24 :
            ]  # W_V (C, C): head 0's rows 0-11, head 1's 12-23
            move(w_v, 0, src)
            move(w_v, 12, src)  # head 1 reads the same...
            move(block.attn.w_out.weight, dst, 0)
            move(block.attn.w_out.weight, 16, 12)  # ...and writes what nobody reads
        move(model.blocks[0].mlp.w_in.weight, 0, 4)
        move(model.blocks[0].mlp.w_out.weight, 8, 0)
        move(model.blocks[1].mlp.w_in.weight, 0, 0)
        move(model.blocks[1].mlp.w_out.weight, 20, 0)
        model.lm_head.weight[6, 12] = model.lm_head.weight[7, 13] = 1.0
    return model


def hand_pairs(n, twin_token, seed=0):
    """n pairs of length 6: fillers (3-5), the antecedent (token 1) at one of positions 0-3,
    the pronoun (0) last; its twin has `twin_token` there. Next tokens: 6 clean, 7 twin."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = [rng.choice((3, 4, 5)) for _ in range(5)] + [0]
        a = rng.randrange(4)
        ids[a] = 1
        twin = ids[:a] + [twin_token] + ids[a + 1 :]
        out.append(Pair(ids, twin, [a], 6, 7))
    return out


def test_a_hand_built_models_circuit_is_the_one_built_into_it():
    model = hand_built()
    pairs = hand_pairs(24, 2) + hand_pairs(24, 1, seed=1)  # the second kind's twins: no change
    kinds = ["agreement"] * 24 + ["meaning"] * 24
    result = circuit_of_pairs(model, pairs, kinds, resamples=100)
    built = {
        ("embed:antecedent", "L0H0.v"),
        ("L0H0", "MLP0"),
        ("MLP0", "L1H0.v"),
        ("L1H0", "logits"),
    }
    agreement = result["by_kind"]["agreement"]
    assert agreement["preference"] and agreement["size"] == 4
    assert {(e["from"], e["to"]) for e in agreement["edges"] if e["in_circuit"]} == built
    assert agreement["faithfulness"] == pytest.approx(1.0, abs=1e-9)
    assert all(e["eap"] == 0 for e in agreement["edges"][4:])
    meaning = result["by_kind"]["meaning"]  # clean and twin are the same: nothing to explain
    assert meaning["gap"] == 0 and not meaning["preference"] and meaning["edges"] == []
    svg = circuit_svg(agreement)
    assert svg.startswith("<svg") and svg.count("<path") == 4 and ">L1H0<" in svg


def test_probe_circuit_json_and_report(tmp_path):
    folder = tmp_path / "run"
    make_run(folder, "bpe", 64)
    code, out, err = run_generate(
        "--ckpt", folder, "--probe", "--circuit", "--json", "--no-causal", "--permutations", "5"
    )
    assert code == 0, err
    circuit, choice = json.loads(out)["circuit"], json.loads(out)["choice"]
    assert {"n", "accuracy", "flip", "circuit", "by_kind"} <= set(choice)
    assert {"edges", "faithfulness", "by_kind", "size", "gap", "n"} <= set(circuit)
    assert set(circuit["by_kind"]) == {"agreement", "role", "meaning"}
    code, out, err = run_generate(
        "--ckpt", folder, "--probe", "--circuit", "--no-causal", "--permutations", "5"
    )
    assert code == 0 and "Circuit at the pronoun" in out and "meaning (" in out
    assert "Question 1, identity" in out and "Question 2, choice" in out
    code, _, err = run_generate("--ckpt", folder, "--circuit")
    assert code == 2 and "--circuit" in err


def test_the_page_draws_each_sets_circuit_with_its_numbers_in_view():
    from reports.circuit_svg import circuit_section
    from reports.page_writer import render_html
    from tests.helpers import SENTENCES

    edge = {"from": "embed:antecedent", "to": "L0H2.v", "share": 0.61, "in_circuit": True}
    part = {
        "edges": [edge, {**edge, "to": "logits", "in_circuit": False}],
        "faithfulness": 0.984,
        "size": 1,
    }
    meaning = {"edges": [], "faithfulness": None, "gap": 0.2, "gap_ci": [0.1, 0.3]}
    circuit = {**part, "n_edges": 137, "min_gap": 0.5, "by_kind": {"meaning": meaning}}
    section = circuit_section(circuit)
    assert section.count("<svg") == 1 and "1 of 137 edges keep 98.4%" in section
    assert "61%" in section  # the share on the line
    # A set without a circuit is no drawing, its caption saying why in its own numbers.
    assert (
        "meaning: no circuit: the twins move the logit difference by 0.20 on average, under "
        "the 0.5 a circuit needs</figcaption></figure>"
    ) in section
    unsteady = {**meaning, "gap": 0.8, "gap_ci": [-0.1, 1.7]}
    said = circuit_section({**circuit, "by_kind": {"meaning": unsteady}})
    assert "by 0.80 on average, but its interval [-0.10, 1.70] reaches 0" in said
    page = render_html(SENTENCES, {"best_head": (0, 2), "circuit": circuit})
    assert page.count('<section class="circuit">') == 1 and circuit_section(None) == ""

"""The docs' tables of the default model's numbers, written from the saved results
(benchmarks/doc_results.py puts each between its block's marks): the model's own answer, the
circuit of each kind, the choice on its twins."""


def pct(x: float) -> str:
    return f"{x:.1%}"


def answer_table(results: dict) -> str:
    """docs/findings/mechanism.md's table of the model's own answer on both test sets."""
    head = results["outputs"]["probe"]["model_answer"]["head"]
    name = f"L{head['layer']} H{head['head']}"
    rows = [
        "| set | kind | items | substitution | closeness | "
        f"{name} | random | answer = {name}'s pick (subst. / clos.) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, key in (("generated test", "probe"), ("natural", "natural")):
        answer = results["outputs"][key]["model_answer"]
        kinds = [("all", answer["all"]), *answer["decided_by"].items()]
        for i, (kind, row) in enumerate(kinds):
            c, ci = row["cand_at_1"], row.get("cand_at_1_ci", {})
            cells = [
                label if i == 0 else "",
                kind,
                str(row["examples"]),
                *(_with_ci(c[m], ci.get(m)) for m in ("substitution", "closeness", "head")),
                pct(row["baselines"]["random"]),
                f"{pct(row['agreement']['substitution'])} / {pct(row['agreement']['closeness'])}",
            ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _with_ci(x: float, ci) -> str:
    return pct(x) if ci is None else f"{pct(x)} [{ci[0] * 100:.0f}, {ci[1] * 100:.0f}]"


def circuit_kinds_table(results: dict) -> str:
    """The circuit of each kind of sentence, one row a kind."""
    rows = ["| kind | examples | gap (nats) | edges | faithfulness |", "|---|---|---|---|---|"]
    for kind, part in results["outputs"]["probe"]["circuit"]["by_kind"].items():
        gap, f = part["gap_ci"], part["faithfulness_ci"]
        rows.append(
            f"| {kind} | {part['n']} | {part['gap']:.2f} [{gap[0]:.2f}, {gap[1]:.2f}] | "
            f"{part['size']} | {pct(part['faithfulness'])} [{f[0] * 100:.1f}, {f[1] * 100:.1f}] |"
        )
    return "\n".join(rows)


def _choice_circuit(part: dict) -> str:
    """The choice table's circuit cell: its size and faithfulness, or why none is drawn."""
    circuit = part["circuit"]
    if circuit["drawn"]:
        f = circuit["faithfulness_ci"]
        faith = f"{pct(circuit['faithfulness'])} [{f[0] * 100:.1f}, {f[1] * 100:.1f}]"
        return f"{circuit['size']} edges, {faith}"
    if not part["prefers"]:
        return "none: no preference"
    gap = circuit["gap_ci"]
    return f"none: the twin hardly moves CM (gap {circuit['gap']:.2f} [{gap[0]:.2f}, {gap[1]:.2f}])"


def choice_table(results: dict) -> str:
    """The choice on its twins, one row for the whole set and one a kind."""
    probe = results["outputs"]["probe"]
    choice, answer = probe["choice"], probe["model_answer"]
    found, tried = choice["twins"]["found"], choice["twins"]["tried"]
    rows = [
        "| kind | twins found | choice accuracy | flip | substitution answer | deciding heads "
        "| choice circuit |",
        "|---|---|---|---|---|---|---|",
    ]
    parts = [
        ("all", choice, answer["all"]),
        *((kind, part, answer["decided_by"][kind]) for kind, part in choice["by_kind"].items()),
    ]
    for kind, part, said in parts:
        twins = (
            f"{sum(found.values())} / {answer['all']['examples']}"
            if kind == "all"
            else f"{found[kind]} / {tried[kind]} ({found[kind] / tried[kind]:.0%})"
        )
        deciding = ", ".join(h.replace("H", " H") for h in part["deciding"]) or (
            f"— ({part['right']} right both ways)"
        )
        a, f = part["accuracy_ci"], part["flip_ci"]
        cells = [
            kind,
            twins,
            f"{pct(part['accuracy'])} [{a[0] * 100:.1f}, {a[1] * 100:.1f}]",
            f"{pct(part['flip'])} [{f[0] * 100:.1f}, {f[1] * 100:.1f}]",
            pct(said["cand_at_1"]["substitution"]),
            deciding,
            _choice_circuit(part),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)

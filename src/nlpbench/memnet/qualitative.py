"""Qualitative outputs of seed 000 ch. 6 computed from trained runs: attention per hop (Tables 3-5) and the
fitted degrees of freedom of every t-MEM-NN run (§6.5.5)."""

from __future__ import annotations

import csv
import statistics
from datetime import datetime, timezone
from pathlib import Path

from nlpbench import config
from nlpbench.config import Declared
from nlpbench.data import babi
from nlpbench.family import OutputPage
from nlpbench.memnet.experiments import select_run
from nlpbench.memnet.groups import Group, all_groups, column_key, declaration_groups, dof_by_role
from nlpbench.memnet.predict import RunPredictor
from nlpbench.results.paper import paper_file
from nlpbench.runtime import io, rundirs
from nlpbench.runtime.provenance import code_commit

COLUMNS = {"MemN2N": ("memn2n", "point", 1), "t-MEM-NN / 1 sample": ("tmemnn", "S1", 1),
           "t-MEM-NN / 10 samples": ("tmemnn", "S10", 10)}


def paper_attention() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(table, row, column) -> (paper text, note), from the packaged transcription of the thesis's Tables 3-5."""
    text = paper_file("tolias-thesis", "attention", "outputs").read_text(encoding="utf-8")
    return {(r["table"], r["row"], r["column"]): (r["paper"], r["note"]) for r in csv.DictReader(text.splitlines())}


def _selected_run_dir(params: dict, runs_root: Path, group: Group, task: int, metric: str) -> Path:
    found = []
    for seed in group.seeds:
        path = group.run_dir(runs_root, task, seed) / "metrics.json"
        if path.exists() and io.read_json(path).get("status") == "ok":
            found.append(io.read_json(path))
    if not found:
        raise FileNotFoundError(f"no trained run of task {task} in runs/{group.group_id} (train it first)")
    return group.run_dir(runs_root, task, select_run(found, metric, params["memnet"]["tie_break"])["seed"])


def attention_table(params: dict, d: Declared, data_root: Path, runs_root: Path, results_dir: Path) -> OutputPage:
    """Table 3, 4 or 5: the fact each model attends to most on each hop, against the supporting facts.

    `d` names the task, the story (0-based question index into the en-1k test file) and the table
    (`from`: the thesis's Table 2, per-task en-1k runs, 3 hops, delta 20) whose selected runs are read."""
    table, task, story = d.name, d.decl["task"], d.decl["story"]
    _, test = babi.load_task(data_root, "en", task)
    sample = test[story]
    groups = declaration_groups(params, config.declaration(params, "tables", d.source, d.decl["from"]))
    paper = paper_attention()
    facts = sample.facts[-50:]
    support = {sample.fact_ids[-50:].index(i) for i in sample.supporting if i in sample.fact_ids[-50:]}
    picks, used = {}, {}
    out = Path(results_dir) / "tolias-thesis" / f"{table}.md"
    if task not in groups["memn2n"].tasks:   # e.g. the smoke scale's task subset
        io.write_text(out, f"# Table {table}: attention per hop, task {task}\n\nNot run: task {task} is not "
                           f"trained at scale `{params['scale']}` (task_subset).\n")
        io.write_text(out.with_suffix(".csv"), "row,column,reproduced,paper,supporting_or_right,note\n")
        return _attention_page(table, task, story, "not run at this scale")
    for column, (model, metric, S) in COLUMNS.items():
        run_dir = _selected_run_dir(params, runs_root, groups[model], task, metric)
        pred = RunPredictor(run_dir)
        probs, att = pred.predict([sample], S=S, seed=0)
        probs, att = probs[0], att[0]
        answer = pred.vocab.itos[int(probs.argmax())]
        hops = [int(att[h, : len(facts)].argmax()) for h in range(att.shape[0])]
        picks[column] = (hops, answer)
        used[column] = str(rundirs.RUNS / run_dir.relative_to(runs_root))   # as the project names it, not this disk
    lines = [f"# Table {table}: attention per hop, task {task} ({babi.TASK_NAMES[task]}), en-1k test story #{story}",
             "", f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} at code commit {code_commit()}, scale "
             f"`{params['scale']}`, from the runs the validation set selects for each column (A-10):", ""]
    lines += [f"- {c}: `{p}`" for c, p in used.items()]
    lines += ["", "Story (memory slots; * = supporting fact):", ""]
    lines += [f"{i + 1}. {' '.join(f)}{' *' if i in support else ''}" for i, f in enumerate(facts)]
    lines += ["", f"Question: \"{' '.join(sample.question)}?\" Answer: **{sample.answer}**.", "",
              "| row | " + " | ".join(f"{c} (reproduced) | {c} (paper)" for c in COLUMNS) + " |",
              "|---|" + "---|---|" * len(COLUMNS)]
    rows_csv = []
    n_hops = len(next(iter(picks.values()))[0])
    for h in range(n_hops):
        row = f"hop {h + 1}"
        cells = []
        for c, (hops, _) in picks.items():
            mine = " ".join(facts[hops[h]]) + (" (supporting)" if hops[h] in support else "")
            ref, note = paper.get((table, row, c), ("", ""))
            cells += [mine, ref or f"– {note}".strip()]
            rows_csv.append([row, c, " ".join(facts[hops[h]]), ref, hops[h] in support, note])
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    cells = []
    for c, (_, answer) in picks.items():
        ref, note = paper.get((table, "answer", c), ("", ""))
        cells += [f"{answer} ({'right' if answer == sample.answer else 'wrong'})", ref]
        rows_csv.append(["answer", c, answer, ref, answer == sample.answer, note])
    lines.append("| answer | " + " | ".join(cells) + " |")
    lines += ["", "Notes:", "",
              "- Hop k shows argmax_i of the attention varpi_i^k (eq. 33). t-MEM-NN draws weights from the posterior "
              "q (A-5); the 10-sample column uses the mean of the 10 per-sample attentions and the mean predictive "
              "distribution; the 1-sample column one draw.",
              "- Story ids are 0-based question indices into the en-1k test file (verified on the facts).",
              "- The paper column is the thesis's table as transcribed (`pipeline/outputs/tolias-thesis/"
              "attention.paper.csv`)."]
    io.write_text(out, "\n".join(lines) + "\n")
    csv_lines = ["row,column,reproduced,paper,supporting_or_right,note"]
    for r in rows_csv:
        csv_lines.append(",".join(f'"{x}"' if isinstance(x, str) else str(x) for x in r))
    io.write_text(out.with_suffix(".csv"), "\n".join(csv_lines) + "\n")
    return _attention_page(table, task, story, "generated")


def _attention_page(table: str, task: int, story: int, status: str) -> OutputPage:
    return OutputPage(f"Table {table}: attention per hop, task {task} story #{story} (en-1k test)",
                      "qualitative table", (f"{table}.md", f"{table}.csv"), status)


def dof_summary(params: dict, runs_root: Path, results_dir: Path) -> OutputPage:
    """§6.5.5: nu_A, nu_B, nu_C of every trained t-MEM-NN run, against the claim nu_A, nu_B <= 5, nu_C <= 20."""
    rows, seen = [], set()
    for group in all_groups(params).values():
        if group.model != "tmemnn":
            continue
        for task in group.tasks:
            for seed in group.seeds:
                path = group.run_dir(runs_root, task, seed) / "metrics.json"
                if path in seen or not path.exists():     # a joint group's tasks share one run
                    continue
                seen.add(path)
                m = io.read_json(path)
                if m.get("status") == "ok" and "dof" in m:
                    rows.append((group.group_id, "joint" if group.joint else task, seed, m["dof"]))
    limits = {"A": 5.0, "B": 5.0, "C": 20.0}
    lines = ["# §6.5.5: fitted degrees of freedom of the t-MEM-NN posteriors", "",
             f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} at code commit {code_commit()}, scale "
             f"`{params['scale']}`, over the trained runs of every t-MEM-NN group the declared tables and outputs "
             f"train ({len(rows)} runs).", "",
             "The thesis claims the learned nu_A, nu_B <= 5 and nu_C <= 20 (heavy tails preferred). Under adjacent "
             "tying a matrix plays several roles (E_0 = B = A^1, E_k = C^k = A^{k+1}, E_K = C^K = W^T): nu_A is the "
             "largest nu of the matrices that serve as some A^k, nu_C the largest of those that serve as some C^k, "
             "so a run is within the claim when every matrix meets the bound of each of its roles.", "",
             "| group | runs | nu_A median (range) | nu_B median (range) | nu_C median (range) | runs within the claim |",
             "|---|---:|---|---|---|---:|"]
    by_group: dict[str, list] = {}
    for gid, task, seed, dof in rows:
        by_group.setdefault(gid, []).append(dof_by_role(dof))
    total_ok = 0
    for gid, dofs in sorted(by_group.items()):
        cells = []
        for n in ("A", "B", "C"):
            v = [d[n] for d in dofs]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
        ok = sum(all(d[n] <= limits[n] for n in limits) for d in dofs)
        total_ok += ok
        lines.append(f"| {gid} | {len(dofs)} | " + " | ".join(cells) + f" | {ok} / {len(dofs)} |")
    lines += ["", f"Claim holds in {total_ok} of {len(rows)} runs." if rows else "No trained t-MEM-NN run found.",
              "", "nu_Theta starts at 100 and is floored at `memnet.model.dof_min`; the prior's dof setting of each "
              "group is in its runs' config.json."]
    out = Path(results_dir) / "tolias-thesis" / "dof.md"
    io.write_text(out, "\n".join(lines) + "\n")
    csv_lines = ["group,task,seed,nu_A,nu_B,nu_C,within_claim"]
    for gid, task, seed, dof in rows:
        d = dof_by_role(dof)
        ok = all(d[n] <= limits[n] for n in limits)
        csv_lines.append(f"{gid},{task},{seed},{d['A']:.4f},{d['B']:.4f},{d['C']:.4f},{ok}")
    io.write_text(out.with_suffix(".csv"), "\n".join(csv_lines) + "\n")
    return OutputPage("§6.5.5: fitted degrees of freedom of every t-MEM-NN run against the claim nu_A, nu_B <= 5, "
                      "nu_C <= 20", "summary", ("dof.md", "dof.csv"), f"claim holds in {total_ok} of {len(rows)} runs")


def test_error_figure(params: dict, d: Declared, runs_root: Path, results_dir: Path) -> OutputPage:
    """Figure 16: test error per epoch of each column's run (one execution), from its history.json."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = d.decl
    groups = declaration_groups(params, d)
    task, seed = exp["rows"][0], (exp.get("seeds") or params["memnet"]["seeds"])[0]
    curves = {}
    for column, col in exp["columns"].items():
        group = groups[column_key(col)]
        if task not in group.tasks:       # not trained at this scale (task_subset): an empty figure says so
            continue
        path = group.run_dir(runs_root, task, seed) / "history.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no training log (train the group first)")
        hist = io.read_json(path)
        curves[column] = [(h["epoch"], 100 * (1 - h["test_acc"][col["metric"]])) for h in hist]
    out = Path(results_dir) / d.source / f"{d.name}.png"
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, pts in curves.items():
        ax.plot([e for e, _ in pts], [v for _, v in pts], label=column)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test error (%)")
    ax.set_title(f"Test error per epoch: task type #{task} (en-1k, seed {seed}, scale {params['scale']})")
    if curves:
        ax.legend()
    else:
        ax.text(0.5, 0.5, f"task {task} not trained at scale {params['scale']}", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    lines = ["epoch,column,test_error"] + [f"{e},{c},{v:.2f}" for c, pts in curves.items() for e, v in pts]
    io.write_text(out.with_suffix(".csv"), "\n".join(lines) + "\n")
    return OutputPage(f"Figure {d.name.removeprefix('fig')}: test error per epoch, task {task}", "figure",
                      (out.name, out.with_suffix(".csv").name), "generated" if curves else "not run at this scale")

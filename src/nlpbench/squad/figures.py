"""Figure 4.2 (histograms of the raw similarity scores S) and the training-loss curves of Figures 4.4, 5.2 and A.1
(seed 004 chs. 4-5, appendix A: Figures 4.2, 4.4, 5.2, A.1), from the runs the squad tables train.

Declared under outputs.shen-thesis (family squad):
  kind: histogram    `similarities` x `outputs` (Table 4.2's configurations), each from its best seed (max EM, as
                     the heatmaps), on one fixed test sample: the first `questions` questions of this scale's test
                     set, passages cut at squad.train.eval_max_passage_len as in evaluation; `bins` bins whose
                     edges are shared by the similarities of one output (so the ranges compare directly).
  kind: loss_curves  `panels`: {panel title: [{table, rows (default: all), columns}, ...]}, each selection
                     naming cells of a declared squad table, so a line is exactly the configuration (and the runs)
                     that cell reads. A line is the mean over the seeds of the batch loss (history.json step_loss)
                     in blocks of ceil(steps / `points`) optimizer steps, with the band from the lowest to the
                     highest seed.
Each writes results/<source>/<name>.png and <name>.csv (the plotted numbers) atomically, and returns the figure's
page for the results index (<name>.output.json, its note saying what a line or a bar is). The names are fig<number>
(fig5.2-loss and figA.1-loss: fig5.2.png and figA.1.png are the box plots of Tables 5.3 and A.1).
"""

from __future__ import annotations

import csv
import io as _io
import math
from pathlib import Path

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.family import OutputPage
from nlpbench.runtime import io
from nlpbench.squad import experiments as x
from nlpbench.squad import groups as sg
from nlpbench.squad.groups import loss_lines

HISTOGRAM_KEYS = {"family", "kind", "similarities", "outputs", "questions", "bins", "title"}
LOSS_KEYS = {"family", "kind", "panels", "points", "title"}


def _csv_text(header: list[str], rows: list[list]) -> str:
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _save(fig, csv_text: str, results_root: Path, source: str, name: str) -> tuple[Path, Path]:
    png, table = Path(results_root) / source / f"{name}.png", Path(results_root) / source / f"{name}.csv"
    fig.tight_layout()
    with io.atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    io.write_text(table, csv_text)
    return png, table


def _figure(name: str) -> str:
    """fig5.2-loss -> Figure 5.2"""
    return "Figure " + name.removeprefix("fig").removesuffix("-loss")


def _check_keys(decl: dict, known: set[str], where: str) -> None:
    """A ConfigError naming `where` (the declaration's home: config.where) for a key the figure does not read."""
    unknown = set(decl) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(known)})")


# -- Figure 4.2: histograms of S ------------------------------------------------------------------------------

def sample_items(params: dict, decl: dict, data_root: Path, vocab: list[str]) -> tuple[dict, list[dict]]:
    """(the prepared test set, its first `questions` encoded examples): the fixed sample every model reads."""
    from nlpbench.squad.data import load_prepared
    from nlpbench.squad.train import encode

    built = x._subset(load_prepared(x.data_dir(params, data_root), "test"), params["squad"]["data"]["max_test_questions"])
    index = {w: i for i, w in enumerate(vocab)}
    items = encode(built, index, params["squad"]["train"]["eval_max_passage_len"], 10**9, drop_unreachable=False)
    return built, items[:decl.get("questions", 1)]     # the schema holds `questions` >= 1


def similarity_scores(model, items: list[dict]):
    """Every S entry phi(h_i, u_j) of the model on the sample, question by question (no padding), flattened."""
    import numpy as np
    import torch

    out = []
    with torch.no_grad():
        for item in items:
            S = model(torch.tensor([item["passage"]]), torch.tensor([item["question"]]))["S"][0]
            out.append(S.reshape(-1).numpy())
    return np.concatenate(out)


def histogram_data(params: dict, decl: dict, data_root: Path, runs_root: Path) -> dict:
    """{"sample": ..., "panels": [{config, group, seed, em, scores (array) or None, edges, counts}]}: for each
    output, bins shared by its similarities."""
    import numpy as np

    vocab, matrix = x.load_vectors(params, data_root)
    built, items = sample_items(params, decl, data_root, vocab)
    n_pairs = sum(len(it["passage"]) * len(it["question"]) for it in items)
    panels = []
    for cfg in sg.heatmap_configs(decl):
        best = x.load_best_seed(params, cfg, runs_root, data_root, vocab, matrix)
        panel = {"config": cfg, "group": sg.group_id(params, cfg), "seed": None, "em": None, "scores": None}
        if best is not None:
            model, panel["seed"], panel["em"] = best
            panel["scores"] = similarity_scores(model, items)
        panels.append(panel)
    bins = int(decl.get("bins", 40))
    for output in dict.fromkeys(p["config"].output for p in panels):
        mine = [p for p in panels if p["config"].output == output and p["scores"] is not None]
        if not mine:
            continue
        lo = min(float(p["scores"].min()) for p in mine)
        hi = max(float(p["scores"].max()) for p in mine)
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
        for p in mine:
            p["counts"], p["edges"] = np.histogram(p["scores"], bins=edges)[0], edges
    questions = [built["examples"][it["k"]]["question"] for it in items]
    return {"questions": questions, "n_pairs": n_pairs, "panels": panels}


def draw_histograms(params: dict, decl: dict, source: str, name: str, data_root: Path, runs_root: Path,
                    results_root: Path) -> OutputPage:
    """Figure 4.2: one histogram of S per similarity (columns) and output formation (rows)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _check_keys(decl, HISTOGRAM_KEYS, config.where(params, f"outputs.{source}.{name}"))
    data = histogram_data(params, decl, data_root, runs_root)
    sims, outputs = list(decl["similarities"]), list(dict.fromkeys(p["config"].output for p in data["panels"]))
    fig, axes = plt.subplots(len(outputs), len(sims), figsize=(3.6 * len(sims), 2.8 * len(outputs)), squeeze=False)
    rows = []
    for p in data["panels"]:
        cfg = p["config"]
        ax = axes[outputs.index(cfg.output)][sims.index(cfg.similarity)]
        if p["scores"] is None:
            ax.set_title(f"{cfg.similarity} / {cfg.output}: not trained", fontsize=8)
            ax.axis("off")
            continue
        s, edges = p["scores"], p["edges"]
        ax.stairs(p["counts"], edges, fill=True, alpha=0.7)
        ax.set_xlim(edges[0], edges[-1])
        ax.set_title(f"{cfg.similarity}, {cfg.output} (seed {p['seed']}, EM {p['em']:.1f})\n"
                     f"range [{s.min():.2f}, {s.max():.2f}], SD {s.std():.2f}", fontsize=8)
        ax.set_xlabel("similarity score", fontsize=8)
        ax.set_ylabel("count (i, j)", fontsize=8)
        for left, right, count in zip(edges[:-1], edges[1:], p["counts"]):
            rows.append([cfg.output, cfg.similarity, p["group"], p["seed"], f"{left:.6g}", f"{right:.6g}", int(count)])
    sample = (f"{len(data['questions'])} test question(s), {data['n_pairs']} (i, j) pairs: "
              + "; ".join(repr(q) for q in data["questions"][:3]) + (" ..." if len(data["questions"]) > 3 else ""))
    fig.suptitle(f"{_figure(name)}: histograms of the raw similarity scores S, each model's best seed, scale "
                 f"{params['scale']}; the same sample: {sample}", fontsize=8, wrap=True)
    paths = _save(fig, _csv_text(["output", "similarity", "group", "seed", "bin_left", "bin_right", "count"], rows),
                  results_root, source, name)
    plt.close(fig)
    drawn = sum(p["scores"] is not None for p in data["panels"])
    return OutputPage(
        decl.get("title", f"{name}: histograms of the similarity scores"), "figure", tuple(q.name for q in paths),
        f"{drawn} of {len(data['panels'])} configurations drawn",
        note=f"S entries of {sample}, from the best seed (max EM) of each configuration; bins shared within an "
             "output formation (row). The thesis does not say which output formation: O_1 read, O_2 saved too.")


# -- Figures 4.4, 5.2, A.1: training-loss curves ---------------------------------------------------------------

def seed_losses(params: dict, cfg: sg.Config, runs_root: Path) -> dict[int, list[float]]:
    """seed -> the batch loss of every optimizer step (history.json step_loss); runs trained before it was
    recorded give their `loss_log` (every loss_log_every steps) instead."""
    out = {}
    for seed in params["squad"]["seeds"]:
        path = sg.run_dir(runs_root, sg.group_id(params, cfg), seed) / "history.json"
        if (path.parent / "metrics.json").is_file() and path.is_file():
            history = io.read_json(path)
            out[seed] = list(history.get("step_loss") or [v for _, v in history.get("loss_log", [])])
    return out


def block_means(values: list[float], size: int) -> list[float]:
    """Means of consecutive blocks of `size` values (the last block may be shorter)."""
    return [sum(values[i:i + size]) / len(values[i:i + size]) for i in range(0, len(values), size)]


def loss_curve_data(params: dict, decl: dict, runs_root: Path, where: str = "outputs") -> list[dict]:
    """One entry per line: panel, label, config, group, the raw per-seed losses, the block size, per-seed block
    means and their mean, min and max (over the seeds, on the steps every seed has)."""
    points = int(decl.get("points", 40))
    out = []
    for panel, label, cfg in loss_lines(params, decl, where):
        losses = {s: v for s, v in seed_losses(params, cfg, runs_root).items() if v}
        line = {"panel": panel, "label": label, "config": cfg, "group": sg.group_id(params, cfg), "seeds": losses}
        if losses:
            steps = min(len(v) for v in losses.values())
            size = max(1, math.ceil(steps / points))
            blocks = {s: block_means(v[:steps], size) for s, v in losses.items()}
            columns = list(zip(*blocks.values()))
            line.update(block=size, steps=[min(steps, (k + 1) * size) for k in range(len(columns))], blocks=blocks,
                        mean=[sum(c) / len(c) for c in columns], low=[min(c) for c in columns],
                        high=[max(c) for c in columns])
        out.append(line)
    return out


def draw_loss_curves(params: dict, decl: dict, source: str, name: str, runs_root: Path,
                     results_root: Path) -> OutputPage:
    """A loss-curve figure: one panel per declared panel, one line per configuration (seed mean, min-max band)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    where = f"outputs.{source}.{name}"
    _check_keys(decl, LOSS_KEYS, config.where(params, where))
    lines = loss_curve_data(params, decl, runs_root, where)
    panels = list(decl["panels"])
    cols = min(2, len(panels))
    n_rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(6 * cols, 3.8 * n_rows), squeeze=False)
    rows, blocks = [], set()
    for k, panel in enumerate(panels):
        ax = axes[k // cols][k % cols]
        panel_lines = [line for line in lines if line["panel"] == panel]
        if not panel_lines:     # every configuration of the panel is paper scale only (its table's trained_rows)
            ax.text(0.5, 0.5, f"paper scale only:\nnothing of this panel is trained at scale {params['scale']}",
                    ha="center", va="center", fontsize=8, transform=ax.transAxes)
        for i, line in enumerate(panel_lines):
            if not line["seeds"]:
                ax.plot([], [], color=f"C{i}", label=f"{line['label']} (not trained)")
                continue
            blocks.add(line["block"])
            ax.plot(line["steps"], line["mean"], color=f"C{i}", lw=1.3, marker="o" if len(line["steps"]) < 3 else None,
                    label=f"{line['label']} ({len(line['seeds'])} seeds)")
            ax.fill_between(line["steps"], line["low"], line["high"], color=f"C{i}", alpha=0.15, lw=0)
            for seed, values in sorted(line["blocks"].items()):
                rows += [[panel, line["label"], line["group"], seed, step, f"{v:.6g}"]
                         for step, v in zip(line["steps"], values)]
            rows += [[panel, line["label"], line["group"], "mean", step, f"{v:.6g}"]
                     for step, v in zip(line["steps"], line["mean"])]
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.set_ylabel("training loss (3.20)", fontsize=8)
        if panel_lines:
            ax.legend(fontsize=7)
    for k in range(len(panels), n_rows * cols):
        axes[k // cols][k % cols].axis("off")
    block = ", ".join(map(str, sorted(blocks))) or "-"
    fig.suptitle(f"{_figure(name)}: training loss, scale {params['scale']}; line = mean over the "
                 f"seeds of the batch loss in blocks of {block} steps, band = lowest to highest seed", fontsize=9)
    paths = _save(fig, _csv_text(["panel", "line", "group", "seed", "step", "loss"], rows), results_root, source, name)
    plt.close(fig)
    drawn = sum(bool(line["seeds"]) for line in lines)
    return OutputPage(
        decl.get("title", f"{name}: training-loss curves"), "figure", tuple(p.name for p in paths),
        f"{drawn} of {len(lines)} lines drawn",
        note=f"Each line: one configuration (the runs its table cell reads), the mean over its seeds of the batch "
             f"loss averaged in blocks of {block} optimizer steps (x = the block's last step); the band spans the "
             "lowest and highest seed. The CSV has every seed's block means and the mean.")

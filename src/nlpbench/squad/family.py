"""The SQuAD attention family (seed 004 chs. 3-5 and appendix A) behind nlpbench.family.

Data steps: `squad` (SQuAD v1.1 prepared: the official train/dev files, or offline an article split of the
mirror's dev set) and `squad-vectors` (the GloVe rows of its vocabulary). A group trains one configuration of the
baseline model (similarity x output formation x passage summary x d*), or one of Table 4.4's full models (BiDAF,
DCN, QANet) with one similarity, over every seed; tables 3.1, 4.2-4.4,
5.2-5.5 and A.1 read them (squad.experiments), with box plots of the seeds where a table declares a figure; the
outputs read the same runs: heatmaps of S (Figure 4.6), histograms of S (Figure 4.2) and loss curves (Figures 4.4,
5.2, A.1; squad.figures)."""

from __future__ import annotations

from pathlib import Path

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.family import DataStep, JobSize, OutputPage, Paths, TableParts, Target, TrainGroup, table_files
from nlpbench.runtime import rundirs
from nlpbench.squad import groups as sg


def _x():
    from nlpbench.squad import experiments
    return experiments


class SquadFamily:
    name = "squad"
    # SQuAD v1.1 train with GloVe 840B rows of its vocabulary, char embeddings; the tables take about 130
    # GPU-hours over their groups (the timing benchmark on an H100)
    job_size = JobSize(mem_mb=6000, paper_mem_mb=32000, paper_minutes=36 * 60)

    def check(self, params: dict) -> None:
        sg.check(params)

    def data_steps(self, params: dict) -> list[DataStep]:
        x = _x()
        base = x.data_dir(params, Path("data"))
        # both light: SQuAD's two JSON files, and the GloVe rows of its vocabulary (the download, and one pass
        # over the zipped text that keeps those rows)
        return [DataStep("squad", str(base / "STATUS.json"), light=True),
                DataStep("squad-vectors", str(x.vectors_file(params, Path("data"))), ("squad",), light=True)]

    def groups(self, params: dict) -> list[TrainGroup]:        # a group trains its configuration once a seed
        return [TrainGroup(gid, str(rundirs.run_dir(rundirs.RUNS, gid) / "group.json"), ("squad", "squad-vectors"),
                           runs=len(params["squad"]["seeds"])) for gid in sg.all_configs(params)]

    def targets(self, params: dict) -> list[Target]:
        out = []
        for d in config.declared(params, "tables", self.name):
            files = table_files(d.source, d.name, d.decl)
            groups = tuple(sg.group_id(params, c) for c in sg.table_configs(params, d.name))
            out.append(Target("tables", d.source, d.name, files, groups, ("squad",)))
        for d in config.declared(params, "outputs", self.name):
            if d.decl["kind"] == "heatmap":
                groups = tuple(sg.group_id(params, c) for c in sg.heatmap_configs(d.decl))
                out.append(Target("outputs", d.source, d.name, (f"{d.source}/fig{d.name}.png",), groups,
                                  ("squad", "squad-vectors")))
            elif d.decl["kind"] in ("histogram", "loss_curves"):     # Figure 4.2; Figures 4.4, 5.2, A.1
                configs = (sg.heatmap_configs(d.decl) if d.decl["kind"] == "histogram"
                           else sg.loss_configs(params, d.decl))
                files = (f"{d.source}/{d.name}.png", f"{d.source}/{d.name}.csv")
                out.append(Target("outputs", d.source, d.name, files,
                                  tuple(dict.fromkeys(sg.group_id(params, c) for c in configs)),
                                  ("squad", "squad-vectors") if d.decl["kind"] == "histogram" else ("squad",)))
            else:
                raise ConfigError(f"{d.at('kind')}: {d.decl['kind']!r} (squad: heatmap, histogram, loss_curves)")
        return out

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        from nlpbench.data.fetch import resolve_mirror
        from nlpbench.squad import data

        x, d = _x(), params["squad"]["data"]
        if step == "squad":
            out = x.data_dir(params, paths.data)
            scale = "paper" if d["source"] == "official" else ("smoke" if params["scale"] == "smoke" else "cpu")
            status = data.prepare(out, scale, resolve_mirror(mirror), d["split"]["train_articles"],
                                  d["split"]["test_articles"], d["split"]["seed"], allow_download=d["download"])
            return f"SQuAD v1.1 ready in {out}: {status['counts']} ({status['answer_start']})"
        if step == "squad-vectors":
            return prepare_vectors(params, paths, resolve_mirror(mirror))
        raise ConfigError(f"the squad family has no data step {step!r} (squad, squad-vectors)")

    def train(self, group: str, params: dict, paths: Paths, device: str) -> None:
        import torch
        if params["squad"].get("threads"):
            torch.set_num_threads(params["squad"]["threads"])
        _x().train_group(params, group, paths.data, paths.runs, device)

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        return _x().table_parts(params, name, paths.runs, paths.data)

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        d = config.declaration(params, "outputs", source, name)
        if d.decl["kind"] == "heatmap":
            return _x().draw_heatmaps(params, d.decl, source, name, paths.data, paths.runs, paths.results)
        if d.decl["kind"] == "histogram":
            from nlpbench.squad.figures import draw_histograms
            return draw_histograms(params, d.decl, source, name, paths.data, paths.runs, paths.results)
        if d.decl["kind"] == "loss_curves":
            from nlpbench.squad.figures import draw_loss_curves
            return draw_loss_curves(params, d.decl, source, name, paths.runs, paths.results)
        raise ConfigError(f"{d.at('kind')}: {d.decl['kind']!r} (squad: heatmap, histogram, loss_curves)")


def prepare_vectors(params: dict, paths: Paths, mirror=None) -> str:
    """vocab + embedding matrix for every token of the prepared data (OOV rows zero), written atomically."""
    import numpy as np

    from nlpbench.data.prepared import prepared_output
    from nlpbench.squad import glove
    from nlpbench.squad.data import load_prepared

    x = _x()
    ddir, out, name = x.data_dir(params, paths.data), x.vectors_file(params, paths.data), \
        params["squad"]["data"]["vectors"]
    parts = [load_prepared(ddir, p) for p in ("train", "test")]
    vocab = glove.build_vocab([c["tokens"] for s in parts for c in s["contexts"]] +
                              [e["question_tokens"] for s in parts for e in s["examples"]])
    wanted = glove.wanted_forms(vocab)
    if name == "glove-6B-50d":
        vectors = glove.load_kumo(glove.kumo_data_dir(), wanted)
    elif name == "glove-840B-300d":
        vectors = glove.load_text(glove.fetch_840b(paths.data / "downloads", mirror), wanted)
    else:
        raise ConfigError(f"{config.where(params, 'squad.data.vectors')}: {name!r} (known: {', '.join(x.VECTORS)})")
    matrix, oov = glove.embedding_matrix(vocab, vectors)
    before = out.stat().st_mtime_ns if out.is_file() else None
    with prepared_output(out) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, vocab=np.array(vocab), matrix=matrix, oov=np.array(oov))
    done = "kept" if before == out.stat().st_mtime_ns else "wrote"       # kept: the same bytes were there
    return f"{done} {out}: {len(vocab) - 1} words, {matrix.shape[1]}-d, {oov} without a vector (zeros)"


SQUAD = SquadFamily()

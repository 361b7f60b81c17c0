"""The ACVI family (seeds 000 ch. 7 and 002: pointer-generator summarization and video captioning with soft,
structured, variational and ACVI attention) behind nlpbench.family.

Data steps: the CNN/DM mirror subset (tokenised), the Du et al. QG pairs, the released outputs scored, and one step
per data set the pipeline cannot fetch (CNN/DM training split, MSVD, DUC 2004: STATUS.json says how to obtain it).
A group is one run (one seed) that this scale can train (acvi.groups.active). Tables and outputs read them."""

from __future__ import annotations

from nlpbench import config
from nlpbench.acvi import config as ac
from nlpbench.acvi import groups as ag
from nlpbench.family import DataStep, JobSize, OutputPage, Paths, TableParts, Target, TrainGroup, table_files


def _parts(decl: dict) -> list[dict]:
    return [v for part in ("rows", "columns") for v in (decl.get(part) or {}).values()]


class AcviFamily:
    name = "acvi"
    # CNN/DM: 287k article-summary pairs held as token ids, 50k vocabulary; docs/acvi.md projects 13.4
    # (ASA) to 20.5 (ACVI, paper form) GPU-hours per CNN/DM run
    job_size = JobSize(mem_mb=4000, paper_mem_mb=32000, paper_minutes=36 * 60)

    def check(self, params: dict) -> None:
        ag.check(params)

    def data_steps(self, params: dict) -> list[DataStep]:
        if self.name not in params:
            return []
        # light: the mirror's 250 CNN/DM articles and the QG pairs, and a data set the user supplies none of (its
        # STATUS.json says how to obtain it); a job: scoring the released outputs, preparing a supplied data set
        steps = [DataStep("acvi-cnndm-mirror", str(ac.data_dir(params, "acvi-cnndm-mirror") / "STATUS.json"),
                          light=True),
                 DataStep("acvi-qg", str(ac.data_dir(params, "acvi-qg") / "STATUS.json"), light=True),
                 DataStep("acvi-released", str(ac.data_dir(params, "acvi-released") / "scores.json"),
                          ("acvi-cnndm-mirror",))]
        steps += [DataStep(s, str(ac.data_dir(params, s) / "STATUS.json"),
                           light=params["acvi"]["data"][ac.EXTERNAL[s][1]] is None) for s in ac.EXTERNAL]
        return steps

    def groups(self, params: dict) -> list[TrainGroup]:
        return [TrainGroup(r.run_id, str(r.run_dir() / "metrics.json"), ag.run_needs(params, r))
                for r in ag.all_runs(params).values()]

    def _needs(self, params: dict, decl: dict) -> tuple[str, ...]:
        needs = []
        parts = _parts(decl)
        if any(p.get("released") for p in parts):
            needs.append("acvi-released")
        if any(p.get("eval") == "duc2004" for p in parts):
            needs.append("acvi-duc2004")
        for r in ag.table_runs(params, decl):
            if not ag.trainable(params, r.task):
                needs.append(ac.TASK_DATA[r.task])
            needs += ag.run_needs(params, r)
        return tuple(dict.fromkeys(needs))

    def targets(self, params: dict) -> list[Target]:
        out = []
        for d in config.declared(params, "tables", self.name):
            groups = tuple(r.run_id for r in ag.active(params, ag.table_runs(params, d.decl)))
            out.append(Target("tables", d.source, d.name, table_files(d.source, d.name, d.decl), groups,
                              self._needs(params, d.decl)))
        for d in config.declared(params, "outputs", self.name):
            base = f"{d.source}/{d.name}"
            kind = d.decl["kind"]
            groups = tuple(r.run_id for r in ag.active(params, ag.table_runs(params, d.decl)))
            needs = ("acvi-cnndm-mirror",) + self._needs(params, d.decl) if kind == "qualitative" else ()
            out.append(Target("outputs", d.source, d.name, (f"{base}.md",), groups, tuple(dict.fromkeys(needs))))
        return out

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        from nlpbench.acvi.experiments import prepare
        return prepare(step, params, paths.data, mirror)

    def train(self, group: str, params: dict, paths: Paths, device: str) -> None:
        from nlpbench.acvi.experiments import train_run
        run = ag.all_runs(params)[group]
        m = train_run(run, params, paths.data, paths.runs, device)
        key = "rougeL" if "rougeL" in m else "test"
        print(f"{run.run_id}: {key} {m[key]}")

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        from nlpbench.acvi.experiments import table_parts
        return table_parts(params, source, name, paths.data, paths.runs)

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        from nlpbench.acvi.experiments import output
        return output(params, source, name, paths.data, paths.runs, paths.results)


ACVI = AcviFamily()

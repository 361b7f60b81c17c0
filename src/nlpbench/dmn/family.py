"""The DMN family (seed 004 ch. 6: DMN+, MoDMN+, ff-DMN, the ensemble, task-16 fact orders) behind
nlpbench.family. Data steps derive the fact-order patterns and the augmented set from bAbI; a group trains
one model on one kind of data (items x seeds); tables 6.2-6.7 read them and draw their figures."""

from __future__ import annotations

from nlpbench import config
from nlpbench.dmn import groups as dg
from nlpbench.family import DataStep, JobSize, OutputPage, Paths, TableParts, Target, TrainGroup, table_files
from nlpbench.results import claims


def _x():
    from nlpbench.dmn import experiments
    return experiments


class DMNFamily:
    name = "dmn"
    # bAbI: vocabularies of a few hundred words, one task's padded stories
    job_size = JobSize(mem_mb=2000, paper_mem_mb=8000)

    def check(self, params: dict) -> None:
        dg.all_groups(params)          # column data, rows and overrides are checked where groups are made
        claims.check_declared(params, self.name)

    def data_steps(self, params: dict) -> list[DataStep]:
        # task 16's few thousand stories, reordered or augmented: light
        return [DataStep(did, f"data/dmn/{did}/manifest.json", ("babi",), light=True)
                for did in sorted(dg.all_datasets(params))]

    def groups(self, params: dict) -> list[TrainGroup]:     # one job per item of a group (groups.jobs)
        return [TrainGroup(jid, str(dg.job_done(g, item)), ("babi",) + tuple(g.datasets()), runs=len(g.seeds))
                for jid, (g, item) in dg.jobs(params).items()]

    def targets(self, params: dict) -> list[Target]:
        out = []
        for d in config.declared(params, "tables", self.name):
            files = table_files(d.source, d.name, d.decl)
            groups = tuple(dg.job_id(g, item) for g in dg.table_groups(params, d.name) for item in g.items)
            out.append(Target("tables", d.source, d.name, files, groups))
        return out

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        manifest = _x().make_dataset(step, params, paths.data / "babi", paths.data / "dmn")
        return f"wrote {manifest}"

    def train(self, group: str, params: dict, paths: Paths, device: str) -> float:
        import torch
        x = _x()
        if params["dmn"].get("threads"):          # dmn.threads caps the job's threads (these ops are too small)
            torch.set_num_threads(params["dmn"]["threads"])
        g, item = dg.jobs(params)[group]
        together = x.seeds_together(params["dmn"].get("execution", "auto"), device)
        return x.train_item(g, item, paths.data / "babi", paths.data / "dmn", paths.runs, device,
                            together=together)["taken_over_s"]

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        return _x().table_parts(params, name, paths.runs, paths.data)

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        raise config.ConfigError(f"{config.where(params, f'outputs.{source}.{name}')}: the dmn family builds "
                                 "tables only")


DMN = DMNFamily()

"""The memory-network family (seed 000 ch. 6: MemN2N, t-MEM-NN, guess the number) behind nlpbench.family.

Tables: bAbI grids (rows = tasks, columns = model + metric) and the game tables 16-17. Outputs: the attention
tables 3-5, the fitted dofs, Figure 16 and the Table 18 transcript.
"""

from __future__ import annotations

import copy

from nlpbench import config
from nlpbench.config import ConfigError, Declared
from nlpbench.family import DataStep, JobSize, OutputPage, Paths, TableParts, Target, TrainGroup, table_files
from nlpbench.memnet import groups as mg
from nlpbench.results import claims
from nlpbench.runtime import rundirs

SOURCE = "tolias-thesis"


def _files(d: Declared) -> tuple[str, ...]:
    """What a declaration writes, under the results folder."""
    base = f"{d.source}/{d.name}"
    kind = d.decl.get("kind", "table")
    if d.section == "tables":        # a task table, or a game's
        return table_files(d.source, d.name, d.decl)
    return {"attention": (f"{base}.md", f"{base}.csv"),
            "dof": (f"{base}.md", f"{base}.csv"), "test_error_figure": (f"{base}.png", f"{base}.csv"),
            "transcript": (f"{base}.md",)}[kind]


class MemNetFamily:
    name = "memnet"
    # bAbI: vocabularies of a few hundred words, stories of at most 320 sentences
    job_size = JobSize(mem_mb=2000, paper_mem_mb=8000)

    # -- what exists --------------------------------------------------------------------------------------

    def check(self, params: dict) -> None:
        for d in mg.babi_declarations(params):          # overrides name existing memnet keys
            scratch = copy.deepcopy(params["memnet"])
            for key, value in (d.decl.get("overrides") or {}).items():
                config.set_dotted(scratch, key, value, d.at("overrides"))
            for column, col in d.decl["columns"].items():
                for key, value in (col.get("overrides") or {}).items():
                    config.set_dotted(copy.deepcopy(scratch), key, value, d.at(f"columns.{column}.overrides"))
        claims.check_declared(params, self.name)       # notes' placeholders and claims name what exists
        game = params["memnet"]["game"]
        for d in config.declared(params, "tables", self.name):
            if d.decl.get("kind") == "game" and d.name not in game["ranges"]:
                raise ConfigError(f"{d.at('kind')}: game, but {config.where(params, 'memnet.game.ranges')} has no "
                                  f"number range for {d.name!r}")
        for d in config.declared(params, "outputs", self.name):
            if d.decl["kind"] == "attention":
                for key in ("from", "task", "story"):
                    if key not in d.decl:
                        raise ConfigError(f"{d.at()}: an attention table needs `{key}`")
                config.declaration(params, "tables", d.source, d.decl["from"])

    def data_steps(self, params: dict) -> list[DataStep]:
        return []      # bAbI is a shared step of the core (nlpbench.data.shared)

    def groups(self, params: dict) -> list[TrainGroup]:
        def done(gid: str) -> str:
            return str(rundirs.run_dir(rundirs.RUNS, gid) / "group.json")

        out = [TrainGroup(gid, done(gid), ("babi",)) for gid in mg.all_groups(params)]
        out += [TrainGroup(gid, done(gid)) for gid in mg.game_groups(params)]
        return out

    def _reads(self, params: dict, d: Declared) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(groups, data steps) a declaration reads."""
        kind = d.decl.get("kind", "table")
        if kind in mg.BABI_KINDS:
            from nlpbench.results.notes import referenced_tables      # claims and quoted numbers may read another table
            decls = [d] + [config.declaration(params, "tables", d.source, t) for t in referenced_tables(d.decl, d.name)]
            return tuple(dict.fromkeys(g.group_id for x in decls for g in mg.declaration_groups(params, x).values())), ()
        if kind in ("game", "transcript"):
            return tuple(mg.game_groups(params)), ()
        if kind == "attention":
            source = config.declaration(params, "tables", d.source, d.decl["from"])
            return tuple(g.group_id for g in mg.declaration_groups(params, source).values()), ("babi",)
        if kind == "dof":
            return tuple(gid for gid, g in mg.all_groups(params).items() if g.model == "tmemnn"), ()
        raise ConfigError(f"{d.at('kind')}: unknown memnet kind {kind!r}")

    def targets(self, params: dict) -> list[Target]:
        out = []
        for section in ("tables", "outputs"):
            for d in config.declared(params, section, self.name):
                groups, needs = self._reads(params, d)
                out.append(Target(section, d.source, d.name, _files(d), groups, needs))
        return out

    # -- doing it -----------------------------------------------------------------------------------------

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        raise ConfigError(f"memnet has no data step {step!r}")

    def train(self, group: str, params: dict, paths: Paths, device: str, again: bool = False) -> None:
        babi_groups = mg.all_groups(params)
        if group in babi_groups:
            from nlpbench.memnet.experiments import train_group
            train_group(babi_groups[group], paths.data / "babi", paths.runs, device, again=again)
            return
        if again:
            raise SystemExit(f"nlpbench train --again: {group} is a guess-the-number group; only bAbI groups retrain")
        from nlpbench.memnet.game import train_game_group
        train_game_group(mg.game_groups(params)[group], params, paths.runs, device)

    def retrain(self, group: str, params: dict, paths: Paths, device: str) -> None:
        self.train(group, params, paths, device, again=True)

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        d = config.declaration(params, "tables", source, name)
        if d.decl.get("kind") == "game":
            from nlpbench.memnet.game import game_table_parts
            return game_table_parts(params, name, paths.runs)
        from nlpbench.memnet.experiments import table_parts
        return table_parts(params, d, paths.runs)

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        d = config.declaration(params, "outputs", source, name)
        kind = d.decl["kind"]
        if kind == "attention":
            from nlpbench.memnet.qualitative import attention_table
            return attention_table(params, d, paths.data / "babi", paths.runs, paths.results)
        if kind == "dof":
            from nlpbench.memnet.qualitative import dof_summary
            return dof_summary(params, paths.runs, paths.results)
        if kind == "test_error_figure":
            from nlpbench.memnet.qualitative import test_error_figure
            return test_error_figure(params, d, paths.runs, paths.results)
        if kind == "transcript":
            from nlpbench.memnet.game import write_transcript
            return write_transcript(params, paths.runs, paths.results)
        raise ConfigError(f"{d.at('kind')}: unknown memnet output kind {kind!r}")


MEMNET = MemNetFamily()

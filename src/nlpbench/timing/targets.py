"""The timing benchmarks as pipeline targets, behind the same interface as a family (nlpbench.family).

An output declared with `family: timing` and `measures: <family>` is a benchmark of that family: built only when
asked for by name (`nlpbench output SOURCE NAME`, or its snakemake rule), never by `all`, written under
results/<source>/ like any output. It reads the end-to-end records that name it (pipeline/end-to-end.yaml), so a
new measurement makes it stale. The benchmark modules are imported only when one is built.
"""

from __future__ import annotations

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.family import DataStep, OutputPage, Paths, TableParts, Target, TrainGroup
from nlpbench.timing import records

# measured family -> (what its benchmark writes beside results/<source>/<name>, the data steps it reads)
BENCHMARKS = {
    "memnet": ((".md", ".csv"), ("babi",)),
    "dmn": ((".md",), ("babi",)),
    "squad": ((".md",), ("squad", "squad-vectors")),
    "acvi": ((".md", ".csv"), ("acvi-qg",)),
}
# the benchmarks that time params.yaml's `device` (GPU rows on a GPU); the ACVI benchmark times the CPU, the DMN one
# too but for its runs-together rows (on `device`; not in the GPU check's short budget)
ON_DEVICE = ("memnet", "squad")


class Timing:
    name = "timing"

    def check(self, params: dict) -> None:
        records.load()          # the end-to-end declarations: names and keys

    def data_steps(self, params: dict) -> list[DataStep]:
        return []

    def groups(self, params: dict) -> list[TrainGroup]:
        return []

    def targets(self, params: dict) -> list[Target]:
        measurements, out = records.load(), []
        for d in config.declared(params, "outputs", self.name):
            suffixes, needs = BENCHMARKS[d.decl["measures"]]
            files = tuple(f"{d.source}/{d.name}{s}" for s in suffixes)
            out.append(Target("outputs", d.source, d.name, files, (), needs, bool(d.decl.get("on_demand", True)),
                              records.record_files(d.source, d.name, measurements)))
        return out

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        raise ConfigError(f"the timing benchmarks have no data step {step!r}")

    def train(self, group: str, params: dict, paths: Paths, device: str) -> None:
        raise ConfigError(f"the timing benchmarks train no group ({group!r})")

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        raise ConfigError(f"{source} {name}: a timing benchmark is an output (`nlpbench output {source} {name}`)")

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        d = config.declaration(params, "outputs", source, name)
        measures = d.decl["measures"]
        if measures == "memnet":
            from nlpbench.runtime.provenance import resolve_device
            from nlpbench.timing import memnet
            return memnet.main(params, paths.data / "babi", paths.results / source, d.decl.get("steps", 500),
                               resolve_device(params["device"]))
        if measures == "dmn":
            from nlpbench.timing import dmn
            return dmn.benchmark(params, d.decl, source, name, paths)
        if measures == "squad":
            from nlpbench.timing import squad
            return squad.benchmark(params, d.decl, source, name, paths)
        if measures == "acvi":
            from nlpbench.timing import acvi
            return acvi.benchmark(params, d, paths.data, paths.results)
        raise ConfigError(f"{d.at('measures')}: measures {measures!r} (known: {', '.join(BENCHMARKS)})")


TIMING = Timing()

"""The variational text-generation family (seed 001: VAE, bypass, DED/VED with deterministic or variational
attention) behind nlpbench.family. Data steps prepare each corpus and its word2vec vectors; a group is one seed
of one run (textgen.runs, textgen.seeds); tables 4.2, 5.2, 6.1, 6.2 and the qualitative tables and figures read
them."""

from __future__ import annotations

from nlpbench import config
from nlpbench.config import ConfigError
from nlpbench.family import DataStep, JobSize, OutputPage, Paths, TableParts, Target, TrainGroup, table_files
from nlpbench.textgen import config as tgc
from nlpbench.textgen import groups as tgg


class TextgenFamily:
    name = "textgen"
    # SNLI / QG / dialog vocabularies with 300-d GloVe rows
    job_size = JobSize(mem_mb=4000, paper_mem_mb=16000)

    def check(self, params: dict) -> None:
        tgg.check(params)

    def data_steps(self, params: dict) -> list[DataStep]:
        """Every configured corpus (a step nothing reads is never run by `all`, but `nlpbench data` can)."""
        out = []
        for corpus in sorted(params["textgen"]["corpora"]):
            # the corpus is downloaded and split (light); its word2vec vectors are trained (a job)
            out.append(DataStep(corpus, str(tgc.corpus_dir(params, corpus) / "STATUS.json"), light=True))
            out.append(DataStep(tgc.embeddings_step(corpus), str(tgc.embeddings_path(params, corpus)), (corpus,)))
        return out

    def groups(self, params: dict) -> list[TrainGroup]:
        return [TrainGroup(r.run_id, str(r.run_dir() / "metrics.json"), (r.corpus, tgc.embeddings_step(r.corpus)))
                for runs in tgg.all_runs(params).values() for r in runs]

    def targets(self, params: dict) -> list[Target]:
        out = []
        for d in config.declared(params, "tables", self.name):
            runs = tgg.active(params, tgg.table_runs(params, d.name))
            out.append(Target("tables", d.source, d.name, table_files(d.source, d.name, d.decl),
                              tuple(r.run_id for n in runs for r in tgg.run_seeds(params, n))))
        for d in config.declared(params, "outputs", self.name):
            runs = tgg.active(params, tgg.output_runs(params, d.name))
            corpora = sorted({tgg.make_run(params, n).corpus for n in runs})
            out.append(Target("outputs", d.source, d.name, (tgc.output_file(params, d.name, "").as_posix(),),
                              tuple(r.run_id for n in runs for r in tgg.run_seeds(params, n)), tuple(corpora)))
        return out

    def prepare(self, step: str, params: dict, paths: Paths, mirror: str | None) -> str:
        if step.startswith("embeddings-"):
            from nlpbench.textgen.train import prepare_embeddings
            return f"wrote {prepare_embeddings(params, step.removeprefix('embeddings-'), paths.data, paths.runs)}"
        if step not in params["textgen"]["corpora"]:
            raise ConfigError(f"textgen has no data step {step!r}")
        from nlpbench.data.fetch import resolve_mirror
        from nlpbench.textgen.corpora import CorpusConfig, prepare_corpus
        section = dict(params["textgen"]["corpora"][step])
        for key in ("split_sizes", "mirror_split_sizes", "mirror_split_fractions"):
            if key in section:
                section[key] = tuple(section[key])
        out = tgc.corpus_dir(params, step, paths.data)
        status = prepare_corpus(step, out, resolve_mirror(mirror), config=CorpusConfig(corpus=step, **section))
        return (f"{step} ready in {out}: version {status['version']}, splits "
                f"{ {k: v['examples'] for k, v in status['splits'].items()} }, missing files "
                f"{[m['path'] for m in status['missing_files']] or 'none'}")

    def train(self, group: str, params: dict, paths: Paths, device: str) -> None:
        from nlpbench.textgen.train import train_run
        run = tgg.runs_by_id(params)[group]
        m = train_run(run, params, paths.data, paths.runs, device, log=lambda line: print(line, flush=True))
        print(f"{run.run_id}: MAP BLEU-4 {m['map']['bleu4']:.2f}")

    def table(self, source: str, name: str, params: dict, paths: Paths) -> TableParts:
        from nlpbench.textgen.experiments import table_parts
        return table_parts(params, name, paths.runs)

    def output(self, source: str, name: str, params: dict, paths: Paths) -> OutputPage:
        from nlpbench.textgen.experiments import output
        return output(params, name, paths.data, paths.runs, paths.results)


TEXTGEN = TextgenFamily()

"""The one command line the pipeline rules call: `nlpbench <command> ...`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from nlpbench import config
from nlpbench.data.babi import BabiFormatError, MissingDataError
from nlpbench.data.fetch import FetchError


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise config.ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        key, value = pair.split("=", 1)
        out[key] = yaml.safe_load(value)
    return out


def _params(args) -> dict:
    return config.load(args.params, _overrides(args.set))


def cmd_fetch(args) -> None:
    from nlpbench.data import fetch
    params = _params(args)
    mirror = fetch.resolve_mirror(args.mirror or params.get("mirror"))
    if args.dataset != "babi":   # the text corpora of seed 001 (SNLI, SQuAD QG, Cornell dialogs)
        from nlpbench.textgen.corpora import CorpusConfig, prepare_corpus
        from nlpbench.textgen.config import corpus_dir
        section = dict(params["textgen"]["corpora"][args.dataset])
        for key in ("split_sizes", "mirror_split_sizes"):
            section[key] = tuple(section[key])
        out = corpus_dir(params, args.dataset, args.data)
        status = prepare_corpus(args.dataset, out, mirror, config=CorpusConfig(corpus=args.dataset, **section))
        print(f"{args.dataset} ready in {out}: version {status['version']}, splits "
              f"{ {k: v['examples'] for k, v in status['splits'].items()} }, missing files "
              f"{[m['path'] for m in status['missing_files']] or 'none'}")
        return
    status = fetch.prepare_babi(Path(args.data) / "babi", mirror)
    print(f"bAbI ready in {Path(args.data) / 'babi'}: {len(status['present'])} files, "
          f"{len(status['missing'])} missing ({', '.join(status['missing']) or 'none'})")


def _known(items: dict, name: str, what: str, params: dict):
    """items[name], or a ConfigError that lists the known names of this scale."""
    if name not in items:
        raise config.ConfigError(f"unknown {what} {name!r} for scale {params['scale']}; "
                                 f"known: {', '.join(sorted(items))}")
    return items[name]


def cmd_train_group(args) -> None:
    from nlpbench.memnet.experiments import train_group
    from nlpbench.provenance import resolve_device
    import torch
    params = _params(args)
    groups = config.all_groups(params)
    group = _known(groups, args.group, "group", params)
    if args.threads:
        torch.set_num_threads(args.threads)
    train_group(group, Path(args.data) / "babi", Path(args.runs), resolve_device(params["device"]))


def cmd_table(args) -> None:
    from nlpbench.memnet.experiments import build_table
    params = _params(args)
    if args.experiment not in params["experiments"]:
        raise config.ConfigError(f"{args.params}: experiments: no experiment {args.experiment!r}")
    paths = build_table(params, args.experiment, Path(args.runs), Path(args.results))
    print(f"wrote {paths['md']}")


def cmd_attention(args) -> None:
    from nlpbench.memnet.qualitative import attention_table
    print(f"wrote {attention_table(_params(args), args.table, Path(args.data) / 'babi', Path(args.runs), Path(args.results))}")


def cmd_figure(args) -> None:
    from nlpbench.memnet.qualitative import test_error_figure
    params = _params(args)
    if params["experiments"].get(args.experiment, {}).get("output") != "figure":
        raise config.ConfigError(f"{args.params}: experiments: no figure experiment {args.experiment!r}")
    print(f"wrote {test_error_figure(params, args.experiment, Path(args.runs), Path(args.results))}")


def cmd_dof(args) -> None:
    from nlpbench.memnet.qualitative import dof_summary
    print(f"wrote {dof_summary(_params(args), Path(args.runs), Path(args.results))}")


def cmd_game_train(args) -> None:
    from nlpbench.memnet.game import game_groups, train_game_group
    from nlpbench.provenance import resolve_device
    import torch
    params = _params(args)
    groups = game_groups(params)
    group = _known(groups, args.group, "game group", params)
    if args.threads:
        torch.set_num_threads(args.threads)
    train_game_group(group, params, Path(args.runs), resolve_device(params["device"]))


def cmd_game_table(args) -> None:
    from nlpbench.memnet.game import build_game_table, write_transcript
    params = _params(args)
    if args.table == "18":
        print(f"wrote {write_transcript(params, Path(args.runs), Path(args.results))}")
        return
    if args.table not in params["game"]["ranges"]:
        raise config.ConfigError(f"{args.params}: game.ranges: no table {args.table!r}")
    print(f"wrote {build_game_table(params, args.table, Path(args.runs), Path(args.results))['md']}")


def _textgen_run(params: dict, name: str):
    from nlpbench.textgen.config import all_runs
    runs = all_runs(params)
    by_id = {r.run_id: r for r in runs.values()}
    if name in runs or name in by_id:
        return runs.get(name) or by_id[name]
    raise config.ConfigError(f"unknown textgen run {name!r} for scale {params['scale']}; known: "
                             f"{', '.join(sorted(runs))}")


def cmd_textgen_embed(args) -> None:
    from nlpbench.textgen.train import prepare_embeddings
    print(f"wrote {prepare_embeddings(_params(args), args.corpus, Path(args.data), Path(args.runs))}")


def cmd_textgen_train(args) -> None:
    from nlpbench.provenance import resolve_device
    from nlpbench.textgen.train import train_run
    import torch
    params = _params(args)
    run = _textgen_run(params, args.run)
    if args.threads:
        torch.set_num_threads(args.threads)
    m = train_run(run, params, Path(args.data), Path(args.runs), resolve_device(params["device"]),
                  log=lambda line: print(line, flush=True))
    print(f"{run.run_id}: MAP BLEU-4 {m['map']['bleu4']:.2f}")


def cmd_textgen_table(args) -> None:
    from nlpbench.textgen.experiments import build_table
    params = _params(args)
    if args.table not in params["textgen"]["tables"]:
        raise config.ConfigError(f"{args.params}: textgen.tables: no table {args.table!r}")
    print(f"wrote {build_table(params, args.table, Path(args.runs), Path(args.results))['md']}")


def cmd_textgen_output(args) -> None:
    from nlpbench.textgen.experiments import output
    params = _params(args)
    if args.output not in params["textgen"]["outputs"]:
        raise config.ConfigError(f"{args.params}: textgen.outputs: no output {args.output!r}")
    print(f"wrote {output(params, args.output, Path(args.data), Path(args.runs), Path(args.results))}")


def cmd_dmn_data(args) -> None:
    from nlpbench.dmn.experiments import make_dataset
    params = _params(args)
    make_dataset(args.dataset, params, Path(args.data) / "babi", Path(args.data) / "dmn")


def cmd_dmn_train(args) -> None:
    from nlpbench.dmn.experiments import groups_by_id, train_group
    from nlpbench.provenance import resolve_device
    import torch
    params = _params(args)
    groups = groups_by_id(params)
    group = _known(groups, args.group, "DMN group", params)
    threads = params["dmn"].get("threads") or args.threads   # dmn.threads caps the rule's threads
    if threads:
        torch.set_num_threads(threads)
    train_group(group, Path(args.data) / "babi", Path(args.data) / "dmn", Path(args.runs),
                resolve_device(params["device"]))


def cmd_dmn_table(args) -> None:
    from nlpbench.dmn.experiments import build_table
    params = _params(args)
    if args.table not in params.get("dmn", {}).get("tables", {}):
        raise config.ConfigError(f"{args.params}: dmn.tables: no table {args.table!r}")
    paths = build_table(params, args.table, Path(args.runs), Path(args.results), Path(args.data))
    print(f"wrote {paths['md']}" + (f" and {paths['figure']}" if "figure" in paths else ""))


def cmd_index(args) -> None:
    from nlpbench.results_index import write_index
    write_index(Path(args.results))
    print(f"wrote {Path(args.results) / 'index.csv'} and README.md")


def cmd_bench(args) -> None:
    from nlpbench.memnet import bench
    from nlpbench.provenance import resolve_device
    import torch
    # the benchmark is defined at paper settings (all 20 tasks; Table 2's runs for the projection): --set
    # overrides apply, a scale does not
    params = config.load(args.params, _overrides(args.set) | {"scale": "paper"})
    if args.threads:
        torch.set_num_threads(args.threads)
    bench.main(params, Path(args.data) / "babi", Path(args.out), args.steps,
               resolve_device(args.device or params["device"]))


def cmd_groups(args) -> None:
    from nlpbench.dmn.experiments import all_datasets, groups_by_id
    params = _params(args)
    for gid in sorted(config.all_groups(params)):
        print(gid)
    if "dmn" in params:
        for gid in sorted(groups_by_id(params)):
            print(gid)
        for did in sorted(all_datasets(params)):
            print(f"data/dmn/{did}")


def cmd_check(args) -> None:
    params = _params(args)
    print(f"{args.params}: valid (scale {params['scale']}, {len(config.all_groups(params))} training groups)")


def _threads_option(p: argparse.ArgumentParser) -> None:
    """--threads of every training command (the rules pass their thread count through it)."""
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nlpbench", description=__doc__)
    parser.add_argument("--params", default="params.yaml", help="parameter file (default params.yaml)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a parameter, e.g. --set scale=smoke (repeatable)")
    parser.add_argument("--data", default="data", help="data directory (default data/)")
    parser.add_argument("--runs", default="runs", help="runs directory (default runs/)")
    parser.add_argument("--results", default="results", help="results directory (default results/)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fetch", help="download (or copy from a mirror) and verify a data set")
    p.add_argument("dataset", choices=["babi", "snli", "qg", "dialog"])
    p.add_argument("--mirror", help="offline mirror directory (else params.yaml mirror, else $NLPBENCH_MIRROR)")
    p.set_defaults(func=cmd_fetch)
    p = sub.add_parser("train-group", help="train the runs of one group together")
    p.add_argument("group")
    _threads_option(p)
    p.set_defaults(func=cmd_train_group)
    p = sub.add_parser("table", help="build one experiment's table into results/")
    p.add_argument("experiment")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("attention", help="Tables 3-5: attention per hop of the selected en-1k runs")
    p.add_argument("table", choices=["3", "4", "5"])
    p.set_defaults(func=cmd_attention)
    p = sub.add_parser("figure", help="a figure experiment (Fig. 16: test error per epoch)")
    p.add_argument("experiment")
    p.set_defaults(func=cmd_figure)
    sub.add_parser("dof", help="§6.5.5: fitted dofs of every t-MEM-NN run").set_defaults(func=cmd_dof)
    p = sub.add_parser("game-train", help="train one guess-the-number group and play its test games")
    p.add_argument("group")
    _threads_option(p)
    p.set_defaults(func=cmd_game_train)
    p = sub.add_parser("game-table", help="Tables 16-17 (guess the number) or 18 (a test-game transcript)")
    p.add_argument("table")
    p.set_defaults(func=cmd_game_table)
    p = sub.add_parser("textgen-embed", help="word2vec embeddings of a prepared text corpus (seed 001)")
    p.add_argument("corpus", choices=["snli", "qg", "dialog"])
    p.set_defaults(func=cmd_textgen_embed)
    p = sub.add_parser("textgen-train", help="train and evaluate one text-generation run (textgen.runs)")
    p.add_argument("run", help="run name or run id")
    _threads_option(p)
    p.set_defaults(func=cmd_textgen_train)
    p = sub.add_parser("textgen-table", help="one of Tables 4.2, 5.2, 6.1, 6.2 (key in textgen.tables)")
    p.add_argument("table")
    p.set_defaults(func=cmd_textgen_table)
    p = sub.add_parser("textgen-output", help="a qualitative table or figure of seed 001 (key in textgen.outputs)")
    p.add_argument("output")
    p.set_defaults(func=cmd_textgen_output)
    p = sub.add_parser("dmn-data", help="derive a task-16 data set (fact-order patterns or augmented) into data/dmn/")
    p.add_argument("dataset", help="its id, e.g. patterns-<digest> (see `nlpbench dmn-groups`)")
    p.set_defaults(func=cmd_dmn_data)
    p = sub.add_parser("dmn-train", help="train the runs of one DMN+/MoDMN+/ff-DMN group (Shen ch. 6)")
    p.add_argument("group")
    _threads_option(p)
    p.set_defaults(func=cmd_dmn_train)
    p = sub.add_parser("dmn-table", help="build one of Tables 6.2-6.7 (and its figure) into results/shen-thesis/")
    p.add_argument("table")
    p.set_defaults(func=cmd_dmn_table)
    sub.add_parser("index", help="rewrite results/index.csv and results/README.md").set_defaults(func=cmd_index)
    sub.add_parser("groups", help="list the training groups of the chosen scale").set_defaults(func=cmd_groups)
    sub.add_parser("check", help="validate params.yaml").set_defaults(func=cmd_check)
    p = sub.add_parser("bench", help="timing benchmark of MemN2N / t-MEM-NN: prints the figures and writes "
                                     "timing.md and timing.csv")
    p.add_argument("--steps", type=int, default=500,
                   help="timed training steps per measurement (default 500: a few minutes on 2 CPU cores)")
    p.add_argument("--out", default="results/tolias-thesis", help="output directory (default results/tolias-thesis)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: params.yaml device")
    _threads_option(p)
    p.set_defaults(func=cmd_bench)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (config.ConfigError, FetchError, MissingDataError, BabiFormatError) as e:
        print(f"nlpbench: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

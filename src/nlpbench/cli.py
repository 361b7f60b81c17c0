"""The one command line the pipeline rules call: `nlpbench <command> ...`, written once over the families.

    nlpbench data <step>...              prepare data (bAbI, a text corpus, DMN fact-order patterns, ...)
    nlpbench train <group>               train one group of runs
    nlpbench table <source> <table>      build one table of results/ from its runs
    nlpbench output <source> <name>      build one other output (qualitative table, figure, benchmark)
    nlpbench index                       rewrite results/index.csv and results/README.md
    nlpbench judge [SOURCE/TABLE ...]    judge committed tables again from their stored cells (no retraining)
    nlpbench report [--out PATH]         one HTML page of the index, every table, output and figure
    nlpbench plan | status | check       what the chosen scale builds | what is left, with an ETA | validate
    nlpbench costs                       refresh results/costs.tsv (per-group costs) from a run's benchmark files
    nlpbench end-to-end <name>           time declared tables end to end in a scratch clone (on demand)
    nlpbench verify [SOURCE/TABLE ...]   retrain committed tables in a scratch clone and compare every cell
    nlpbench share pack | pull | restore snapshot data/ and runs/ into share/ for a DVC remote | fetch and check one
                                         from the remote | put a pulled one back
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from nlpbench import config, registry
from nlpbench.data.babi import BabiFormatError, MissingDataError
from nlpbench.data.fetch import FetchError
from nlpbench.family import Paths
from nlpbench.results.report import ReportError
from nlpbench.runtime import job_clock, stop_signals, train_lock
from nlpbench.runtime.checkpoints import LoadError
from nlpbench.runtime.io import InputError, OutputError
from nlpbench.share import ShareError


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise config.ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        key, value = pair.split("=", 1)
        out[key] = config.read_yaml(value, f"--set {key}", "not a YAML value")
    return out


def _params(args, **extra) -> dict:
    """params.yaml with the user's overrides: overrides.yaml (beside it), then --set, then `extra`."""
    return registry.load(args.params, _file_overrides(args) | _overrides(args.set) | extra)


def _file_overrides(args) -> dict:
    path = Path(args.overrides)
    if not path.exists():
        return {}
    data = config.read_yaml(path.read_text(), str(path)) or {}
    if not isinstance(data, dict):
        raise config.ConfigError(f"{path}: expected a mapping of keys to values")
    return data


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr, without the line of source code Python prints under it; a warning of
    another package also says where it comes from."""
    ours = Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent)
    where = "" if ours else f" ({category.__name__}, {filename}:{lineno})"
    print(f"nlpbench: warning: {message}{where}", file=file or sys.stderr)


def _results(args, params: dict, make: bool = True) -> Path:
    """--results, else the chosen scale's folder (config.results_dir: results/ for the committed scale), made
    (with a trial scale's own .gitignore) when `make`: by the commands that write results, never by one that only
    prepares data or trains."""
    if args.results:
        return Path(args.results)
    return config.make_results_dir(config.results_dir(params)) if make else config.results_dir(params)


def _paths(args, params: dict, writes_results: bool = False) -> Paths:
    return Paths(Path(args.data), Path(args.runs), _results(args, params, make=writes_results))


def _threads(args) -> None:
    """The CPU setup of the commands that train or time models: freed memory kept for reuse (allocator.py),
    and --threads."""
    from nlpbench.runtime.allocator import keep_freed_memory
    keep_freed_memory()
    if getattr(args, "threads", 0):
        import torch
        torch.set_num_threads(args.threads)


def _known(items: dict, name: str, what: str, params: dict):
    """items[name], or a ConfigError that lists the known names of this scale."""
    if name not in items:
        raise config.ConfigError(f"unknown {what} {name!r} for scale {params['scale']}; "
                                 f"known: {', '.join(sorted(items)) or 'none'}")
    return items[name]


def cmd_data(args) -> None:
    from nlpbench import plan, registry
    from nlpbench.data import shared
    params = _params(args)
    p = plan.make(params)
    steps = {**shared.SHARED_STEPS, **p.data}
    mirror = args.mirror or params.get("mirror")
    if args.all == bool(args.steps):
        raise config.ConfigError("data: name the steps (`nlpbench plan` lists them) or pass --all, not both")
    for step in (in_order(p.data) if args.all else args.steps):
        _known(steps, step, "data step", params)
        owner = p.owner.get(step, "core")
        if owner == "core":
            print(shared.prepare(step, Path(args.data), mirror))
        else:
            print(registry.get(owner).prepare(step, params, _paths(args, params), mirror))


def in_order(data: dict) -> list[str]:
    """Every data step of a plan, each after the steps it reads."""
    done: list[str] = []

    def visit(step: str) -> None:
        if step in done or step not in data:
            return
        for need in data[step].needs:
            visit(need)
        done.append(step)
    for step in data:
        visit(step)
    return done


def cmd_train(args) -> None:
    from nlpbench import plan, registry
    from nlpbench.runtime.provenance import resolve_device
    params = _params(args)
    p = plan.make(params)
    _known(p.groups, args.group, "training group", params)
    _threads(args)
    family = registry.get(p.owner[args.group])
    if args.again and not hasattr(family, "retrain"):
        raise SystemExit(f"nlpbench train --again: family {p.owner[args.group]} cannot retrain a finished group")
    train = family.retrain if args.again else family.train
    clock = job_clock.clock_path(Path(args.logs), args.group)
    with train_lock.held(Path(args.logs), args.group):    # one trainer per group: a second one stops here
        if args.again:
            clock.unlink(missing_ok=True)                # trained again from the start: timed afresh
        with job_clock.JobClock(clock) as timed:
            timed.take_over(train(args.group, params, _paths(args, params), resolve_device(params["device"])))


def cmd_table(args) -> None:
    from nlpbench.results import build
    params = _params(args)
    paths = _paths(args, params, writes_results=True)
    out = build.table(params, args.source, args.table, paths, allow_empty=args.allow_empty)
    print("wrote " + ", ".join(str(v) for v in out.values()) + " (`nlpbench index` refreshes the index)")


def cmd_output(args) -> None:
    from nlpbench.results import build
    params = _params(args)
    d = config.declaration(params, "outputs", args.source, args.name)
    if d.decl.get("at_scale", params["scale"]) != params["scale"]:   # e.g. the benchmark: defined at paper scale
        params = _params(args, scale=d.decl["at_scale"])
    _threads(args)
    written = build.output(params, args.source, args.name, _paths(args, params, writes_results=True))
    print("wrote " + ", ".join(str(v) for v in written))


def cmd_judge(args) -> None:
    from nlpbench.results import rejudge
    from nlpbench.results.results_index import write_index
    params = _params(args)
    results = _results(args, params)
    judged = rejudge.judge_all(Path(args.params), params, results, args.tables or None, force=args.force)
    for source, name, old, new in judged:
        print(f"{source}/{name}: {new}" + ("" if new == old else f" (was: {old})"))
    write_index(results)
    print(f"wrote {results / 'index.csv'} and README.md")


def cmd_index(args) -> None:
    from nlpbench.results.results_index import write_index
    results = _results(args, _params(args))
    write_index(results)
    print(f"wrote {results / 'index.csv'} and README.md")


def cmd_report(args) -> None:
    from nlpbench.results.report import write_report
    results = _results(args, _params(args))
    out = Path(args.out) if args.out else results / "report.html"
    print(f"wrote {write_report(results, out)}")


def cmd_plan(args) -> None:
    from nlpbench import plan, status
    from nlpbench.runtime.provenance import resolve_device
    params = _params(args)
    p = plan.make(params)
    print(f"scale {params['scale']}: {len(p.data)} data steps, {len(p.groups)} training groups, "
          f"{len(p.targets)} tables and outputs")
    device = resolve_device(params["device"])
    for line in status.parts_eta(params, p, device):
        print(line)
    for what, items in (("data", p.data), ("train", p.groups), ("target", p.targets)):
        for key in items:
            print(f"{what}\t{p.owner[key]}\t{key}")


def cmd_status(args) -> None:
    from nlpbench import plan, status
    from nlpbench.runtime.provenance import resolve_device
    params = _params(args)
    print(status.report(params, plan.make(params), resolve_device(params["device"]), args.cores))


def cmd_costs(args) -> None:
    from nlpbench import plan, status
    from nlpbench.runtime.provenance import device_label, resolve_device
    params = _params(args)
    path = config.make_results_dir(_results(args, params)) / status.COSTS.name
    n = status.refresh_costs(plan.make(params), params["scale"],
                             device_label(resolve_device(params["device"]), args.threads), Path(args.logs), path)
    print(f"{path}: {n} group cost(s) refreshed from {args.logs}/*.benchmark.tsv")


def cmd_check(args) -> None:
    from nlpbench import plan
    params = _params(args)
    p = plan.make(params)
    print(f"{args.params}: valid (scale {params['scale']}, {len(p.groups)} training groups, "
          f"{len(p.targets)} tables and outputs)")


def cmd_end_to_end(args) -> None:
    from nlpbench.timing import end_to_end
    params = _params(args)
    if args.compare:
        end_to_end.compare_again(params, args.name, Path(args.compare), _results(args, params), Path(args.runs),
                                 repo=Path.cwd())
        return
    with stop_signals.raised():          # a signal stops snakemake's jobs and deletes the scratch clone
        end_to_end.measure(params, args.name, Path.cwd(), _results(args, params), Path(args.runs), Path(args.logs),
                           keep_runs=Path(args.keep_runs) if args.keep_runs else None)


def cmd_verify(args) -> int:
    from nlpbench import verify
    if args.tolerance < 0:
        raise config.ConfigError(f"--tolerance {args.tolerance:g}: must be 0 (exact) or more")
    with stop_signals.raised():          # a signal stops snakemake's jobs and deletes the scratch clone
        return verify.verify(_params(args), Path.cwd(), Path(args.logs), args.tables, args.sample, args.seed,
                             args.tolerance, args.max_minutes, args.cores)


def cmd_share(args) -> None:
    from nlpbench import share
    data, runs = Path(args.data), Path(args.runs)
    if args.action == "pack":
        counts = share.pack(data, runs)
        print(f"{share.SNAPSHOT}/: {counts['data']} files of {data}/ and {counts['runs']} of {runs}/ "
              "(push them with `dvc push`)")
        return
    if args.action == "pull":
        from nlpbench import share_pull
        files = share_pull.pull(Path.cwd(), remote=args.remote)
        print(f"{share.SNAPSHOT}/: {files} files pulled and checked (put them into {data}/ and {runs}/ with "
              "`nlpbench share restore`)")
        return
    done = share.restore(data, runs)
    print(f"{len(done['restored'])} files restored into {data}/ and {runs}/ from {share.SNAPSHOT}/, "
          f"{len(done['same'])} already there")
    if done["kept"]:
        print(f"kept your own version of {len(done['kept'])} files that differ from the pulled ones: "
              + ", ".join(str(p) for p in done["kept"][:10]) + (" ..." if len(done["kept"]) > 10 else ""),
              file=sys.stderr)


def _threads_option(p: argparse.ArgumentParser) -> None:
    """--threads of the commands that train or time models (the rules pass their thread count through it)."""
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nlpbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="parameter file (default params.yaml)")
    parser.add_argument("--overrides", default="overrides.yaml",
                        help="file of overrides applied before --set (default overrides.yaml, if present)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a parameter, e.g. --set scale=smoke (repeatable)")
    parser.add_argument("--data", default="data", help="data directory (default data/)")
    parser.add_argument("--runs", default="runs", help="runs directory (default runs/)")
    parser.add_argument("--results", help="results directory (default results/ at params.yaml's committed_scale, "
                                           "results/<scale>/ at any other)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("data", help="prepare data steps: download (or copy from a mirror), verify, derive")
    p.add_argument("steps", nargs="*", metavar="step", help="a step id (`nlpbench plan` lists them), e.g. babi")
    p.add_argument("--all", action="store_true",
                   help="every data step of the chosen scale (at --set scale=paper: every paper-scale download)")
    p.add_argument("--mirror", help="offline mirror directory (else params.yaml mirror, else $NLPBENCH_MIRROR)")
    p.set_defaults(func=cmd_data)
    p = sub.add_parser("train", help="train the runs of one group (`nlpbench plan` lists them)")
    p.add_argument("group")
    p.add_argument("--again", action="store_true",
                   help="train every run again, finished ones included (e.g. to record a metric added since); "
                        "only families with a retrain accept it")
    p.add_argument("--logs", default=str(job_clock.TRAIN_LOGS),
                   help="where the job keeps its time over all its attempts, <group>.clock.json beside Snakemake's "
                        "benchmark file (a killed job resumed goes on counting; `nlpbench costs` reads it), and "
                        "<group>.lock, held while it trains (a second trainer of the group stops at once)")
    _threads_option(p)
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("table", help="build one table into results/<source>/")
    p.add_argument("source", help="e.g. tolias-thesis")
    p.add_argument("table", help="e.g. 2")
    p.add_argument("--allow-empty", action="store_true",
                   help="write the table even when none of its runs exists (it replaces an existing one)")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("output", help="build one other output (qualitative table, figure, transcript, benchmark)")
    p.add_argument("source")
    p.add_argument("name")
    _threads_option(p)
    p.set_defaults(func=cmd_output)
    sub.add_parser("index", help="rewrite results/index.csv and results/README.md").set_defaults(func=cmd_index)
    p = sub.add_parser("judge", help="judge committed tables again from their stored cells (after a change of the "
                                     "judging rule, a unit, an epsilon or a claim): no retraining")
    p.add_argument("tables", nargs="*", metavar="SOURCE/TABLE", help="e.g. tolias-thesis/2 (default: every one)")
    p.add_argument("--force", action="store_true",
                   help="overwrite a table's CSV that was edited by hand (without it, nothing is written then)")
    p.set_defaults(func=cmd_judge)
    p = sub.add_parser("report", help="write one self-contained HTML page of results/: the index, then every table "
                                      "and output it links, with their figures")
    p.add_argument("--out", metavar="PATH", help="where to write it (default results/report.html)")
    p.set_defaults(func=cmd_report)
    sub.add_parser("plan", help="list the data steps, groups and targets of the chosen scale").set_defaults(
        func=cmd_plan)
    p = sub.add_parser("status", help="groups trained and to train per family and table, and the ETA")
    p.add_argument("--cores", type=int, default=0, help="training jobs side by side on a CPU (default: every core)")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("costs", help="refresh results/costs.tsv from the benchmark files of a pipeline run")
    p.add_argument("--logs", default=str(job_clock.TRAIN_LOGS),
                   help="where the rules' benchmark files and the jobs' clocks are (default logs/train)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of each CPU training job, for the device label (default 1, as the pipeline)")
    p.set_defaults(func=cmd_costs)
    sub.add_parser("check", help="validate params.yaml").set_defaults(func=cmd_check)
    p = sub.add_parser("end-to-end", help="time a declared set of tables end to end, built by snakemake in a "
                                          "scratch clone of this commit from no data and no runs (declared in "
                                          "pipeline/end-to-end.yaml)")
    p.add_argument("name", help="e.g. ch6-five-seeds")
    p.add_argument("--logs", default="logs", help="where snakemake's log goes (default logs/end-to-end/NAME.log)")
    p.add_argument("--keep-runs", metavar="DIR",
                   help="move the clone's runs/ to DIR instead of deleting them (DIR must not exist)")
    p.add_argument("--compare", metavar="DIR",
                   help="measure nothing: compare the runs kept in DIR with runs/ again and rewrite the record's "
                        "comparison")
    p.set_defaults(func=cmd_end_to_end)
    p = sub.add_parser("verify", help="retrain committed tables from no runs in a scratch clone of HEAD and compare "
                                      "every cell with the committed CSV (exit 1 when some differ)")
    p.add_argument("tables", nargs="*", metavar="SOURCE/TABLE", help="e.g. shen-thesis/6.2 (else --sample)")
    p.add_argument("--sample", type=int, metavar="N",
                   help="draw N tables at random, spread over the families, among those that train in at most "
                        "--max-minutes of jobs by results/costs.tsv")
    p.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    p.add_argument("--max-minutes", type=float, default=15.0,
                   help="the job-minutes a drawn table may take at most (default 15)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="largest |difference| of two numbers that still agree (default 0: exactly as written)")
    p.add_argument("--cores", type=int, default=1, help="snakemake's cores in the clone (default 1)")
    p.add_argument("--logs", default="logs", help="where snakemake's log and the rebuilt CSVs go (logs/verify/)")
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("share", help="pack: snapshot data/ and runs/ into share/ for `dvc push` (the `share` stage "
                                     "of dvc.yaml); pull: fetch share/ from the DVC remote and check it before DVC "
                                     "writes it out; restore: put share/ back into data/ and runs/")
    p.add_argument("action", choices=("pack", "pull", "restore"))
    p.add_argument("--remote", help="pull: the DVC remote to fetch from (default: the one .dvc/config names)")
    p.set_defaults(func=cmd_share)
    args = parser.parse_args(argv)
    from nlpbench.runtime.provenance import code_commit
    code_commit()                      # the commit of the code this process loaded, fixed before it runs
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = args.func(args)
    except stop_signals.Stopped as e:  # verify, end-to-end: their snakemake is stopped, their clone deleted
        return stop_signals.report(f"nlpbench {args.command}", e)
    except BrokenPipeError:            # `nlpbench plan | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (config.ConfigError, FetchError, MissingDataError, BabiFormatError, InputError, OutputError, LoadError,
            ReportError, ShareError, train_lock.GroupBeingTrained) as e:
        print(f"nlpbench: {e}", file=sys.stderr)
        return 2
    return code or 0


if __name__ == "__main__":
    sys.exit(main())

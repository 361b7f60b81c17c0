"""Guess-the-number (Tolias thesis §6.6, Tables 16-18): MemN2N and t-MEM-NN trained on simulated games,
then playing 100 fixed test games against the teacher.

One group per (model, training size): its runs are the two number ranges x seeds, trained together in one
vectorised pass (equal training-set sizes). Each run writes the memory-network outputs (model.pt,
metrics.json, ...) plus its test-game transcripts; the tables read those.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from nlpbench.data import babi
from nlpbench.family import OutputPage, TableParts
from nlpbench.memnet import guess_number as gn
from nlpbench.memnet.data import tensors_from_samples
from nlpbench.memnet.groups import GameGroup, game_groups
from nlpbench.results import tables
from nlpbench.runtime import io, rundirs
from nlpbench.memnet.experiments import (checkpointed_runs, execution_provenance, execution_record, save_run,
                                        select_run, train_together)
from nlpbench.memnet.predict import RunPredictor
from nlpbench.memnet.train import Run
from nlpbench.runtime.provenance import code_commit, device_label

COLUMNS = {"Baseline / MemN2N": ("memn2n", 1), "t-MEM-NN / 1 sample": ("tmemnn", 1),
           "t-MEM-NN / 10 samples": ("tmemnn", 10)}
VAL_METRIC = {("memn2n", 1): "point", ("tmemnn", 1): "S1", ("tmemnn", 10): "S10"}   # the validation accuracy read
SIZE_LABEL = {100: "100", 1000: "1k", 10000: "10k"}
METRICS = {"accuracy": "Accuracy", "success": "Success", "rounds": "Rounds"}
COUNTED = {"states": "a training size counts states; 10% are held out for validation",
           "games": ("a training size counts whole games (`example_unit: games`), each giving all its states; 10% "
                     "of the games are held out for validation")}


def example_unit(game: dict) -> str:
    """What a training size counts (memnet.game.example_unit): "states" (A-7, the default) or "games"."""
    return game.get("example_unit", "states")


def training_split(lo: int, hi: int, n_examples: int, game: dict) -> tuple[list, list]:
    """Training examples of simulated games split train/validation (A-7: 90/10). `memnet.game.example_unit`:
    "states" holds out 10% of the states; "games" counts whole games and holds out 10% of the games with all
    their states."""
    n_val = max(1, round(game["val_fraction"] * n_examples))
    if example_unit(game) == "games":
        games = gn.simulated_games(lo, hi, game["data_seed"], game["max_tries"])
        train, val = babi.train_val_split([next(games) for _ in range(n_examples)], n_val, game["data_seed"])
        return [s for g in train for s in g], [s for g in val for s in g]
    samples = gn.training_samples(lo, hi, n_examples, seed=game["data_seed"], max_tries=game["max_tries"])
    return babi.train_val_split(samples, n_val, game["data_seed"])


def game_data(lo: int, hi: int, n_examples: int, game: dict, memory_size: int):
    """The training split above, plus held-out states of other games as the 'test' split (a state-level check;
    the tables use the test games)."""
    train, val = training_split(lo, hi, n_examples, game)
    held_out = gn.training_samples(lo, hi, 1000, seed=game["data_seed"] + 10_000, max_tries=game["max_tries"])
    return tensors_from_samples(f"game:{lo}-{hi}:{n_examples}", {"train": train, "val": val, "test": held_out},
                                memory_size, vocab=gn.vocab(lo, hi))


def play(run_dir: Path, lo: int, hi: int, S: int, game: dict, device: str = "cpu") -> list[list[gn.Round]]:
    """The run plays the fixed test games; its guess is the argmax over the number tokens of the S-sample
    averaged prediction (§6.6)."""
    pred = RunPredictor(run_dir, device)
    numbers = gn.number_tokens(lo, hi)
    ids = torch.tensor([pred.vocab.stoi[t] for t in numbers])

    def policy(games: list[gn.Game]) -> list[int]:
        samples = [gn.state_sample(g, None, "test game") for g in games]
        probs, _ = pred.predict(samples, S=S, seed=game["play_seed"])
        return [int(numbers[i]) for i in probs[:, ids].argmax(-1).tolist()]

    targets = gn.test_targets(lo, hi, game["test_games"])
    return gn.play_games(policy, targets, lo, hi, game["max_tries"])


def _rounds_json(transcript: list[gn.Round]) -> list[dict]:
    return [r.__dict__ for r in transcript]


def train_game_group(group: GameGroup, params: dict, runs_root: Path, device: str = "cpu",
                     log: Callable[[str], None] = print) -> dict:
    game, s = params["memnet"]["game"], group.settings
    summary_path = rundirs.run_dir(runs_root, group.group_id) / "group.json"
    checkpoint = rundirs.run_dir(runs_root, group.group_id) / "_checkpoint.pt"
    resumed = checkpointed_runs(checkpoint)
    datasets, runs, pending = [], [], []
    for table, lo, hi in group.ranges:
        data = game_data(lo, hi, group.train_size, game, s["model"]["memory_size"])
        datasets.append(data)
        for seed in group.seeds:
            run_dir = group.run_dir(runs_root, lo, hi, seed)
            run_id = f"{group.group_id}/{run_dir.name}"
            if run_id not in resumed and (run_dir / "games.json").exists():
                continue
            runs.append(Run(run_id, len(datasets) - 1, seed))
            pending.append((lo, hi, seed, run_dir, data))
    wall = 0.0
    if runs:
        trainer, metrics, wall = train_together(group.group_id, group.model, s, runs, datasets, checkpoint, device,
                                                log)
        for k, ((lo, hi, seed, run_dir, data), m) in enumerate(zip(pending, metrics)):
            m.update({"range": [lo, hi], "train_size": group.train_size, "model": group.model,
                      "device": device_label(device), "group_wall_time_s": wall} | execution_record(trainer, k))
            save_run(trainer, k, run_dir, data, m, {"group": group.group_id, "model": group.model, "range": [lo, hi],
                                                     "train_size": group.train_size, "seed": seed, "settings": s,
                                                     "game": game})
        checkpoint.unlink(missing_ok=True)
        for lo, hi, seed, run_dir, _ in pending:
            samples = (1,) if group.model == "memn2n" else tuple(sorted(s["bayes"]["test_samples"]))
            games = {}
            for S in samples:
                transcripts = play(run_dir, lo, hi, S, game, device)
                games[f"S{S}"] = {"metrics": gn.game_metrics(transcripts),
                                  "transcripts": [_rounds_json(t) for t in transcripts]}
                log(f"{run_dir.name} S={S}: {games[f'S{S}']['metrics']}")
            io.write_json(run_dir / "games.json", games)
    summary = {"group": group.group_id, "model": group.model, "train_size": group.train_size,
               "device": device_label(device), "wall_time_s": wall, "trained_now": len(runs),
               "code_commit": code_commit()}
    io.write_json(summary_path, summary)
    return summary


def _run_json(group: GameGroup, runs_root: Path, lo: int, hi: int, seed: int, name: str) -> dict | None:
    """One JSON file of a run's directory (metrics.json, games.json), or None before the run wrote it."""
    path = group.run_dir(runs_root, lo, hi, seed) / name
    return io.read_json(path) if path.exists() else None


def chosen_run(group: GameGroup, runs_root: Path, lo: int, hi: int, model: str, S: int,
               tie_break: str) -> tuple[dict, dict[int, dict]] | None:
    """(the chosen run's metrics, {seed: its test games' metrics}) of one column: the seed with the best validation
    accuracy (held-out training states, never the test games; ties as `memnet.tie_break`), as Table 2 chooses;
    None before any seed of the group has played its test games."""
    runs = {}
    for seed in group.seeds:
        metrics, games = (_run_json(group, runs_root, lo, hi, seed, n) for n in ("metrics.json", "games.json"))
        if metrics is not None and games is not None:
            runs[seed] = (metrics, games[f"S{S}" if model == "tmemnn" else "S1"]["metrics"])
    if not runs:
        return None
    chosen = select_run([m for m, _ in runs.values()], VAL_METRIC[(model, S)], tie_break)
    return chosen, {seed: g for seed, (_, g) in runs.items()}


def game_table_parts(params: dict, table: str, runs_root: Path) -> TableParts:
    """Table 16 (range 0-10) or 17 (0-100): Accuracy / Success / Rounds per training size and column."""
    game = params["memnet"]["game"]
    lo, hi = game["ranges"][table]
    groups = game_groups(params)
    seeds = game["seeds"]
    rows = [f"{SIZE_LABEL.get(n, str(n))} / {label}" for n in game["train_sizes"] for label in METRICS.values()]
    spec = tables.spec_from_home("tolias-thesis", table, {}, rows, COLUMNS)
    cells, wall, devices, commits, reads, hop_kernels, kernels = [], 0.0, set(), set(), set(), set(), set()
    for g in groups.values():
        for column, (model, S) in COLUMNS.items():
            found = chosen_run(g, runs_root, lo, hi, model, S, params["memnet"]["tie_break"]) \
                if model == g.model else None
            if found is None:
                continue
            chosen, by_seed = found
            m = by_seed[chosen["seed"]]
            size = SIZE_LABEL.get(g.train_size, str(g.train_size))
            why = (f"seed {chosen['seed']} chosen by validation ({100 * chosen['val_acc'][VAL_METRIC[(model, S)]]:.1f})"
                   if len(by_seed) > 1 else "")
            for key, label in METRICS.items():
                value = m[key]
                ok = value == value   # NaN rounds: no game won
                spread = {s: v[key] for s, v in by_seed.items() if v[key] == v[key]}
                won = f"{m['n_success']} of {m['n_games']} games won" if key == "rounds" else ""
                cells.append(tables.Cell(f"{size} / {label}", column, value if ok else None, "ok" if ok else "failed",
                                         "; ".join(x for x in (why, won) if x),
                                         seeds=spread if len(spread) > 1 else None))
        path = rundirs.run_dir(runs_root, g.group_id) / "group.json"
        if path.exists():
            summary = io.read_json(path)
            wall += summary["wall_time_s"]
            devices.add(summary["device"])
            commits.add(summary.get("code_commit", "unknown"))
        metrics = _run_json(g, runs_root, lo, hi, seeds[0], "metrics.json")
        if metrics is not None:      # runs trained before game runs recorded the execution keys: "not recorded"
            reads.add(metrics.get("memory_read", "not recorded"))
            hop_kernels.add(metrics.get("hop_kernels", "not recorded"))
            if g.model == "tmemnn":
                kernels.add(metrics.get("posterior_kernels", "not recorded"))
    provenance = {"scale": params["scale"],
                  "code commit": code_commit() + (f" (runs trained at {', '.join(sorted(commits))})" if commits else ""),
                  "device": ", ".join(sorted(devices)) or "none (nothing trained)",
                  **execution_provenance(reads, hop_kernels, kernels),
                  "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "torch": torch.__version__,
                  "training wall time": f"{wall / 60:.1f} min ({len(groups)} groups, both ranges)",
                  "runs": ", ".join(str(rundirs.run_dir(rundirs.RUNS, g)) for g in groups)}
    notes = [
        f"Scale `{params['scale']}`, {len(seeds)} training seed(s) per cell ({', '.join(map(str, seeds))}); a cell "
        "reports the seed with the best validation accuracy on held-out training states for its column (ties: "
        f"`memnet.tie_break: {params['memnet']['tie_break']}`), with the range over the seeds beside it. "
        f"{game['test_games']} fixed test games (targets uniform in "
        f"{lo}-{hi}, seed {gn.TEST_SEED}), at most {game['max_tries']} guesses each. Model settings as Table 2 "
        "(3 hops, delta 20, the memnet section of params.yaml).",
        "Reading A-7 (§6.6): a training example is one game state (the history of guesses and hints as facts, "
        "'range lo hi' first, query 'next guess') labelled with the next move of a student that guesses uniformly "
        f"inside the current bounds; {COUNTED[example_unit(game)]}. The model's "
        "guess is the argmax over the number tokens of the S-sample averaged prediction.",
        "Accuracy: the mean over games of in-bound guesses / guesses (%); Success: % of games won within the "
        "limit; Rounds: mean guesses of the won games (lower is better). A uniform in-bound student needs "
        "2(1+1/n)H_n - 3 guesses on average: 3.59 for n = 11 and 7.5 for n = 101.",
    ]
    return TableParts(spec, cells, provenance, notes)


def write_transcript(params: dict, runs_root: Path, results_dir: Path) -> OutputPage:
    """Table 18: one test game of t-MEM-NN (range 0-100, 1k training examples) in the thesis's format."""
    game = params["memnet"]["game"]
    t = game["transcript"]
    lo, hi = game["ranges"][t["range_table"]]
    group = next(g for g in game_groups(params).values() if g.model == t["model"] and g.train_size == t["train_size"])
    found = chosen_run(group, runs_root, lo, hi, t["model"], t["samples"], params["memnet"]["tie_break"])
    games = None if found is None else _run_json(group, runs_root, lo, hi, found[0]["seed"], "games.json")
    if games is None:
        raise FileNotFoundError(f"{rundirs.run_dir(runs_root, group.group_id)}: no test games yet "
                                "(train the group first)")
    rounds = [gn.Round(**r) for r in games[f"S{t['samples']}"]["transcripts"][t["game"]]]
    name = "t-MEM-NN" if t["model"] == "tmemnn" else "MemN2N"
    text = gn.format_transcript(rounds, name, lo, hi, t["train_size"])
    header = (f"# Table 18: sample output of the guess-the-number game (reproduced)\n\nTest game #{t['game']} of "
              f"{rundirs.run_dir(rundirs.RUNS, group.group_id)} (seed {found[0]['seed']}, chosen by validation as in Table "
              f"{t['range_table']}), S = {t['samples']}, scale `{params['scale']}`, "
              f"code commit {code_commit()}. The "
              "thesis's game (target 57, 8 rounds, accuracy 0.75) is replayed exactly by the package's tests "
              "(tests/test_guess_number.py); this one is our model's.\n\n")
    out = Path(results_dir) / "tolias-thesis" / "18.md"
    io.write_text(out, header + text)
    return OutputPage("Table 18: a t-MEM-NN test game of guess-the-number (range 0-100)", "transcript", ("18.md",),
                      "generated")

# Guess-the-number (seed 000 §6.6): simulated training games, one vectorised group per (model, training
# size) over both number ranges, then the test games; Tables 16-17 and the Table 18 transcript.

from nlpbench.game_experiments import game_groups

GAME_GROUPS = game_groups(PARAMS) if "game" in PARAMS else {}
GAME_TABLES = sorted(PARAMS["game"]["ranges"]) + ["18"] if "game" in PARAMS else []


rule train_game_group:
    output:
        "runs/{game_group}/group.json",
    wildcard_constraints:
        game_group="game-.*",
    log:
        "logs/train/{game_group}.log",
    benchmark:
        "logs/train/{game_group}.benchmark.tsv"
    threads: TRAIN_THREADS
    resources:
        gpu=TRAIN_GPU,
    shell:
        "nlpbench {SET} game-train {wildcards.game_group} --threads {threads} > {log} 2>&1"


rule game_table:
    input:
        [f"runs/{gid}/group.json" for gid in GAME_GROUPS],
    output:
        md="results/tolias-thesis/{game_table}.md",
        done=QUAL_DONE.replace("{name}", "game-{game_table}"),
    wildcard_constraints:
        game_table="|".join(GAME_TABLES) or "^$",
    log:
        "logs/table/tolias-thesis-{game_table}.log",
    shell:
        "nlpbench {SET} game-table {wildcards.game_table} > {log} 2>&1 && date -u > {output.done}"

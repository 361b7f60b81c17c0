#!/usr/bin/env bash
# Snakemake runs this inside the new conda environment, from its copy in the conda prefix, in the directory it runs
# in (the clone, where the Snakefile is): nlpbench itself, editable (its dependencies came from the lock).
set -euo pipefail
grep -qs '^name = "nlpbench"$' pyproject.toml ||
  { echo "nlpbench: $PWD holds no nlpbench pyproject.toml: run snakemake --sdm conda in the clone's directory" >&2; exit 1; }
python -m pip install --quiet --no-deps -e "$PWD"

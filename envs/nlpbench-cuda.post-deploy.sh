#!/usr/bin/env bash
# Snakemake runs this inside the new conda environment: nlpbench itself (its dependencies came from the lock).
set -euo pipefail
python -m pip install --quiet --no-deps -e "$(cd "$(dirname "$0")/.." && pwd)"

#!/usr/bin/env bash
# `make test-clone`: clone this repository's committed state into an empty temporary folder and run the
# tests that need no cards, no appliance and no browser there, with the environment given as $1 (a venv)
# linked in. Nothing beside the clone: the corpus-layer tests must skip (and say why), everything else
# must pass on what the repository carries.
set -euo pipefail
venv="${1:?usage: clone_check.sh /path/to/venv}"
here="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git clone --quiet "$here" "$scratch/quartet"
cd "$scratch/quartet"
ln -s "$venv" .venv
echo "test-clone: $(git log -1 --format='%h %s' | cut -c1-80) in $scratch/quartet"
.venv/bin/python -m pytest -q -rs -p no:cacheprovider -m "not cards and not appliance and not browser"

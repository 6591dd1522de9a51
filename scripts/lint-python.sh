#!/usr/bin/env bash
# The Python's lint: pyflakes' checks (unused imports and variables, undefined names, ...) through
# flake8 (`--select F`: no style rules; Biome has no Python support), over every tracked .py file.
# flake8 comes from Debian (apt-get install flake8): the machines reach no Python package index.
set -euo pipefail
cd "$(dirname "$0")/.."
for py in python3 /usr/bin/python3; do
  if "$py" -m flake8 --version >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.py')
    exec "$py" -m flake8 --select F "${files[@]}"
  fi
done
echo "lint-python: flake8 is not installed (Debian: apt-get install flake8)" >&2
exit 2

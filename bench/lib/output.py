"""The end of a Python bench script, as bench/lib/output.js is of a JavaScript one: its JSON written
(folder made, indented, a newline at the end, a line saying where).

A script run as `python3 bench/x/y.py` puts this folder on its path first:
    sys.path.insert(0, os.path.join(REPO, "bench", "lib"))"""

from __future__ import annotations

import json
import os
import sys


def write_json(path, doc, indent=2, log=None):
    """Writes `doc` as JSON indented by `indent` to `path`, making its folder, and says so on `log`
    (stdout unless given)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=indent)
        f.write("\n")
    print(f"wrote {path}", file=log or sys.stdout)

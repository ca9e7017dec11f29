"""Entry point of a process in a trainer's venv: `python -I child.py SIDE_FILE FUNCTION ARGS RESULT`.

Runs with `-I` (isolated: no PYTHONPATH, no user site, not even this checkout on sys.path), so the
trainer's venv is all it has; this file needs only the standard library. It imports the side
module by file path, calls `FUNCTION(**ARGS)` and writes `{"value": ...}` or `{"error": ...}` as
JSON. The side modules' folder goes on sys.path for their shared helpers.
Warnings are not turned into errors here: these are the trainers' own code paths as users run
them, with whatever they warn about.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path


def main(side_file: str, function: str, args_file: str, result_file: str) -> int:
    sys.path.insert(0, str(Path(side_file).parent))  # the side modules' shared helpers (this folder only)
    spec = importlib.util.spec_from_file_location("trainer_side", side_file)
    assert spec is not None and spec.loader is not None
    side = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(side)
    try:
        outcome = {"value": getattr(side, function)(**json.loads(Path(args_file).read_text()))}
    except Exception as err:  # reported to the test, which fails with it
        outcome = {"error": {"type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err),
                             "traceback": traceback.format_exc()}}
    Path(result_file).write_text(json.dumps(outcome, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

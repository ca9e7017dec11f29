"""Run the local hub: `python tests/hub_server ...` (a directory) or `python -m tests.hub_server ...`."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__:
    from .cli import main
else:  # run as a directory: make the package importable by its own name
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hub_server.cli import main

sys.exit(main())

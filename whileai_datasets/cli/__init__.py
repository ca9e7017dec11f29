"""The ``whileai-datasets`` console command: one module per command, one entry point."""

from __future__ import annotations

from whileai_datasets.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

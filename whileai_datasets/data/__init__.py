"""Bundled sample data (read with importlib.resources)."""

__all__: list[str] = []  # bundled files, no public name

"""Bundled sample data (read with importlib.resources)."""

"""Chat templates shipped with the package, one per file (read with importlib.resources)."""

__all__: list[str] = []

"""What a template does, found by rendering probe conversations rather than by reading its source.

``probes`` (the probe set and the expected span of each assistant turn) and
``refusals`` (one exception class per reason a template cannot be patched) under
``analysis`` (expected spans per probe) and ``trace`` (which code wrote which
characters), under ``classifier`` (guard and classifier templates).
"""

__all__: list[str] = []

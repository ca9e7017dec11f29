"""Parse and run untrusted template code: the sandboxed environment, the render budget, source offsets.

Floors, lowest first: ``budget`` (how much one render may take), ``guards`` (size checks
before a string or list is built), ``environment`` (the ``ImmutableSandboxedEnvironment``
with transformers' globals), ``source`` (the parsed template with character offsets).
"""

__all__: list[str] = []

"""Private Arrow and JSON kernels that the transforms, tokenization, export and hub stages share.

Nothing here is public API: flattened list columns and their offsets, JSON text
in and out of Arrow, JSONL line scanning, content parts, tool-call arguments, and
*portable* tables (built-in feature types only, loadable without this package).
Every module is ``_private``; the public names live in ``transforms``.
"""

__all__: list[str] = []

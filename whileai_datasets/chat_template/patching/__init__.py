"""Add ``{% generation %}`` blocks to a template that has none, proven byte-identical on every probe.

``edits`` (text edits that keep Jinja's whitespace behaviour), ``plan`` (what each
output unit wraps), ``repair`` (output-preserving rewrites), ``prompt_split`` (spans
whose start moves with the turn), under ``patch`` (the whole patch and its verification).
"""

__all__: list[str] = []

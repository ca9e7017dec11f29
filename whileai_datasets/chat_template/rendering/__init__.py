"""One render of a chat template, with the character span of every message and generation block.

``spans`` (the position markers and their decoder) under ``render`` (compile a marked
copy of the AST, render, decode).
"""

__all__: list[str] = []

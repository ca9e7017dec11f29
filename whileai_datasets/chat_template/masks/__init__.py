"""How a template's rows get supervised spans, and the check that no row gets a wrong one.

``mask_check`` (a row's supervised text checked against its messages) under ``turns``
(per-turn rendering, the exact fallback) under ``masking`` (the method, chosen once per
template: the template's own blocks, a patch, or turn by turn).
"""

__all__: list[str] = []

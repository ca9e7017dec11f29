"""Column-wise transforms over canonical whileai rows, for ``Dataset.map``.

Each transform takes a batch (a ``pyarrow.Table`` under
``ds.with_format("arrow")``, else the dict of lists ``datasets`` passes) and
returns the same kind, computed with ``pyarrow.compute`` over the flattened
message columns::

    from whileai_datasets import transforms as wai_transforms

    ds = ds.with_format("arrow")
    ds = ds.map(wai_transforms.strip_think, batched=True)
    ds = ds.map(wai_transforms.truncate_tool_output(200), batched=True)
    ds = ds.map(wai_transforms.unroll, batched=True)
    ds = ds.map(wai_transforms.anonymize(key=KEY), batched=True)   # secrets out, people pseudonymized
    ds = ds.map(wai_transforms.to_trl("completion"), batched=True)
    ds = ds.map(wai_transforms.tokenize(tokenizer), batched=True)   # token-level masks

Every transform is a frozen dataclass instance, so ``datasets`` hashes it
deterministically (the cache hits on a second run) and ``num_proc`` pickles it.
Under plain formatting a transform gets and returns a dict of lists, except
that the wire shapes hand ``Dataset.map`` a table: ``datasets`` merges a
returned dict with the input columns (a dropped column would stay) and infers
types from Python values (TRL's argument values would lose their feature).
``IterableDataset.map`` merges dicts the same way: pass
``remove_columns=ds.column_names`` with a wire shape there.
"""

from __future__ import annotations

from whileai_datasets.columnar._types import TrlMessage
from whileai_datasets.tokenize import Tokenize, tokenize
from whileai_datasets.transforms.anonymizing import Anonymize, anonymize
from whileai_datasets.transforms.gates import leak_report, tool_call_roundtrip
from whileai_datasets.transforms.groups import stamp_groups
from whileai_datasets.transforms.masks import LossMask, loss_mask
from whileai_datasets.transforms.think import StripThink, strip_think
from whileai_datasets.transforms.tool_output import TruncateToolOutput, truncate_tool_output
from whileai_datasets.transforms.unrolling import Unroll, unroll
from whileai_datasets.transforms.wire import ToFireworks, ToOpenAI, ToTrl, to_fireworks, to_openai, to_trl

__all__ = [
    "Anonymize",
    "LossMask",
    "StripThink",
    "ToFireworks",
    "ToOpenAI",
    "ToTrl",
    "Tokenize",
    "TrlMessage",
    "TruncateToolOutput",
    "Unroll",
    "anonymize",
    "leak_report",
    "loss_mask",
    "stamp_groups",
    "strip_think",
    "to_fireworks",
    "to_openai",
    "to_trl",
    "tokenize",
    "tool_call_roundtrip",
    "truncate_tool_output",
    "unroll",
]

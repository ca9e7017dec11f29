"""The canonical schema: one place that says what every column is.

Rows of every shape whileai writes are normalized into these columns by the
``whileai/export`` builder, and every transform reads and writes them.

* ``messages``: ``message_feature()``: typed structs (role, content, tool calls
  with JSON-text arguments, tool_call_id, name) plus ``extra``, a Json object
  holding any other per-message key, so nothing is lost. Built-in feature types
  only, so the rows load without this package; ``ds[i]`` shows every field (null
  where the message had no such key), and what is handed to a template drops
  those nulls (see ``whileai_datasets.rows.features``).
* ``loss_mask``: one int8 per message, 1 where the message carries loss.
* ``tools``: the tool schemas, heterogeneous JSON, so ``Json()``.
* whileai's carried keys (``_CARRY_KEYS`` in ``whileai.simulations.export``):
  scalars typed, nested values ``Json()``. A null means the row did not carry
  the key, which is how whileai writes them (it carries a key only when it is
  not None).
* ``SOURCE_KEYS``: what the source row held that later steps need but whileai's
  training rows do not carry (``rollout_index`` for unroll lineage,
  ``finish_reason`` for the export warning). Wire shapes drop them.

``privileged`` (what only the grader saw) is never a column of training rows.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from datasets import Features, Json, List, Value

from whileai_datasets.rows.features import message_feature

MESSAGES = "messages"
LOSS_MASK = "loss_mask"
TOOLS = "tools"

#: whileai's carried keys, in whileai's order, with their feature types.
#: The order is the order whileai writes them; a JSONL writer keeps it.
CARRY_FEATURES: dict[str, Any] = {
    "reward": Value("float64"),
    "qwen_reward": Value("float64"),
    "reason": Value("string"),
    "prompt": Value("string"),
    "scenario_id": Value("string"),
    "world_state": Value("string"),
    "faults": Json(),
    "fault_detected": Value("bool"),
    "label_source": Value("string"),
    "failure_class": Value("string"),
    "judge_status": Value("string"),
    "judge_name": Value("string"),
    "lineage": Json(),
    "logprob": Value("float64"),
    "n_tokens": Value("int64"),
    "token_logprobs": List(Value("float64")),
    "sampling": Json(),
    "policy_version": Value("string"),
    "writer_model": Value("string"),
    "user_model": Value("string"),
    "usage": Json(),
    "tier": Value("string"),
    "ask_family": Value("string"),
    "ask": Value("string"),
    "stance": Value("string"),
    "tone": Value("string"),
    "texture": Value("string"),
    "vagueness": Value("string"),
    "phrasing": Value("string"),
    "pressure": Value("string"),
    "user": Value("string"),
    "history": Value("string"),
    "length": Value("string"),
    "intent_known": Value("bool"),
    "tool_known": Value("bool"),
}
CARRY_KEYS: tuple[str, ...] = tuple(CARRY_FEATURES)

#: Kept from the source row for later steps; never written to a wire row.
SOURCE_FEATURES: dict[str, Any] = {
    "rollout_index": Value("int64"),
    "finish_reason": Value("string"),
}
SOURCE_KEYS: tuple[str, ...] = tuple(SOURCE_FEATURES)

#: The training-row columns (config ``default``).
EXPORT_FEATURES = Features(
    {
        MESSAGES: message_feature(),
        LOSS_MASK: List(Value("int8")),
        TOOLS: Json(),
        **CARRY_FEATURES,
        **SOURCE_FEATURES,
    }
)

#: What a row read from an agent's session log (``whileai_datasets.sessions``) says of where it came from: the agent,
#: the session, the file, which conversation of the session it is (``main``, ``sidechain:<id>``,
#: ``branch:<leaf>``, ``pre-compaction:<n>``), where its tool schemas came from (``session``, ``agent_table``,
#: ``inferred``) and the counts of what was read but not trained. Columns only of datasets that hold a session.
SESSION_FEATURES: dict[str, Any] = {
    "agent": Value("string"),
    "session_id": Value("string"),
    "source_file": Value("string"),
    "conversation": Value("string"),
    "tools_source": Value("string"),
    "session_notes": Json(),
}
SESSION_KEYS: tuple[str, ...] = tuple(SESSION_FEATURES)

#: The training-row columns of a dataset that holds agent sessions.
SESSION_EXPORT_FEATURES = Features({**EXPORT_FEATURES, **SESSION_FEATURES})

#: whileai's ``_PAIR_KEYS``: pair metadata that survives a preference export.
PAIR_FEATURES: dict[str, Any] = {
    "tie": Value("bool"),
    "pairwise": Json(),
    "first_turn_differs": Value("bool"),
    "chosen_score": Value("float64"),
    "rejected_score": Value("float64"),
    "margin": Value("float64"),
    "chosen_model": Value("string"),
    "rejected_model": Value("string"),
    "same_policy": Value("bool"),
    "length_delta": Value("int64"),
    "chosen_reason": Value("string"),
    "rejected_reason": Value("string"),
    "rejected_failure_class": Value("string"),
    "lineage": Json(),
}
PAIR_KEYS: tuple[str, ...] = tuple(PAIR_FEATURES)

#: The preference columns (config ``preference``): whole conversations per side.
PREFERENCE_FEATURES = Features(
    {
        "prompt": Json(),
        "chosen": message_feature(),
        "rejected": message_feature(),
        TOOLS: Json(),
        **PAIR_FEATURES,
    }
)

#: Row keys whose JSON type ``row-v1.json`` fixes to a scalar; config ``raw``
#: types them, keeps every other key as Json.
RAW_SCALAR_FEATURES: dict[str, Any] = {
    "schema_version": Value("string"),
    "prompt": Value("string"),
    "final_text": Value("string"),
    "scenario_id": Value("string"),
    "spec_id": Value("string"),
    "world_state": Value("string"),
    "rollout_index": Value("int64"),
    "model_version": Value("string"),
    "reward": Value("float64"),
    "reason": Value("string"),
    "label_source": Value("string"),
    "judge_name": Value("string"),
    "judge_status": Value("string"),
    "failure_class": Value("string"),
    "finish_reason": Value("string"),
    "policy_version": Value("string"),
    "writer_model": Value("string"),
    "user_model": Value("string"),
}

#: The raw columns (config ``raw``): the scalars above, every other key in
#: ``extra`` as one Json object per row, ``line`` and ``file`` for provenance.
RAW_FEATURES = Features(
    {
        **RAW_SCALAR_FEATURES,
        "extra": Json(),
        "source_file": Value("string"),
        "source_line": Value("int64"),
    }
)


def arrow_schema(features: Features) -> pa.Schema:
    """The Arrow schema of ``features`` (metadata included, for ``table_cast``)."""
    return features.arrow_schema

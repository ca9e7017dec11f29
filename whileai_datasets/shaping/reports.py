"""The exporters' reports: whileai's keys, values and warning texts, counted on Arrow.

The texts are whileai's own (a report is compared key by key with whileai's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import TrainingOptions
from whileai_datasets.columnar import _arrow
from whileai_datasets.shaping.loss_facts import row_flags
from whileai_datasets.transforms import gates, tool_output, wire

PASS_THRESHOLD = 0.5
TRL_MASK_EVERY_TOKEN = (
    "TRL trains on every token of every turn (trl 0.19.1 SFTTrainer reads no "
    "per-message mask); set assistant_only_loss=True in SFTConfig to train the "
    "assistant turns only, which needs a chat template with a {% generation %} "
    "block (Qwen2.5-Instruct has none)"
)
TRL_MASK_COMPLETION = (
    "TRL trains on the last assistant turn only: prompt/completion rows, from "
    "which trl 0.19.1 SFTTrainer builds completion_mask (completion_only_loss "
    "defaults on)"
)
_LEAK_KEYS = ("checked", "n_checked", "n_leaked", "leaked", "summary")


class TrainingStats:
    """``export_dataset``'s report, counted chunk by chunk over the rows it writes."""

    def __init__(self, options: TrainingOptions) -> None:
        self.options = options
        self.roundtrip = gates.Roundtrip(options.format)
        self.n = self.before = self.with_system = self.with_tools = 0
        self.truncated = self.chars_cut = self.trained = self.masked = 0
        self.n_pass = self.n_fail = 0
        self.without_loss = 0  # rows with messages and no assistant turn (the mask marks none of them)
        self.group_ids: set[str] = set()

    def add(self, rows: pa.Table, before: int) -> None:
        """Count ``rows`` (the report rows of one chunk; ``before`` rows went in)."""
        self.before += before
        self.roundtrip.add_table(rows, self.n)
        self.n += rows.num_rows
        turns = gates.turn_columns(rows)
        if turns == ["messages"]:
            flags = row_flags(_arrow.column(rows, "messages"))
            self.without_loss += int((flags["only_system"] | flags["no_assistant"]).sum())
        if turns:
            self.with_system += first_role_count(_arrow.column(rows, turns[0]), "system")
        if "tools" in rows.column_names:
            self.with_tools += present_count(wire.truthy_json(_arrow.column(rows, "tools")))
        if "group_id" in rows.column_names:
            self.group_ids.update(x for x in pc.unique(_arrow.column(rows, "group_id")).to_pylist() if x is not None)
        self.truncated += column_sum(rows, tool_output.TRUNCATED)
        self.chars_cut += column_sum(rows, tool_output.CHARS_CUT)
        if "reward" in rows.column_names:
            reward = np.asarray(pc.fill_null(_arrow.column(rows, "reward"), np.nan).to_numpy(zero_copy_only=False))
            self.n_pass += int((reward >= PASS_THRESHOLD).sum())
            self.n_fail += int((reward < PASS_THRESHOLD).sum())
        if self.options.format == "trl":
            if "completion" in rows.column_names:
                self.trained += int(_arrow.lengths(_arrow.column(rows, "completion")).sum())
                self.masked += int(_arrow.lengths(_arrow.column(rows, "prompt")).sum())
            else:
                self.trained += int(_arrow.lengths(_arrow.column(rows, "messages")).sum())
        else:
            mask = _arrow.flat(_arrow.column(rows, "loss_mask")).to_numpy(zero_copy_only=False)
            self.trained += int(np.count_nonzero(mask))
            self.masked += int(len(mask) - np.count_nonzero(mask))

    def report(self, leaks: dict[str, Any], keys: pa.Table, n_raw: int) -> dict[str, Any]:
        options = self.options
        fmt, unroll, mode = options.format, options.unroll, options.mask_mode
        if fmt == "trl":
            mask_line = TRL_MASK_COMPLETION if unroll or mode == "final" else TRL_MASK_EVERY_TOKEN
        else:
            mask_line = "final (unrolled)" if unroll else mode
        report: dict[str, Any] = {
            "n": self.n,
            "format": fmt,
            "with_system": self.with_system,
            "with_tools": self.with_tools,
            "groups": len(self.group_ids),
            "tool_call_roundtrip": self.roundtrip.report(),
            "mask_mode": mask_line,
            "unrolled": unroll,
            "max_tool_output_chars": options.max_tool_output_chars,
            "tool_output_truncated": self.truncated,
            "tool_output_chars_cut": self.chars_cut,
            "trained_messages": self.trained,
            "masked_messages": self.masked,
            "privileged_leaks": {k: leaks[k] for k in _LEAK_KEYS},
            "rewards": {"n_pass": self.n_pass, "n_fail": self.n_fail, "n_ungraded": self.n - self.n_pass - self.n_fail},
        }
        warnings = self._warnings(leaks, keys, n_raw)
        dropped = self.before - self.n
        if dropped:
            report["no_completion_dropped"] = dropped
            warnings.append(
                f"{dropped} of {self.before} rows have no assistant turn and "
                "were dropped: a TRL prompt/completion row needs a completion."
            )
        if warnings:
            report["warnings"] = warnings
        if self.without_loss + max(dropped, 0):  # not whileai's: shaping.loss_facts
            report["rows_without_loss"] = self.without_loss + max(dropped, 0)
        return report

    def _warnings(self, leaks: dict[str, Any], keys: pa.Table, n_raw: int) -> list[str]:
        warnings = []
        if leaks["n_leaked"]:
            warnings.append(
                f"{leaks['n_leaked']} of {leaks['n_checked']} rows quote their own privileged "
                "context in an assistant turn and are exported anyway (validate=False); "
                "report['privileged_leaks']['leaked'] names them."
            )
        n_cut = 0
        if "finish_reason" in keys.column_names:
            n_cut = int(pc.sum(pc.equal(_arrow.column(keys, "finish_reason"), "length")).as_py() or 0)
        if n_cut:
            warnings.append(
                f"{n_cut} of {n_raw} rows were cut by the reply token cap (finish_reason "
                "'length') and are exported as SFT targets; a model trained on them learns to "
                "stop mid-thought. Filter on finish_reason == 'stop' or raise agent_max_tokens=."
            )
        if self.n_fail:
            warnings.append(
                f"{self.n_fail} of {self.n} rows have reward below 0.5 and are exported as "
                "SFT targets; a model trained on them learns the failure. Pass "
                "`scored.passes()` (or filter on reward) unless that is intended."
            )
        return warnings


def pair_stats(report: dict[str, Any], rows: pa.Table, n_written: int) -> None:
    """``export_preference``'s length confound, identical first turns and mean margin."""
    deltas = column_values(rows, "length_delta")
    if deltas:
        longer = sum(1 for d in deltas if d > 0)
        n = len(deltas)
        report["chosen_longer_frac"] = round(longer / n, 3)
        if (n >= 8 and longer / n >= 0.75) or (n >= 3 and longer == n):
            report["warnings"] = [
                f"chosen is the longer reply in {longer}/{n} pairs; a preference "
                "trainer learns length before behavior (Lambert 2025, chapter Direct Alignment)"
            ]
    differs = _arrow.optional(rows, "first_turn_differs", pa.bool_())
    identical = int(pc.sum(pc.equal(differs, False)).as_py() or 0)
    if identical:
        report["first_turn_identical"] = identical
        report.setdefault("warnings", []).append(
            f"{identical}/{n_written} pairs have identical first assistant turns (same opening tool call "
            "or line); their contrast is later in the rollout. The hosted DPO trainer compares "
            f"first turns only and will drop them, leaving {n_written - identical} (it needs at least 8). Keep "
            "[p for p in pairs if p['first_turn_differs']] to see what it will train on, or "
            "export_preference(pairs) for a trainer that reads whole conversations."
        )
    margins = column_values(rows, "margin")
    if margins:
        report["mean_margin"] = round(sum(margins) / len(margins), 4)


def first_role_count(lists: pa.Array, role: str) -> int:
    """Rows whose first message has ``role``."""
    lens = _arrow.lengths(lists)
    has = lens > 0
    if not has.any():
        return 0
    starts = _arrow.offsets_of(lens)[:-1][has]
    roles = pc.struct_field(_arrow.flat(lists), "role").take(pa.array(starts))
    return int(_arrow.to_numpy_bool(pc.equal(roles, role)).sum())


def present_count(values: pa.Array) -> int:
    """Non-null values (a dictionary array counts its indices' values)."""
    if pa.types.is_dictionary(values.type):
        valid = values.dictionary.is_valid().to_numpy(zero_copy_only=False)
        index = pc.drop_null(values.indices).to_numpy(zero_copy_only=False)
        return int(np.count_nonzero(valid[index]))
    return int(len(values) - values.null_count)


def column_sum(rows: pa.Table, name: str) -> int:
    if name not in rows.column_names:
        return 0
    return int(pc.sum(_arrow.column(rows, name)).as_py() or 0)


def column_values(rows: pa.Table, name: str) -> list[Any]:
    """Non-null values of a column, as Python values (summed in Python, as whileai does)."""
    if name not in rows.column_names:
        return []
    return [v for v in _arrow.column(rows, name).to_pylist() if v is not None]

"""``publish_rollouts``: whileai rollouts to a private Hub repo, on either engine.

What ``whileai-datasets push ROLLOUTS REPO_ID`` publishes, from Python: the rollouts read by the
``whileai/export`` builder (any row shape), shaped with the export's options (``<think>`` blocks stripped,
tool output cut), split by group when asked, and published by ``whileai_datasets.publish``. With
``engine="ray"`` the Ray engine reads and shapes the rows and builds the shards in its workers, and the
driver makes the one commit (``ray_engine.publish_rollouts``): the repo is the same.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any

from whileai_datasets import _compat, _storage, option_names
from whileai_datasets._options import TrainingOptions, check_choice
from whileai_datasets._typing import Engine, MaskMode, OnBadRow, SecretsPolicy
from whileai_datasets.errors import PublishError
from whileai_datasets.export.exporters import refuse_on_ray
from whileai_datasets.hub import HoldOut, publish
from whileai_datasets.hub.publishing import PublishResult
from whileai_datasets.privacy.gate import check_policy
from whileai_datasets.transforms.think import strip_think as strip_think_blocks
from whileai_datasets.transforms.tool_output import truncate_tool_output

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def publish_rollouts(
    source: Paths,
    repo_id: str,
    *,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    mask_mode: MaskMode = "assistant",
    strip_think: bool = True,
    max_tool_output_chars: int | None = None,
    split_key: str | None = None,
    test_size: float | int = 0.1,
    seed: int = 0,
    names: tuple[str, str] = ("train", "holdout"),
    private: bool = True,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    on_bad_row: OnBadRow | None = None,
    filesystem: Any = None,
    engine: Engine = "local",
    secrets: SecretsPolicy = "refuse",
) -> PublishResult:
    """Publish whileai rollouts (any row shape) to the private dataset repo `repo_id`, as
    ``whileai-datasets push`` does: the configs a trainer loads by name, with a card.

    Args:
        source: Rollout files: a path, a glob (``runs/*.jsonl``), a list of them, or a URI
            (``s3://bucket/run.jsonl``, read through `filesystem`).
        repo_id, private, token, revision, commit_message, secrets: As ``publish`` (a secret in the rows stops
            the publish before any upload unless ``secrets="redact"`` or ``"allow"``).
        system_prompt, tools, mask_mode: As the ``whileai/export`` builder's.
        strip_think, max_tool_output_chars: As ``export_dataset``'s (``<think>`` blocks stripped by
            default, as whileai exports).
        split_key, test_size, seed, names: Hold out whole groups of `split_key` (``split_by``); without
            `split_key`, one split "train".
        on_bad_row: As the builder's: ``"raise"`` (None, the default) stops at an unreadable row,
            ``"skip"`` leaves it out (local engine only).
        filesystem: A ``pyarrow.fs`` or ``fsspec`` filesystem for URI sources.
        engine: ``"local"`` (``load_dataset`` and ``publish`` in this process) or ``"ray"``: Ray's workers
            read the rows and write the shards, on the runtime ``ray.init`` connected to (a local one
            otherwise); the repo is the same (``ray_engine.publish_rollouts``, whose block sizes and
            staging folder are the engine's own knobs).
    Returns:
        ``publish``'s result: ``repo_id``, ``url``, ``commit``, ``splits``, ``configs``, ``trainers``, ...
    Raises:
        OptionError: an option has a value it cannot take, or one the Ray engine does not take.
        PublishError: no rollout file matches `source`, or as ``publish``.
        ExportFormatError: a row cannot be read (``on_bad_row="raise"``).
        UnsupportedVersionError: ``engine="ray"`` without Ray Data installed.
    Example:
        >>> publish_rollouts("runs/*.jsonl", "me/rollouts", system_prompt=SYSTEM,
        ...                  split_key="scenario_id", engine="ray")  # doctest: +SKIP
    """
    options = TrainingOptions.whileai_export(system_prompt=system_prompt, tools=tools, mask_mode=mask_mode,
                                             strip_think=strip_think, max_tool_output_chars=max_tool_output_chars)
    check_policy(secrets)
    hold_out = HoldOut(split_key, test_size=test_size, seed=seed, names=names) if split_key else None
    if check_choice(engine, "engine", Engine) == "ray":
        refuse_on_ray({"on_bad_row": on_bad_row})
        _compat.require_ray(option_names.spell("engine", "ray"))
        from whileai_datasets.ray_engine.publish import publish_rollouts as publish_on_ray

        return publish_on_ray(source, repo_id, options, hold_out=hold_out, private=private, token=token,
                              revision=revision, commit_message=commit_message, filesystem=filesystem,
                              secrets=secrets)
    files = rollout_files(source, filesystem)
    rows = rollout_rows(files, options, on_bad_row=on_bad_row)
    return publish(hold_out.split(rows) if hold_out else rows, repo_id, private=private, token=token,
                   revision=revision, commit_message=commit_message, sources=files, split_key=split_key,
                   secrets=secrets)


def rollout_files(source: Paths, filesystem: Any = None) -> list[str]:
    """The files `source` names, globs expanded in name order; an object (``s3://...``) becomes a local copy."""
    given = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    files: list[str] = []
    for item in given:
        text = os.fspath(item)
        if _storage.is_uri(text):
            files.append(_storage.local_copy(text, filesystem))
        elif glob.has_magic(text):
            files += sorted(glob.glob(text))
        else:
            files.append(text)
    missing = [path for path in files if not os.path.isfile(path)]
    if not files or missing:
        raise PublishError("no rollout file found" if not files else "a rollout file does not exist",
                           location=missing[0] if missing else os.fspath(given[0]) if given else "source",
                           hint="Pass whileai rollout files (.jsonl, .json, .parquet, optionally compressed): "
                                "a path, a glob or a list of them.")
    return files


def rollout_rows(files: Sequence[str], options: TrainingOptions, *, on_bad_row: OnBadRow | None = None) -> Any:
    """Rollout `files` as the canonical rows a push publishes: read by the ``whileai/export`` builder with
    `options`' system prompt, tools and mask, then shaped as the export shapes them (think, tool output)."""
    from datasets import load_dataset

    from whileai_datasets.builders import registry

    registry.register()  # idempotent; load_dataset("whileai/export") needs it
    given = {"system_prompt": options.system_prompt, "tools": list(options.tools) if options.tools else None,
             "mask_mode": options.mask_mode, "on_bad_row": on_bad_row}
    ds = load_dataset("whileai/export", data_files=list(files), split="train",
                      **{key: value for key, value in given.items() if value is not None})
    ds = ds.with_format("arrow")
    if options.strip_think:
        ds = ds.map(strip_think_blocks, batched=True, desc="strip_think")
    if options.max_tool_output_chars is not None:
        ds = ds.map(truncate_tool_output(options.max_tool_output_chars), batched=True, desc="truncate_tool_output")
    return ds.with_format(None)

"""The dataset card `publish` writes: datasets' YAML plus a body from templates/dataset_card.md.

The YAML `configs` (data files per split) and `dataset_info` (features and rows per config) blocks
are built by `hub.layout` with `datasets`' own serialiser, from built-in feature types only; this
module adds provenance under `whileai_datasets` and renders the readable body: per config what a
trainer trains on it and how to load it into TRL (`hub.card_configs`). Everything the body says is
computed here as plain strings; the template only lays them out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from huggingface_hub import DatasetCard, DatasetCardData

from whileai_datasets import _storage
from whileai_datasets.columnar._portable import registered_feature_types
from whileai_datasets.errors import PublishError
from whileai_datasets.hub.card_configs import config_views
from whileai_datasets.hub.card_trainers import trainer_views
from whileai_datasets.hub.configs import Config

CARD_TEMPLATE = "dataset_card.md"
CARD_TAG = "whileai"

#: What each non-TRL `mask_mode` of whileai's export report means for the `loss_mask` column.
#: (For format "trl", whileai already writes a sentence saying what TRL trains on; it is shown as is.)
MASK_MEANINGS = {
    "assistant": "every assistant message is a target (`loss_mask` 1); system, user and tool messages are "
    "context (`loss_mask` 0)",
    "final": "only the last assistant message of each row is a target; earlier turns are context",
    "final (unrolled)": "rows are unrolled, one per assistant turn, and only the last assistant message of "
    "each row is a target",
}
MASK_COLUMN_NOTE = ("The mask is the per-message `loss_mask` column: it only applies if the training code reads it.")


@dataclass(frozen=True)
class SourceFile:
    """A file the rows were made from, by name (not full path: the card is shared) and sha256."""

    name: str
    size: int
    sha256: str


def hash_sources(paths: Iterable[str | os.PathLike[str]], *, filesystem: Any = None) -> list[SourceFile]:
    """sha256 of each file; a directory contributes each file under it, named relative to it; an object
    (``s3://bucket/key``) is read through ``_storage`` (``filesystem``, or its scheme's default)."""
    found: list[SourceFile] = []
    for raw in paths:
        if _storage.is_uri(raw):
            with _storage.open_input(os.fspath(raw), filesystem) as handle:
                found.append(_hash_stream(handle, os.fspath(raw).rsplit("/", 1)[-1]))
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            found += [_hash_file(p, f"{path.name}/{p.relative_to(path).as_posix()}") for p in files]
        elif path.is_file():
            found.append(_hash_file(path, path.name))
        else:
            raise PublishError("the source file to hash does not exist", location=str(path),
                               hint="Pass sources= with the files the rows were exported from")
    return found


def _hash_file(path: Path, name: str) -> SourceFile:
    with path.open("rb") as fh:
        return _hash_stream(fh, name)


def _hash_stream(handle: Any, name: str) -> SourceFile:
    digest = hashlib.sha256()
    size = 0
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
        size += len(block)
    return SourceFile(name=name, size=size, sha256=digest.hexdigest())


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shaped the rows; never guessed."""
    versions = {"whileai": _version("whileai") or "not installed",
                "whileai-datasets": _version("whileai-datasets") or _own_version()}
    for name in ("datasets", "huggingface_hub", "pyarrow"):
        versions[name] = _version(name) or "not installed"
    return versions


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _own_version() -> str:
    """The source tree's version (`whileai_datasets._version`), for a package that is not installed."""
    from whileai_datasets import _version

    return _version.__version__


def describe_mask(report: Mapping[str, Any]) -> str:
    mode = report.get("mask_mode")
    if not isinstance(mode, str):
        return "The export report does not say which mask was applied."
    if report.get("format") == "trl" or mode not in MASK_MEANINGS:
        return mode[0].upper() + mode[1:] + ("" if mode.endswith(".") else ".")
    return f"`{mode}`: {MASK_MEANINGS[mode]}. {MASK_COLUMN_NOTE}"


def _supervised(report: Mapping[str, Any]) -> str:
    trained, masked = report.get("trained_messages"), report.get("masked_messages")
    if not isinstance(trained, int) or not isinstance(masked, int):
        return "not in the export report"
    total = trained + masked
    share = f" ({100 * trained / total:.1f}%)" if total else ""
    return f"{trained} of {total} messages{share} are trained on; {masked} are context only"


def _tool_output(report: Mapping[str, Any]) -> str:
    cut, chars, limit = (report.get(k) for k in ("tool_output_truncated", "tool_output_chars_cut",
                                                 "max_tool_output_chars"))
    if not cut:
        return "not truncated" + ("" if limit is None else f" (limit {limit} characters per message)")
    return f"{_count(cut, 'tool message')} cut to {limit} characters, {_count(chars, 'character')} removed in total"


def _count(n: object, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _groups(report: Mapping[str, Any]) -> str:
    groups = report.get("groups")
    if not groups:
        return "no `group_id` in the rows"
    return f"{groups} distinct `group_id` values"


def _cell(value: object) -> str:
    """Text that stays inside one Markdown table cell."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fence(*texts: str) -> str:
    """A code fence longer than any backtick run in `texts`, so the block cannot end early."""
    longest = max((len(run) for text in texts for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _report_view(report: Mapping[str, Any] | None, rows: int) -> dict[str, Any] | None:
    if report is None:
        return None
    full = json.dumps(report, indent=2, sort_keys=True, default=str)
    n = report.get("n")
    return {
        "format": report.get("format", "not in the report"),
        "mask": describe_mask(report),
        "supervised": _supervised(report),
        "tool_output": _tool_output(report),
        "groups": _groups(report),
        "rows": f"{n} rows in the export, {rows} published" if isinstance(n, int) and n != rows else None,
        "warnings": [" ".join(str(w).split()) for w in report.get("warnings") or []],
        "json": full,
        "fence": _fence(full),
    }


def _yaml_block(report: Mapping[str, Any] | None, sources: Sequence[SourceFile], split_key: str | None,
                versions: Mapping[str, str]) -> dict[str, Any]:
    block: dict[str, Any] = {"version": versions["whileai-datasets"], "whileai": versions["whileai"],
                             "split_key": split_key}
    if report is not None:
        block["export"] = {k: report[k] for k in ("format", "mask_mode", "trained_messages", "masked_messages",
                                                  "groups") if k in report}
    block["sources"] = [{"name": s.name, "sha256": s.sha256} for s in sources]
    return block


def _card_template() -> str:
    try:
        return resources.files("whileai_datasets.templates").joinpath(CARD_TEMPLATE).read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise PublishError(f"the dataset card template is not installed ({err})",
                           location=f"whileai_datasets.templates/{CARD_TEMPLATE}",
                           hint="Install the package (pip install -e . in a checkout) so templates/ is found") from err


def render_card(base: DatasetCardData, *, repo_id: str, private: bool, configs: Sequence[Config],
                report: Mapping[str, Any] | None = None, sources: Sequence[SourceFile] = (),
                split_key: str | None = None, split_groups: Mapping[str, int] | None = None,
                versions: Mapping[str, str] | None = None, tokenizer: Any = None,
                chat_template: Any = None, trainers: Mapping[str, Mapping[str, Any]] | None = None,
                privacy: Mapping[str, Any] | None = None) -> DatasetCard:
    """The card for `repo_id`. `base` holds the YAML `configs` and `dataset_info` (kept as is);
    `trainers` is publish's per-trainer report (``trainer_gaps.trainer_report``)."""
    for config in configs:
        registered = registered_feature_types(config.features)
        if registered:
            raise PublishError(f"the {config.name!r} config still names feature types that only a plugin "
                               f"defines: {sorted(registered)}", location=f"config {config.name!r}",
                               hint="Publish canonical rows; publish converts message structs to Json itself")
    versions = dict(versions or package_versions())
    data = DatasetCardData(**base.to_dict())  # type: ignore[no-untyped-call]
    tags = list(data.get("tags") or [])
    data["tags"] = tags if CARD_TAG in tags else [*tags, CARD_TAG]
    if not data.get("pretty_name"):
        data["pretty_name"] = repo_id.split("/")[-1]
    data["whileai_datasets"] = _yaml_block(report, sources, split_key, versions)
    if privacy is not None:  # what the secrets scan found and did (`privacy.gate.card_view`)
        data["whileai_datasets"]["privacy"] = privacy["yaml"]
    views = config_views(configs, repo_id=repo_id, private=private, tokenizer=tokenizer, template=chat_template)
    default_rows = dict(configs[0].rows)
    template = _card_template()
    card: DatasetCard = DatasetCard.from_template(
        data, template_str=template,
        repo_id=repo_id, title=data["pretty_name"], visibility="private" if private else "public",
        configs=[{**view, "fence": _fence(view["code"], view["features"])} for view in views],
        splits=[{"name": _cell(name), "rows": rows} for name, rows in default_rows.items()],
        total_rows=sum(default_rows.values()), split_key=split_key,
        split_groups=", ".join(f"{n} in {name}" for name, n in (split_groups or {}).items()),
        report=_report_view(report, _canonical_rows(configs)),
        versions=[(_cell(k), _cell(v)) for k, v in versions.items()],
        sources=[{"name": _cell(s.name), "size": s.size, "sha256": s.sha256} for s in sources],
        trainers=trainer_views(configs, trainers) if trainers is not None else [],
        first_split=next(iter(default_rows)), has_tokenized=any(c.name == "tokenized" for c in configs),
        dataset_name=repo_id.split("/")[-1], privacy=privacy,
        sessions=any("tools_source" in config.features for config in configs),
    )
    return card


def _canonical_rows(configs: Sequence[Config]) -> int:
    """Rows as exported: the canonical config's (the default config has one row per marked turn)."""
    for config in configs:
        if config.name == "canonical":
            return sum(config.rows.values())
    return sum(configs[0].rows.values())

"""`whileai-datasets push SOURCE REPO_ID`: publish a file or a saved dataset to a private Hub repo.

The same `publish` as `export_dataset(push_to=)`: the same configs, layout and card.

The main console entry (`whileai_datasets.cli:main`) calls `add_parser(subparsers)` to register the
command and `run(args)` to execute it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

from whileai_datasets import _storage
from whileai_datasets._options import TrainingOptions
from whileai_datasets.cli import bad_rows as bad_rows_cli
from whileai_datasets.cli import export as export_cli
from whileai_datasets.cli import ray_options as ray_cli
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import PublishError, WhileaiError
from whileai_datasets.export import rollouts
from whileai_datasets.export.rollouts import publish_rollouts
from whileai_datasets.hub import publish, split_by
from whileai_datasets.hub.reading import chunks
from whileai_datasets.shaping.reports import first_role_count

EXIT_OK = 0
EXIT_FAILED = 1


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `push` on the `subparsers` of the main parser, with `run` as its `run` default."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "push", help="publish rows to a private Hub dataset repo, as trainer-ready configs with a card",
        description="Publish SOURCE to the Hub dataset repo REPO_ID: a default config that TRL's SFTTrainer "
        "trains exactly (prompt/completion rows, one per loss-carrying assistant turn), the canonical rows, "
        "and a dataset card. The repo is private unless --public is given. The token is HF_TOKEN or the "
        "`hf auth login` one.")
    parser.add_argument("source", metavar="SOURCE", type=export_cli.path_or_uri,
                        help="a .parquet file, whileai rollouts (.jsonl, .json), or a folder written by "
                             "save_to_disk; a URI (s3://bucket/key, gs://...) is read through pyarrow.fs / fsspec")
    parser.add_argument("repo_id", metavar="REPO_ID", help="namespace/name (a bare name goes to your namespace)")
    parser.add_argument("--public", action="store_true", help="create (or push to) a public repo")
    parser.add_argument("--split-by", metavar="KEY", help="hold out whole groups of KEY (e.g. scenario_id)")
    parser.add_argument("--test-size", type=float, default=0.1,
                        help="share of KEY groups held out with --split-by (default 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="which groups --split-by holds out (default 0)")
    export_cli.add_row_options(parser)  # for raw rollouts (.jsonl SOURCE), as `export` takes them
    bad_rows_cli.add_option(parser)
    parser.add_argument("--preference", type=Path, metavar="PAIRS",
                        help="preference pairs (.jsonl/.parquet) to publish as the `preference` config")
    parser.add_argument("--tokenizer", metavar="DIR",
                        help="a tokenizer folder (save_pretrained): adds the `tokenized` config and token counts")
    parser.add_argument("--salvage", action="store_true",
                        help="with --tokenizer: a conversation with one turn the chat template cannot take trains the "
                        "turns before it in the tokenized and default configs, as tokenize(salvage=True) trains it "
                        "(the card names them), instead of being left out whole")
    parser.add_argument("--report", type=Path, metavar="FILE", help="the export report as JSON, shown on the card")
    parser.add_argument("--revision", help="branch to push to (default main)")
    parser.add_argument("--message", help="commit message")
    parser.add_argument("--audit", action="store_true",
                        help="audit each split (with --tokenizer: its tokens too) and put what it trains on the card, "
                        "with plots (needs matplotlib: pip install 'whileai-datasets[report]')")
    parser.add_argument("--secrets", choices=("refuse", "redact", "allow"), default="refuse",
                        help="what a secret found in the rows does (every string is scanned before any upload): "
                        "refuse (default) stops with the kinds and rows, redact replaces each with a typed "
                        "placeholder, allow publishes them as they are (the card says so)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    ray_cli.add_engine_option(parser, "With ray, SOURCE is whileai rollouts (files, a directory or a glob, "
                              "on storage every node mounts); the workers build the shards, this process commits")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        if args.engine == "ray":
            result = _push_on_ray(args)
        else:
            result = _push(args)
    except (WhileaiError, ValueError) as err:
        print(f"whileai-datasets push: {err}", file=sys.stderr)
        return EXIT_FAILED
    _print(result, args.json)
    return EXIT_OK


def _push(args: argparse.Namespace) -> Any:
    if _storage.is_uri(args.source):  # the local engine reads a local copy of the object
        args.source = Path(_storage.local_copy(args.source))
    data = _rows(args)
    pairs = load_source(args.preference, config="preference") if args.preference else None
    if args.split_by:
        if isinstance(data, DatasetDict):
            raise PublishError(f"--split-by needs one table, but SOURCE already has splits {sorted(data)}",
                               location=str(args.source), hint="Drop --split-by to keep those splits")
        data = split_by(data, args.split_by, test_size=args.test_size, seed=args.seed)
    tokenizer = load_tokenizer(args.tokenizer)
    sections = [_audit_section(data, tokenizer, args.salvage)] if args.audit else []
    return publish(data, args.repo_id, private=not args.public, revision=args.revision,
                   commit_message=args.message, report=_read_report(args.report), sources=[args.source],
                   split_key=args.split_by, preference=pairs, tokenizer=tokenizer, card_sections=sections,
                   secrets=args.secrets, salvage=args.salvage)


def _audit_section(data: Dataset | DatasetDict, tokenizer: Any, salvage: bool = False) -> Any:
    """The card section of an audit of each split, as published (the rows are already shaped)."""
    from whileai_datasets.auditing import audit
    from whileai_datasets.auditing.card import card_section

    splits = data if isinstance(data, DatasetDict) else {"train": data}
    return card_section({name: audit(ds, tokenizer=tokenizer, strip_think=False, salvage=salvage).to_dict()
                         for name, ds in splits.items()})


def _push_on_ray(args: argparse.Namespace) -> Any:
    """`push --engine ray`: raw rollouts only (the workers read them), the options `export` takes."""
    for flag, value in (("--preference", args.preference), ("--tokenizer", args.tokenizer), ("--salvage", args.salvage),
                        ("--report", args.report), (bad_rows_cli.FLAG, args.on_bad_row), ("--audit", args.audit)):
        if value:
            raise PublishError(f"{flag} is not available with --engine ray", location=flag,
                               hint="Publish with --engine local for that")
    source = Path(args.source) if not _storage.is_uri(args.source) else None
    if PurePosixPath(str(args.source)).suffix.lower() == ".parquet" or (
            source is not None and source.is_dir() and (source / "state.json").exists()):
        raise PublishError("--engine ray reads whileai rollouts (.jsonl), and SOURCE holds exported rows",
                           location=str(args.source), hint="Publish exported rows with --engine local")
    with ray_cli.runtime(args.ray_address):
        return publish_rollouts(str(args.source), args.repo_id, **_rollout_options(args), split_key=args.split_by,
                                test_size=args.test_size, seed=args.seed, private=not args.public,
                                revision=args.revision, commit_message=args.message, engine="ray",
                                secrets=args.secrets)


def _rollout_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options that shape raw rollouts, from the command line (``publish_rollouts``' keywords)."""
    system, tools = export_cli.row_inputs(args)
    return {"system_prompt": system, "tools": tools, "mask_mode": args.mask_mode, "strip_think": not args.keep_think,
            "max_tool_output_chars": args.max_tool_output_chars}


def _print(result: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    splits = ", ".join(f"{name} {rows}" for name, rows in result["splits"].items())
    visibility = "private" if result["private"] else "public"
    configs = "; ".join(f"{name}: " + ", ".join(f"{split} {rows}" for split, rows in counts.items())
                        for name, counts in result["configs"].items())
    print(f"Published {result['repo_id']} ({visibility}; {splits} rows) at {result['commit']}\n"
          f"  configs  {configs}\n  load     load_dataset({result['repo_id']!r}, split=...)  "
          "# the default config")
    route = result["trainers"].get("trl-default")
    if route is not None:  # what TRL's default SFTTrainer trains on it, as the card says it
        print(f"  trl      {route['how']}")
    for trainer, found in result["trainers"].items():
        for shape in found["inexact"].values():  # rows a trainer reads differently: the card says more
            print(f"  {trainer}  {shape['rows']} of {found['rows']} {found['unit']} of `{found['config']}` "
                  f"not exact: {shape['effect']} (first: {shape['first']})")
    print(result["url"])


#: The `add_row_options` flags that only mean something for raw rollouts (what `export` reads).
_RAW_ONLY = (("system_prompt", "--system-prompt"), ("system_prompt_file", "--system-prompt-file"),
             ("tools", "--tools"), ("max_tool_output_chars", "--max-tool-output-chars"),
             ("on_bad_row", bad_rows_cli.FLAG))


def _rows(args: argparse.Namespace) -> Dataset | DatasetDict:
    """SOURCE as training rows: raw rollouts (.jsonl) shaped as `export` shapes them, others as they are."""
    if not _is_jsonl(args.source):
        given = [flag for name, flag in _RAW_ONLY if getattr(args, name) is not None]
        if given:
            raise PublishError(f"{', '.join(given)} shape raw rollouts, but SOURCE holds rows already exported",
                               location=str(args.source), hint="Pass the whileai .jsonl rollouts as SOURCE, or drop "
                               "the flag (apply it when exporting)")
        return load_source(args.source, mask_mode=args.mask_mode)
    options = TrainingOptions.whileai_export(**_rollout_options(args))
    ds = rollouts.rollout_rows([str(args.source)], options, on_bad_row=args.on_bad_row)
    if options.system_prompt is None:
        _warn_without_system(ds)
    return ds


def _warn_without_system(ds: Dataset) -> None:
    """Raw rollouts hold no system message: published without one, the model trains without its rules."""
    missing = 0
    for chunk in chunks(ds, columns=("messages",)):
        missing += chunk.num_rows - first_role_count(_arrow.column(chunk, "messages"), "system")
    if missing:
        print(f"whileai-datasets push: warning: {missing} of {ds.num_rows} rows have no system message and no "
              "--system-prompt-file (or --system-prompt) was given, so the model trains without the rules it "
              "ran under. Pass --system-prompt-file FILE with the agent's system prompt.", file=sys.stderr)


#: What whileai rollouts are named (read by the `whileai/export` builder), compressed or not.
_ROLLOUT_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


def _is_jsonl(path: Path) -> bool:
    return "".join(path.suffixes[-2:]).lower().endswith(_ROLLOUT_SUFFIXES) and path.is_file()


def load_source(path: Path, *, mask_mode: str = "assistant", config: str = "default", system_prompt: str | None = None,
                tools: list[Any] | None = None, on_bad_row: str | None = None) -> Dataset | DatasetDict:
    """SOURCE as a Dataset (one file) or what save_to_disk wrote (a Dataset or a DatasetDict).

    A .jsonl (or .json) file goes through the `whileai/export` builder (`config` "default" or
    "preference", the loss mask from `mask_mode`); a .parquet file is read as it is (canonical rows)."""
    if path.is_dir():
        return load_from_disk(str(path))
    if not path.is_file():
        raise PublishError("SOURCE does not exist", location=str(path),
                           hint="Pass a .parquet or .jsonl file, or a folder written by save_to_disk")
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() == ".parquet":
        return load_dataset("parquet", data_files=str(path), split="train")
    if suffixes.endswith(_ROLLOUT_SUFFIXES):
        return _load_whileai_export(path, config, {"mask_mode": mask_mode, "system_prompt": system_prompt,
                                                   "tools": tools, "on_bad_row": on_bad_row})
    raise PublishError(f"expected a .parquet, .jsonl or .json file, got {path.suffix or 'no suffix'}",
                       location=str(path), hint="Convert the rows to Parquet, or save them with save_to_disk")


def _load_whileai_export(path: Path, config: str, given: dict[str, Any]) -> Dataset:
    """whileai JSONL through the package's own builder (every row shape, canonical schema)."""
    import whileai_datasets  # noqa: F401  (registers "whileai/export")

    options = {k: v for k, v in given.items() if v is not None} if config == "default" else {}
    ds = load_dataset("whileai/export", config, data_files=str(path), split="train", **options)
    assert isinstance(ds, Dataset)
    return ds


def load_tokenizer(folder: str | None, error: type[WhileaiError] = PublishError) -> Any:
    """``AutoTokenizer.from_pretrained(folder)`` for a command's ``--tokenizer`` (None: none given); a missing
    transformers or a folder it cannot read raises ``error`` naming the option."""
    if folder is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise error("--tokenizer needs transformers, which is not installed", location="--tokenizer",
                           hint="pip install transformers") from None
    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise error(f"could not load a tokenizer from {folder!r}: {err}", location="--tokenizer",
                           hint="Pass a folder written by tokenizer.save_pretrained") from err


def _read_report(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        report = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise PublishError(f"could not read the export report: {err}", location=str(path),
                           hint="Pass the JSON that export_dataset returned (json.dump(report, f))") from err
    if not isinstance(report, dict):
        raise PublishError(f"expected the report to be a JSON object, got {type(report).__name__}",
                           location=str(path), hint="Pass the dict export_dataset returned")
    return report

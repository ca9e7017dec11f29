"""``whileai-datasets export IN OUT``: whileai's ``export_dataset`` (or
``export_preference``) from the command line.

The main console entry (``whileai_datasets.cli:main``) calls ``add_parser(subparsers)``
to register the command and ``run(args)`` to execute it. The report prints as a
table (``--json`` for the report as JSON); long runs show a progress bar on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from whileai_datasets import _storage
from whileai_datasets._options import TrainingOptions, one_of
from whileai_datasets._typing import ExportFormat, MaskMode, MessageWeights
from whileai_datasets.cli import bad_rows as bad_rows_cli
from whileai_datasets.cli import ray_options as ray_cli
from whileai_datasets.errors import ExportFormatError, WhileaiError

EXIT_OK = 0
EXIT_FAILED = 1


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``export`` on the ``subparsers`` of the main parser, with ``run`` as its ``run`` default."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "export",
        help="write training rows (or preference pairs) as whileai's export_dataset does",
        description="Read whileai rows from IN (JSONL, any row shape, or Parquet) and write training rows "
        "to OUT (.parquet for Parquet, else JSONL), with the same rows and report as "
        "whileai.simulations.export_dataset.",
    )
    parser.add_argument("source", metavar="IN", type=path_or_uri,
                        help="whileai rows (.jsonl, .jsonl.gz, .json: an array or one row per line, or .parquet); "
                             "a URI (s3://bucket/key, gs://...) is read through pyarrow.fs / fsspec")
    parser.add_argument("output", metavar="OUT", type=path_or_uri,
                        help="the file to write (.parquet or .jsonl), or a URI to upload it to")
    add_row_options(parser)
    parser.add_argument("--format", metavar=one_of(ExportFormat), default="openai", help="wire shape (default: %(default)s)")
    parser.add_argument("--unroll", action="store_true", help="one sample per assistant turn")
    parser.add_argument("--no-validate", action="store_true", help="write even if a gate refuses the rows")
    parser.add_argument("--push-to", metavar="REPO_ID", help="also publish the written rows to a private Hub repo")
    parser.add_argument("--preference", action="store_true", help="IN holds chosen/rejected pairs: export_preference")
    parser.add_argument("--keep-ties", action="store_true", help="with --preference, keep pairs marked tie")
    parser.add_argument("--weights", metavar=one_of(MessageWeights),
                        help="with --format openai: write each message's weight from the loss mask (assistant: "
                        "OpenAI and Fireworks; all: Together, weight 0 on context too)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    bad_rows_cli.add_option(parser)
    ray_cli.add_engine_option(parser)
    parser.set_defaults(run=run)
    return parser


def add_row_options(parser: argparse.ArgumentParser, *, think_kept: bool = False) -> None:
    """The options that make raw rollouts into training rows: the system prompt, the tools, the mask,
    think blocks and tool-output truncation (``export`` and ``push`` take the same ones).

    ``think_kept``: the command's default is ``load_dataset`` + ``tokenize``'s (``<think>`` kept,
    ``--strip-think`` strips it: ``audit`` and ``show-mask``, which count and show what trains), not the
    export's whileai default (stripped, ``--keep-think`` keeps it). Either way ``args.keep_think`` says
    what was chosen."""
    system = parser.add_mutually_exclusive_group()
    system.add_argument("--system-prompt", metavar="TEXT", help="system message prepended to every conversation")
    system.add_argument("--system-prompt-file", metavar="FILE", type=Path, help="read the system prompt from FILE")
    parser.add_argument("--tools", metavar="FILE", type=Path, help="a JSON file holding the list of tool schemas")
    parser.add_argument("--mask-mode", metavar=one_of(MaskMode), default="assistant", help="which assistant turns carry loss")
    if think_kept:
        think = parser.add_mutually_exclusive_group()
        think.add_argument("--strip-think", dest="keep_think", action="store_false",
                           help="strip <think> blocks, as export does (strip_think=True); by default they are "
                                "kept, as load_dataset + tokenize keep them")
        # the default already; still taken, so a command line written for export's flags keeps working
        think.add_argument("--keep-think", dest="keep_think", action="store_true", help=argparse.SUPPRESS)
        parser.set_defaults(keep_think=True)
    else:
        parser.add_argument("--keep-think", action="store_true", help="keep <think> blocks (strip_think=False)")
    parser.add_argument("--max-tool-output-chars", metavar="N", type=_count,
                        help="cut tool messages to N characters (a whole number, 0 or more)")


def _count(text: str) -> int:
    """argparse type: a whole number, 0 or more (whileai would read -1 as 0)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text!r}")
    return value


def row_inputs(args: argparse.Namespace) -> tuple[str | None, list[Any] | None]:
    """The system prompt and the tool schemas ``add_row_options`` asked for (files read and checked)."""
    system = args.system_prompt
    if args.system_prompt_file is not None:
        system = _read(args.system_prompt_file, "the system prompt file")
    tools = _tools(args.tools) if args.tools is not None else None
    return system, tools


def run(args: argparse.Namespace) -> int:
    """Run the export; print the report; 0 on success, 1 with the reason on stderr."""
    try:
        report = _export(args)
    except (WhileaiError, ValueError, OSError) as err:
        print(f"whileai-datasets export: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(report, indent=2, default=str) if args.json else render(report))
    return EXIT_OK


def _export(args: argparse.Namespace) -> dict[str, Any]:
    from whileai_datasets.export import exporters
    from whileai_datasets.shaping import overwrite

    # before anything is read: OUT must not be IN, the system prompt file or the tools file
    ray = getattr(args, "engine", "local") == "ray"
    overwrite.refuse_overwrite(args.output, [args.source, args.system_prompt_file, args.tools], directory=ray)
    system, tools = row_inputs(args)
    if args.weights and (ray or args.preference):
        raise ExportFormatError(f"--weights applies to training rows exported by the local engine, not with "
                                f"{'--engine ray' if ray else '--preference'}", location="--weights",
                                hint="Drop --weights, or export training rows with the local engine")
    if bad_rows_cli.given(args) and (ray or args.preference):
        raise ExportFormatError(f"{bad_rows_cli.FLAG} applies to rollouts exported by the local engine, not with "
                                f"{'--engine ray' if ray else '--preference'}", location=bad_rows_cli.FLAG,
                                hint=f"Drop {bad_rows_cli.FLAG}, or export the rollouts with the local engine")
    if ray:
        return ray_cli.run_ray_export(args, training_options(args, system, tools))
    if args.preference:
        pairs = _pairs(args.source)
        return exporters.export_preference(
            pairs,
            str(args.output),
            system_prompt=system,
            tools=tools,
            strip_think=not args.keep_think,
            validate=not args.no_validate,
            drop_ties=not args.keep_ties,
            format=args.format,
        )
    options = training_options(args, system, tools)
    with Progress(enabled=not args.json) as progress:
        return exporters.run_training(str(args.source), str(args.output), options, push_to=args.push_to,
                                      on_bad_row=bad_rows_cli.chosen(args), progress=progress)


def training_options(args: argparse.Namespace, system: str | None, tools: list[Any] | None) -> TrainingOptions:
    """The export's ``TrainingOptions`` from the ``export`` command line (both engines take them; whileai's
    defaults, as ``export_dataset``'s)."""
    return TrainingOptions.whileai_export(
        system_prompt=system, tools=tools, strip_think=not args.keep_think, validate=not args.no_validate,
        mask_mode=args.mask_mode, unroll=args.unroll, max_tool_output_chars=args.max_tool_output_chars,
        format=args.format, weights=args.weights)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ExportFormatError(
            f"cannot read {what} ({err.strerror})", location=str(path), hint="Check the path."
        ) from err


def _tools(path: Path) -> list[Any]:
    text = _read(path, "the tools file")
    try:
        tools = json.loads(text)
    except ValueError as err:
        raise ExportFormatError(
            f"the tools file is not valid JSON ({err})",
            location=str(path),
            hint="It must hold a JSON list of tool schemas.",
        ) from err
    if not isinstance(tools, list):
        raise ExportFormatError(
            f"expected a JSON list of tool schemas, got {type(tools).__name__}",
            location=str(path),
            hint='Write the tools as [{"type": "function", "function": {...}}, ...].',
        )
    return tools


def _pairs(path: Path) -> list[Any] | str:
    """The pairs of a JSONL file, one a line; any other file (a JSON array or object, Parquet, compressed) is
    handed on as its path, read with the ``preference`` config."""
    if path.suffix != ".jsonl":
        return str(path)
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                pairs.append(json.loads(line))
            except ValueError as err:
                raise ExportFormatError(
                    f"not valid JSON ({err})", location=f"{path} line {number}", hint="Each line must hold one pair."
                ) from err
    return pairs


class Progress:
    """A tqdm bar on stderr, shown only once a run has taken a second."""

    def __init__(self, *, enabled: bool, desc: str = "export") -> None:
        self.enabled, self.desc = enabled, desc
        self.bar: Any = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm.auto import tqdm  # type: ignore[import-untyped]

            self.bar = tqdm(total=total, unit="rows", desc=self.desc, delay=1.0, file=sys.stderr, leave=False)
        self.bar.update(done)


def render(report: dict[str, Any]) -> str:
    """The report as an aligned two-column table, warnings listed after it."""
    rows = list(_flatten(report))
    width = max((len(key) for key, _ in rows), default=0)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    for warning in report.get("warnings") or ():
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def _flatten(value: dict[str, Any], prefix: str = "") -> Any:
    for key, item in value.items():
        name = f"{prefix}{key}"
        if key == "warnings" and not prefix:
            continue
        if isinstance(item, dict):
            yield from _flatten(item, f"{name}.")
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            for i, entry in enumerate(item):
                yield from _flatten(entry, f"{name}[{i}].")
        else:
            yield name, _show(item)


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "-"
    return str(value)


def path_or_uri(text: str) -> Path | str:
    """An argument naming a path on this machine, or a URI (``s3://bucket/key``) kept as text: ``Path``
    would fold it into a local ``s3:/bucket`` path."""
    return text if _storage.is_uri(text) else Path(text)

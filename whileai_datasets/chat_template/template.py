"""``ChatTemplate``: one chat template, wherever it came from, and what can be done with it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2.exceptions import TemplateSyntaxError

from whileai_datasets.chat_template.analysis.analysis import Analysis, analyse
from whileai_datasets.chat_template.analysis.unpatchable import Unpatchable
from whileai_datasets.chat_template.masks.turn_check import turn_by_turn_note
from whileai_datasets.chat_template.patching.patch import add_generation
from whileai_datasets.chat_template.rendering.render import compile_plain, render_chat
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.chat_template.sandbox.budget import RenderBudget, budget_scope
from whileai_datasets.chat_template.sandbox.environment import (
    chat_environment,
    normalize_newlines,
)
from whileai_datasets.chat_template.sandbox.source import syntax_error
from whileai_datasets.errors import TemplateError

if TYPE_CHECKING:
    from whileai_datasets.chat_template.inspect import (
        GenerationBlockInfo,
        TemplateReport,
    )
    from whileai_datasets.chat_template.masks.masking import MaskPlan

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
_TEMPLATE_FILES = ("chat_template.jinja", "tokenizer_config.json", "chat_template.json")


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    tokens = {}
    for key in _SPECIAL_KEYS:
        text = _token_text(config.get(key))
        if text is not None:
            tokens[key] = text
    return tokens


def _variants_from(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    if isinstance(value, list) and all(isinstance(v, Mapping) and {"name", "template"} <= set(v) for v in value):
        return {str(v["name"]): str(v["template"]) for v in value}
    raise TemplateError(
        f"expected a chat template string, a dict of named templates or a list of {{name, template}}, "
        f"got {type(value).__name__}",
        location=where,
        hint="Point at a tokenizer_config.json or chat_template.jinja written by transformers.",
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise TemplateError(f"cannot read {path.name}: {err}", location=str(path),
                            hint="Check that the file exists and is valid JSON.") from err
    if not isinstance(data, dict):
        raise TemplateError(f"expected a JSON object, got {type(data).__name__}", location=str(path),
                            hint="Point at a tokenizer_config.json or chat_template.json.")
    return data


def _load_directory(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    config = _read_json(path / "tokenizer_config.json") if (path / "tokenizer_config.json").is_file() else {}
    tokens = _special_tokens(config)
    if (path / "special_tokens_map.json").is_file():
        tokens = {**_special_tokens(_read_json(path / "special_tokens_map.json")), **tokens}
    variants: dict[str, str] = {}
    if "chat_template" in config:
        variants = _variants_from(config["chat_template"], str(path / "tokenizer_config.json"))
    if (path / "chat_template.json").is_file():
        variants.update(_variants_from(_read_json(path / "chat_template.json").get("chat_template"),
                                       str(path / "chat_template.json")))
    if (path / "chat_template.jinja").is_file():
        variants["default"] = (path / "chat_template.jinja").read_text(encoding="utf-8")
    extra = path / "additional_chat_templates"
    if extra.is_dir():
        for item in sorted(extra.glob("*.jinja")):
            variants[item.stem] = item.read_text(encoding="utf-8")
    if not variants:
        raise TemplateError("no chat template found", location=str(path),
                            hint=f"Expected one of {', '.join(_TEMPLATE_FILES)} with a chat template in it.")
    return variants, tokens


def _load_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    if path.is_dir():
        return _load_directory(path)
    if not path.is_file():
        raise TemplateError("no such file or directory", location=str(path),
                            hint="Pass a .jinja file, a tokenizer_config.json or a model directory.")
    if path.suffix != ".json":
        return {"default": path.read_text(encoding="utf-8")}, {}
    config = _read_json(path)
    if "chat_template" not in config:
        raise TemplateError("the JSON file has no 'chat_template' key", location=str(path),
                            hint="Point at a tokenizer_config.json or chat_template.json that holds a template.")
    return _variants_from(config["chat_template"], str(path)), _special_tokens(config)


class ChatTemplate:
    """A chat template: parse, inspect, patch with generation blocks, render with spans.

    Args:
        source: Template text, or a dict of named variants (``"default"`` is chosen).
        name: Used in error locations and reports.
        variant: Which named variant to use (default: ``"default"``, or the only one).
        special_tokens: ``bos_token``, ``eos_token``, ... passed to every render.
        budget: The ``RenderBudget`` every render of this template runs under
            (render, inspect, patch, tokenize); default: ``RenderBudget.from_env()``.
            A render over it raises ``RenderBudgetError`` (a ``TemplateError``).
    Example:
        >>> template = ChatTemplate("{% for m in messages %}{{ m['content'] }}{% endfor %}")
        >>> template.render([{"role": "user", "content": "hi"}]).text
        'hi'
    """

    def __init__(self, source: str | Mapping[str, str], *, name: str = "<template>", variant: str | None = None,
                 special_tokens: Mapping[str, str] | None = None, budget: RenderBudget | None = None) -> None:
        if budget is not None and not isinstance(budget, RenderBudget):
            raise TemplateError(f"budget must be a RenderBudget, got {type(budget).__name__}", location=name,
                                hint="Pass budget=RenderBudget(max_chars=..., max_seconds=...).")
        variants = {"default": source} if isinstance(source, str) else _variants_from(source, name)
        self.variants: tuple[str, ...] = tuple(variants)
        self.variant = self._pick(variants, variant, name)
        self.text: str = variants[self.variant]
        self.name = name if isinstance(source, str) or self.variant == "default" else f"{name}[{self.variant}]"
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        self.budget = budget
        self._all = variants
        self._structure_report: TemplateReport | None = None  # what the source shows, before the mask plan
        self._report: TemplateReport | None = None  # the whole report: the structure and the mask plan
        self._analysis: Analysis | None = None
        self._plan: MaskPlan | None = None

    @staticmethod
    def _pick(variants: Mapping[str, str], variant: str | None, name: str) -> str:
        if variant is None:
            if "default" in variants or len(variants) == 1:
                return "default" if "default" in variants else next(iter(variants))
            problem = f"the template has several variants ({', '.join(variants)}) and none is 'default'"
        elif variant in variants:
            return variant
        else:
            problem = f"no variant {variant!r}; the template has {', '.join(variants)}"
        raise TemplateError(problem, location=name, hint="Pass variant= with one of those names.")

    # ------------------------------------------------------------ constructors

    @classmethod
    def from_file(cls, path: str | Path, *, variant: str | None = None,
                  budget: RenderBudget | None = None) -> ChatTemplate:
        """Load from a ``.jinja`` file, a ``tokenizer_config.json``/``chat_template.json`` or a model directory."""
        path = Path(path)
        variants, tokens = _load_file(path)
        return cls(variants, name=path.name or str(path), variant=variant, special_tokens=tokens, budget=budget)

    @classmethod
    def from_pretrained(cls, directory: str | Path, *, variant: str | None = None,
                        budget: RenderBudget | None = None) -> ChatTemplate:
        """Load from a local model directory (no download)."""
        return cls.from_file(directory, variant=variant, budget=budget)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, *, variant: str | None = None,
                       budget: RenderBudget | None = None) -> ChatTemplate:
        """Use a transformers tokenizer's ``chat_template`` and its special tokens."""
        template = getattr(tokenizer, "chat_template", None)
        if template is None:
            raise TemplateError("the tokenizer has no chat_template", location=type(tokenizer).__name__,
                                hint="Set tokenizer.chat_template or load a template file instead.")
        tokens = getattr(tokenizer, "special_tokens_map", {}) or {}
        return cls(template, name=type(tokenizer).__name__, variant=variant, special_tokens=dict(tokens),
                   budget=budget)

    @classmethod
    def shipped(cls, family: str) -> ChatTemplate:
        """A training template shipped with whileai_datasets (``qwen2_5``, ``llama3_1``, ...)."""
        resource = files("whileai_datasets.templates").joinpath(f"{family}.jinja")
        if not resource.is_file():
            names = sorted(p.name[:-6] for p in files("whileai_datasets.templates").iterdir()
                           if p.name.endswith(".jinja"))
            raise TemplateError(f"no shipped template {family!r}", location="whileai_datasets.templates",
                                hint=f"Choose one of {', '.join(names)}.")
        return cls(resource.read_text(encoding="utf-8"), name=f"{family}.jinja")

    def select(self, variant: str) -> ChatTemplate:
        """The same source with another named variant chosen."""
        return ChatTemplate(self._all, name=self.name.split("[")[0], variant=variant,
                            special_tokens=self.special_tokens, budget=self.budget)

    # ------------------------------------------------------------ operations

    def inspect(self) -> TemplateReport:
        """What the template does (see ``TemplateReport``), including the mask method; computed once."""
        from dataclasses import replace

        with budget_scope(self.budget):
            return self._inspect(replace)

    def _inspect(self, replace: Any) -> TemplateReport:
        if self._report is None:
            report = self._structure()
            if report.syntax_error or report.classifier is not None:
                self._report = report  # a classifier template has no mask method: tokenize refuses it
            else:
                plan = self.mask_plan()
                self._report = replace(report, mask_method=plan.method, mask_method_reason=plan.reason,
                                       patch_refusal_class=plan.refusal_class, turns_mask=plan.turns_mask,
                                       tool_call_arguments=plan.arguments, tool_call_ids=plan.tool_call_ids,
                                       content_parts=plan.content_parts)
        return self._report

    def _structure(self) -> TemplateReport:
        """What the source shows (no mask plan): computed once, and never the whole report, whatever ran first."""
        from whileai_datasets.chat_template.inspect import inspect_template

        if self._structure_report is None:
            analysis = None if self._syntax_broken() else self._probe()
            self._structure_report = inspect_template(self.text, self.special_tokens, self.name, analysis)
        return self._structure_report

    def mask_plan(self) -> MaskPlan:
        """How token masks are found for this template (see ``chat_template.masking``); computed once.

        Raises:
            TemplateError: a syntax error, or generation blocks that do not cover the assistant output.
        """
        from whileai_datasets.chat_template.masks.masking import plan_masks

        if self._plan is None:
            with budget_scope(self.budget):
                self._plan = plan_masks(self)
        return self._plan

    def _syntax_broken(self) -> bool:
        try:
            compile_plain(self.text, self.name)
        except TemplateError:
            return True
        return False

    def _probe(self) -> Analysis:
        if self._analysis is None:
            self._analysis = analyse(self.text, self.special_tokens, self.name)
        return self._analysis

    def generation_blocks(self) -> tuple[GenerationBlockInfo, ...]:
        """The ``{% generation %}`` blocks of the template's AST, without rendering anything.

        Raises:
            TemplateError: the template has a syntax error (location names the line).
        """
        from whileai_datasets.chat_template.inspect import generation_blocks

        try:
            ast = chat_environment().parse(normalize_newlines(self.text), self.name)
        except TemplateSyntaxError as err:
            raise syntax_error(err, self.name) from err
        return generation_blocks(ast)

    def with_generation(self) -> ChatTemplate:
        """A copy whose assistant output sits in ``{% generation %}`` blocks, verified by rendering.

        A template that already has blocks is returned as is when they cover
        the assistant output.

        Raises:
            TemplateError: the template cannot be patched safely (the message says why and where).
        """
        with budget_scope(self.budget):
            return self._with_generation()

    def _with_generation(self) -> ChatTemplate:
        report = self._structure()
        if report.syntax_error:
            raise TemplateError(f"syntax error: {report.syntax_error}",
                                location=f"{self.name}:{report.syntax_error_line}",
                                hint="Fix the template at that line, then patch it.")
        if report.has_generation_block:
            if report.covers_assistant_output:
                return self
            raise TemplateError(
                "the template already has generation blocks, but they do not cover the assistant output: "
                + (report.coverage_problems[0] if report.coverage_problems else "no assistant turn is covered"),
                location=f"{self.name}:{report.generation_blocks[0].line}",
                hint="Remove the existing {% generation %} tags and run with_generation() again.")
        analysis = self._probe()
        try:
            patched = add_generation(self.text, self.special_tokens, self.name, analysis=analysis)
        except Unpatchable as err:
            if err.refusal_class != "classifier":  # the refusal says what per-turn masking can do instead
                exact = report.span_tracking_exact is True
                err.hint = f"{err.hint} {turn_by_turn_note(self.text, analysis.kwargs, self.name, analysis, exact)}"
            raise
        return ChatTemplate(patched, name=self.name, special_tokens=self.special_tokens, budget=self.budget)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = False, *, now: datetime | None = None,
               **kwargs: Any) -> RenderedChat:
        """Render once: the text, per-message spans and per-generation-block spans.

        ``kwargs`` reach the template (they override the special tokens);
        ``now`` pins ``strftime_now``.
        """
        with budget_scope(self.budget):
            return render_chat(self.text, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                               kwargs={**self.special_tokens, **kwargs}, now=now, name=self.name)

    def save(self, path: str | Path) -> Path:
        """Write the template text to ``path`` (a ``.jinja`` file), whole or
        not at all (a temp file beside it, flushed, renamed over it).

        Raises:
            WriteError: it could not be written; an existing file is untouched.
        """
        from whileai_datasets import _files

        target = Path(path)
        _files.write_text(target, self.text)
        return target

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatTemplate) and (self.text, self.special_tokens) == (other.text,
                                                                                       other.special_tokens)

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r}, variant={self.variant!r}, chars={len(self.text)})"

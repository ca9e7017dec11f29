"""Size checks run before the sandbox builds a string, list or number (see ``budget``).

Each check estimates, from its operands alone, how large the result of an
operator, a ``str`` method or a filter would be, and asks the render's meter
whether that fits (``Meter.size``); only then is the result built. Results
are measured once more after the fact, for whatever no estimate covers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from string import Formatter
from typing import Any

from whileai_datasets.chat_template.sandbox.budget import (
    Meter,
    RenderBudget,
    current_meter,
    printed_size,
    shared_values,
)

_SEQUENCES = (str, list, tuple)
# a printf conversion: optional mapping key, flags, width, precision, type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*|\*)(?:\.(\d*|\*))?[hlL]?[diouxXeEfFgGcrsa%]")
_DIGITS = re.compile(r"\d+")


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def check_binop(meter: Meter, op: str, left: Any, right: Any) -> None:
    """Refuse an intercepted ``*``, ``+``, ``%`` or ``**`` whose result would be over the budget."""
    if op == "*":
        if isinstance(left, int) and isinstance(right, _SEQUENCES):
            left, right = right, left
        if isinstance(left, _SEQUENCES) and isinstance(right, int):
            meter.size(len(left) * _count(right), f"{type(left).__name__} * {right:,} (of length {len(left):,})")
            if isinstance(left, (list, tuple)) and left and _count(right):
                meter.size(printed_size(left, meter.budget.max_chars) * right, f"{type(left).__name__} * {right:,}, printed,")
        elif type(left) is int and type(right) is int:
            meter.int_bits(left.bit_length() + right.bit_length(), "the product")
    elif op == "+":
        if isinstance(left, str) and isinstance(right, str):
            meter.size(len(left) + len(right), "str + str")
        elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            limit = meter.budget.max_chars  # items may be shared lists: measure them printed
            meter.size(printed_size(left, limit) + printed_size(right, limit), f"{type(left).__name__} + "
                       f"{type(right).__name__}, printed,")
    elif op == "%":
        if isinstance(left, str):
            meter.size(printf_size(meter, left, right), "the %-formatted string")
    elif op == "**":
        if type(left) is int and type(right) is int and abs(left) > 1 and right > 0:
            meter.int_bits(right * left.bit_length(), "the power")


def printf_size(meter: Meter, template: str, args: Any) -> int:
    """An upper estimate of ``template % args``: the text, the widths and the values printed."""
    widths = sum(int(number) for match in _PRINTF.finditer(template) for number in match.groups() if number
                 and number.isdigit())
    return len(template) + widths + printed_size(args, meter.budget.max_chars)


def format_size(meter: Meter, template: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """An upper estimate of ``template.format(*args, **kwargs)``: every field as wide as the widest value."""
    values = (*args, *kwargs.values())
    fields, widths, nested = 0, 0, False
    try:
        for _, field, spec, _ in Formatter().parse(template):
            if field is not None:
                fields += 1
                widths += sum(int(number) for number in _DIGITS.findall(spec or ""))
                nested = nested or "{" in (spec or "")
    except ValueError:
        return len(template)  # Python refuses the format string itself
    widest = max((printed_size(value, meter.budget.max_chars) for value in values), default=0)
    # a nested width ("{:{w}}") comes from the arguments: count every integer argument as one
    supplied = sum(_count(value) for value in values if type(value) is int) if nested else 0
    return len(template) + widths + fields * widest + supplied


# ---------------------------------------------------------------- str methods


def _replace_size(text: str, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(text)
    times = text.count(old) if old else len(text) + 1
    if type(count) is int and count >= 0:
        times = min(times, count)
    return len(text) + times * max(len(new) - len(old), 0)


def _str_method_size(text: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    if method in ("ljust", "rjust", "center", "zfill") and args:
        return max(len(text), _count(args[0]))
    if method == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        return len(text) + text.count("\t") * _count(size)
    if method == "replace" and len(args) >= 2:
        return _replace_size(text, *args[:3])
    return None


def check_call(meter: Meter, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a ``str`` method call whose result would be over the budget; the args to call with."""
    owner = getattr(obj, "__self__", None)
    if not isinstance(owner, str):
        return args
    name = getattr(obj, "__name__", "")
    if name == "join" and args:
        items = list(args[0])
        sizes = sum(printed_size(item, meter.budget.max_chars) for item in items)
        meter.size(sizes + len(owner) * max(len(items) - 1, 0), "the joined string")
        return (items, *args[1:])
    size = _str_method_size(owner, name, args, kwargs)
    if size is not None:
        meter.size(size, f"str.{name}()")
    return args


def check_result(meter: Meter, result: Any, what: str) -> Any:
    """Count a result just built (refusing it when it is over the budget after all)."""
    if isinstance(result, (str, list, tuple)) and len(result) > 64:
        meter.add(len(result), what)
    return result


# ---------------------------------------------------------------- filters


def _join_filter(meter: Meter, value: Any, d: Any = "", attribute: Any = None) -> Any:
    if attribute is not None:
        return None
    items = list(value) if not isinstance(value, str) else value
    separator = len(str(d)) if isinstance(d, (str, int)) else 0
    meter.size(sum(printed_size(item, meter.budget.max_chars) for item in items)
               + separator * max(len(items) - 1, 0), "the joined string")
    return items


def _center_filter(meter: Meter, value: Any, width: Any = 80) -> None:
    meter.size(max(printed_size(value, meter.budget.max_chars), _count(width)), "the centred string")


def _indent_filter(meter: Meter, value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    text = value if isinstance(value, str) else ""
    pad = len(width) if isinstance(width, str) else _count(width)
    meter.size(len(text) + (text.count("\n") + 1) * pad, "the indented string")


def _format_filter(meter: Meter, value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        meter.size(printf_size(meter, value, kwargs or args), "the formatted string")


def _replace_filter(meter: Meter, value: Any, old: Any = "", new: Any = "", count: Any = None) -> None:
    if isinstance(value, str):
        meter.size(_replace_size(value, old, new, -1 if count is None else count), "the replaced string")


def _printed_filter(meter: Meter, value: Any, *args: Any, **kwargs: Any) -> None:
    indent = args[0] if args else kwargs.get("indent")
    size = printed_size(value, meter.budget.max_chars)
    meter.size(size * (1 + _count(indent)) if indent else size, "the printed value")


def _wordwrap_filter(meter: Meter, value: Any, width: Any = 79, break_long_words: Any = True,
                     wrapstring: Any = None, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str) and isinstance(wrapstring, str):
        meter.size(len(value) + (len(value) // max(_count(width), 1) + 1) * len(wrapstring), "the wrapped string")


def _batch_filter(meter: Meter, value: Any, linecount: Any = 1, fill_with: Any = None) -> None:
    if fill_with is not None:
        meter.size(_count(linecount), "the batch padding")


def _slice_filter(meter: Meter, value: Any, slices: Any = 1, fill_with: Any = None) -> None:
    meter.size(_count(slices), "the slices")


def _sum_filter(meter: Meter, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    if not isinstance(start, _SEQUENCES) or attribute is not None:
        return None
    items = list(iterable)
    meter.size(len(start) + sum(len(item) for item in items if isinstance(item, _SEQUENCES)), "the summed list")
    return items


#: A filter's check: raises when the result would be too large; may return a replacement for the
#: filtered value (an iterator it had to read, as a list), else None.
FilterCheck = Callable[..., Any]
FILTER_CHECKS: dict[str, FilterCheck] = {
    "join": _join_filter, "center": _center_filter, "indent": _indent_filter, "format": _format_filter,
    "replace": _replace_filter, "tojson": _printed_filter, "pprint": _printed_filter, "string": _printed_filter,
    "wordwrap": _wordwrap_filter, "batch": _batch_filter, "slice": _slice_filter, "sum": _sum_filter,
}


#: Filters whose result depends on their arguments alone: on a batch's shared values (its tool
#: schemas) each is computed once per batch (``budget.SharedValues``).
PURE_FILTERS = frozenset({"tojson"})


def guarded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a filter) behind its size check and a check of what it returns."""
    check = FILTER_CHECKS.get(name)
    pass_arg = getattr(function, "jinja_pass_arg", None)
    skip = 1 if pass_arg is not None else 0
    pure = name in PURE_FILTERS and pass_arg is None
    what = f"the |{name} filter's result"

    def counted(*args: Any, **kwargs: Any) -> Any:  # no check to run first, nothing shared: ``| trim``
        return check_result(current_meter() or Meter(RenderBudget.from_env()), function(*args, **kwargs), what)

    def filtered(*args: Any, **kwargs: Any) -> Any:
        # outside a render jinja is folding constants at compile time: a refusal there leaves the
        # filter to run (and be refused, with its line) in the render
        meter = current_meter() or Meter(RenderBudget.from_env())
        shared = shared_values() if pure and args else None
        key = None if shared is None else shared.key(name, args[0], (meter.budget.max_chars, *args[1:]), kwargs)
        if key is not None:
            known = shared.get(key)  # type: ignore[union-attr]
            if known is not None:  # computed, and checked against the same size limit, in this batch
                return known
        if check is not None and len(args) > skip:
            value = check(meter, *args[skip:], **kwargs)
            if value is not None:
                args = (*args[:skip], value, *args[skip + 1:])
        result = check_result(meter, function(*args, **kwargs), what)
        if key is not None:
            shared.put(key, result)  # type: ignore[union-attr]
        return result

    if check is None and not pure:
        filtered = counted
    if pass_arg is not None:
        filtered.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    filtered.__name__ = getattr(function, "__name__", name)
    filtered.__doc__ = function.__doc__
    return filtered

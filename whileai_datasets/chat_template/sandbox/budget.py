"""The render budget: how much text and time one render of an untrusted chat template may take.

A chat template from the Hub is code anyone can write, and jinja2's sandbox
stops it from reaching Python's internals but not from asking for
``'a' * 300000000`` or from looping ``range(100000)`` inside ``range(100000)``.
Every render therefore runs under a ``RenderBudget``:

* ``max_chars`` caps the rendered text and every string (or list) the
  template builds on the way. Operations whose size is known beforehand
  (repetition, ``~``, ``+``, ``join``, padding, printf widths, printing a
  container, ``tojson``) are refused *before* anything is allocated;
* ``max_seconds`` caps the time one render computes: the CPU time of the
  rendering thread, so a render on a loaded machine (or one waiting for a
  core) is not refused for time it did not use. The clock is checked on
  every loop pass, call and macro call of the template, so a loop with no
  output still stops. Reading a thread's CPU clock is a system call, so a
  render starts from its thread's last reading when that is at most
  ``SLACK_SHARE`` (2%) of ``max_seconds`` old: a render is never stopped
  before its limit and at most that much after it.

The defaults are far above any real template (``benchmarks/bench_render_budget.py``):
a 1,601-message agent conversation renders to at most 1.9 million characters
through the shipped, trl's and the test templates, 6% of ``max_chars``; the
slowest, Gemma 4's (quadratic in the messages), takes 8.7 s of CPU on it. Raise them per template with
``ChatTemplate(..., budget=RenderBudget(...))``, or for every template in the
process (and datasets' ``num_proc`` workers, which inherit the environment)
with ``WHILEAI_TEMPLATE_MAX_CHARS`` / ``WHILEAI_TEMPLATE_MAX_SECONDS``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2.utils import Namespace

from whileai_datasets.errors import RenderBudgetError, TemplateError

MAX_CHARS_ENV = "WHILEAI_TEMPLATE_MAX_CHARS"
MAX_SECONDS_ENV = "WHILEAI_TEMPLATE_MAX_SECONDS"
DEFAULT_MAX_CHARS = 1 << 25  # 33,554,432 characters
DEFAULT_MAX_SECONDS = 60.0
BUILT_FACTOR = 4  # all the text one render builds, as a multiple of max_chars
MAX_INT_BITS = 1 << 20  # a product or power with more bits is never a chat template's business
_CHECK_EVERY = 32  # ticks between two looks at the clock
SLACK_SHARE = 0.02  # how stale (wall time, as a share of max_seconds) a thread's CPU reading may be at a render's start


@dataclass(frozen=True)
class RenderBudget:
    """Limits for one render of a chat template.

    Args:
        max_chars: Most characters the rendered text, and any one string or
            list the template builds, may have.
        max_seconds: Most seconds of CPU time one render may take (its
            thread's; waiting for a busy machine does not count).
    Example:
        >>> RenderBudget(max_chars=1_000_000).max_seconds
        60.0
    """

    max_chars: int = DEFAULT_MAX_CHARS
    max_seconds: float = DEFAULT_MAX_SECONDS

    def __post_init__(self) -> None:
        if type(self.max_chars) is not int or self.max_chars < 1:
            raise TemplateError(f"max_chars must be a positive int, got {self.max_chars!r}",
                                location="RenderBudget", hint="Pass a number of characters, e.g. 100_000_000.")
        if type(self.max_seconds) not in (int, float) or not self.max_seconds > 0:
            raise TemplateError(f"max_seconds must be a positive number, got {self.max_seconds!r}",
                                location="RenderBudget", hint="Pass a number of seconds, e.g. 60.")

    @classmethod
    def from_env(cls) -> RenderBudget:
        """The defaults, overridden by ``WHILEAI_TEMPLATE_MAX_CHARS`` / ``WHILEAI_TEMPLATE_MAX_SECONDS``."""
        key = (os.environ.get(MAX_CHARS_ENV), os.environ.get(MAX_SECONDS_ENV))
        if key != _env_cache[0]:
            _env_cache[:] = [key, cls(max_chars=_env_number(MAX_CHARS_ENV, int, DEFAULT_MAX_CHARS),
                                      max_seconds=_env_number(MAX_SECONDS_ENV, float, DEFAULT_MAX_SECONDS))]
        budget: RenderBudget = _env_cache[1]
        return budget


_env_cache: list[Any] = [(None, None), RenderBudget()]


def _env_number(name: str, kind: type, default: float) -> Any:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = kind(text.replace("_", ""))
    except ValueError:
        value = None
    if value is None or not value > 0:
        raise TemplateError(f"{name} must be a positive {'integer' if kind is int else 'number'}, got {text!r}",
                            location=name, hint=f"Set it to e.g. {kind(default) * 4} or unset it.")
    return value


def _how_to_raise(field: str, env: str) -> str:
    return (f"If the template really needs more, raise it with ChatTemplate(..., budget=RenderBudget({field}=...)) "
            f"or the environment variable {env}")


class BudgetExceeded(Exception):
    """Raised inside a render; ``run_template`` turns it into a ``RenderBudgetError`` with the template line."""

    def __init__(self, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint


class Meter:
    """One render's spending against its budget."""

    __slots__ = ("budget", "built", "built_cap", "deadline", "limit", "ticks", "wall_deadline")

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        now = time.perf_counter()
        wall, cpu = _clock_baseline(now, budget.max_seconds * SLACK_SHARE)
        # This thread used at most ``now - wall`` seconds of CPU between its reading and this render's start, so
        # past ``deadline`` (its CPU clock) the render has certainly computed for more than max_seconds; and it
        # cannot get there before ``wall_deadline`` (wall time), so until then the CPU clock is not read at all.
        self.deadline = cpu + (now - wall) + budget.max_seconds
        self.wall_deadline = now + budget.max_seconds
        self.ticks = 0
        self.built = 0
        self.limit = budget.max_chars
        self.built_cap = BUILT_FACTOR * budget.max_chars

    def add(self, chars: int, what: str) -> None:
        """``size`` for the hot paths: the same checks, with the call to it only when one fails."""
        self.built += chars
        if chars > self.limit or self.built > self.built_cap:
            self.built -= chars
            self.size(chars, what)

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % _CHECK_EVERY == 0 and time.perf_counter() > self.wall_deadline and \
                time.thread_time() > self.deadline:
            self.late()

    def late(self) -> None:
        raise BudgetExceeded(
            f"the render computed for more than max_seconds={self.budget.max_seconds:g} s (CPU) of the render "
            f"budget ({self.ticks:,} loop passes and calls so far) and was stopped",
            _how_to_raise("max_seconds", MAX_SECONDS_ENV))

    def size(self, chars: int, what: str) -> None:
        """Refuse ``what`` (about to be built, ``chars`` long) when it is over ``max_chars``.

        Everything built is also counted: a render may build at most
        ``BUILT_FACTOR * max_chars`` characters in all, so many strings each
        under the cap cannot pile up in memory either.
        """
        limit = self.budget.max_chars
        if chars > limit:
            amount = f"more than {limit:,}" if chars == limit + 1 else f"{chars:,}"  # printed_size caps there
            raise BudgetExceeded(
                f"{what} would be {amount} characters, over max_chars={limit:,} of the render "
                "budget; nothing was built", _how_to_raise("max_chars", MAX_CHARS_ENV))
        self.built += chars
        if self.built > BUILT_FACTOR * limit:
            raise BudgetExceeded(
                f"the template has built {self.built:,} characters of text in all, over {BUILT_FACTOR} x "
                f"max_chars={limit:,} of the render budget ({what} was next)", _how_to_raise("max_chars", MAX_CHARS_ENV))

    def int_bits(self, bits: int, what: str) -> None:
        if bits > MAX_INT_BITS:
            raise BudgetExceeded(f"{what} would be a number of about {bits:,} bits (the render budget allows "
                                 f"{MAX_INT_BITS:,})", "No chat template computes numbers like that; do not use it")

#: Per thread: (wall, CPU) of its last CPU-clock reading. Reading a thread's CPU clock is a system call, and
#: on a loaded machine with the encoder's threads running it took 1.6 ms on average (more than a short render):
#: one reading serves every render the thread starts within ``SLACK_SHARE * max_seconds`` of wall time.
_THREAD_CLOCK = threading.local()


def _clock_baseline(now: float, slack: float) -> tuple[float, float]:
    """(wall, CPU time) of this thread, read at most ``slack`` seconds of wall time before ``now``."""
    reading: tuple[float, float] | None = getattr(_THREAD_CLOCK, "reading", None)
    if reading is None or now - reading[0] > slack or now < reading[0]:
        reading = (now, time.thread_time())  # the CPU clock read after ``now``: never below its value then
        _THREAD_CLOCK.reading = reading
    return reading


def _forget_clock() -> None:
    """After a fork the child's thread starts a new CPU clock: the parent's reading means nothing there."""
    _THREAD_CLOCK.__dict__.clear()


os.register_at_fork(after_in_child=_forget_clock)


class MeteredIterable:
    """A loop's iterable that ticks the meter on every pass (and keeps ``len`` for ``loop.length``)."""

    __slots__ = ("items", "meter")

    def __init__(self, items: Any, meter: Meter) -> None:
        self.items = items
        self.meter = meter

    def __iter__(self) -> Iterator[Any]:
        meter = self.meter
        for item in self.items:
            meter.ticks += 1  # Meter.tick, inlined: this runs on every loop pass of every render
            if meter.ticks % _CHECK_EVERY == 0 and time.perf_counter() > meter.wall_deadline and \
                    time.thread_time() > meter.deadline:
                meter.late()
            yield item

    def __len__(self) -> int:
        return len(self.items)


_METER: ContextVar[Meter | None] = ContextVar("whileai_render_meter", default=None)


def current_meter() -> Meter | None:
    """The meter of the render running in this context (None outside a render)."""
    return _METER.get()


# ---------------------------------------------------------------- scopes


class _Scope:
    __slots__ = ("budget", "tripped")

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.tripped: RenderBudgetError | None = None


_SCOPE: ContextVar[_Scope | None] = ContextVar("whileai_render_scope", default=None)


class budget_scope:  # lower case: used as a function, ``with budget_scope(budget):``
    """Run one public operation (render, inspect, patch, one tokenized row) under ``budget``.

    Every render inside gets its own meter. Once one goes over, the rest fail
    at once, and the operation raises that ``RenderBudgetError`` even where
    the code inside caught it (a probe that "failed to render" is the budget,
    not the template's shape). An enclosing scope wins over a nested one.
    A class, not a generator: tokenize enters one per row.
    """

    __slots__ = ("budget", "scope", "token")

    def __init__(self, budget: RenderBudget | None) -> None:
        self.budget = budget
        self.scope: _Scope | None = None

    def __enter__(self) -> None:
        if _SCOPE.get() is None:
            self.scope = _Scope(self.budget or RenderBudget.from_env())
            self.token = _SCOPE.set(self.scope)

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, trace: object) -> None:
        scope = self.scope
        if scope is None:  # an enclosing scope's
            return
        self.scope = None
        _SCOPE.reset(self.token)
        tripped = scope.tripped
        if tripped is None or (err is not None and (err is tripped or not isinstance(err, Exception))):
            return
        if err is not None:
            raise _copy(tripped) from err
        raise _copy(tripped)


def _copy(err: RenderBudgetError) -> RenderBudgetError:
    return RenderBudgetError(err.problem, location=err.location, hint=err.hint)


class metered:  # lower case: used as a function, ``with metered(name, locate) as meter:``
    """One render: a meter for the hooks in the environment, and the budget error with its line."""

    __slots__ = ("locate", "meter", "name", "scope", "token")

    def __init__(self, name: str, locate: Any) -> None:
        self.name, self.locate = name, locate

    def __enter__(self) -> Meter:
        scope = self.scope = _SCOPE.get()
        if scope is not None and scope.tripped is not None:
            raise _copy(scope.tripped)
        self.meter = Meter(scope.budget if scope is not None else RenderBudget.from_env())
        self.token = _METER.set(self.meter)
        return self.meter

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, trace: object) -> None:
        _METER.reset(self.token)
        if isinstance(err, BaseException):
            error = self._error(err)
            if error is not None:
                if self.scope is not None:
                    self.scope.tripped = error
                raise error from None

    def _error(self, err: BaseException) -> RenderBudgetError | None:
        if isinstance(err, BudgetExceeded):
            return RenderBudgetError(err.problem, location=self.locate(err, self.name), hint=err.hint)
        if isinstance(err, RecursionError):
            return RenderBudgetError(
                f"the template recursed past Python's recursion limit ({sys.getrecursionlimit():,} frames; "
                "a macro or recursive loop that calls itself without end)",
                location=self.locate(err, self.name),
                hint="Real templates nest a few levels; sys.setrecursionlimit raises the limit if this one is "
                     "genuine")
        return None


# ---------------------------------------------------------------- values shared by a batch's renders


class SharedValues:
    """Values every render of one batch reads and none can change (the batch's prepared tool lists, their
    tools, their functions: the immutable sandbox refuses every change), and what pure filters made of them.

    A real export repeats its tool schemas on every row, and templates print them with ``| tojson``:
    each (filter, value, arguments) is computed and checked once per batch instead of once per row.
    Values are held while the batch lasts, so their ids stay theirs.
    """

    def __init__(self) -> None:
        self._values: dict[int, Any] = {}
        self._results: dict[tuple[Any, ...], Any] = {}

    def share(self, value: Any, depth: int = 3) -> None:
        """``value`` and, ``depth`` levels down, the lists and dicts it holds."""
        if type(value) not in (list, dict) or depth < 0:
            return
        self._values[id(value)] = value
        for item in (value.values() if type(value) is dict else value):
            self.share(item, depth - 1)

    def key(self, name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        """The memo key of filter ``name`` on ``value`` (None: not a shared value, or unhashable arguments)."""
        if self._values.get(id(value)) is not value:
            return None
        key = (name, id(value), args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def get(self, key: tuple[Any, ...]) -> Any:
        return self._results.get(key)

    def put(self, key: tuple[Any, ...], result: Any) -> None:
        self._results[key] = result


_SHARED: ContextVar[SharedValues | None] = ContextVar("whileai_shared_values", default=None)


def shared_values() -> SharedValues | None:
    """The current batch's shared values (None outside ``sharing``)."""
    return _SHARED.get()


@contextmanager
def sharing() -> Iterator[SharedValues]:
    """Within: renders of one batch, whose shared values go to the yielded ``SharedValues``."""
    shared = SharedValues()
    token = _SHARED.set(shared)
    try:
        yield shared
    finally:
        _SHARED.reset(token)


# ---------------------------------------------------------------- sizes


_SCALARS = frozenset({int, float, bool, type(None)})


def _size(item: Any, sizes: dict[int, int], limit: int) -> int:
    kind = type(item)
    if kind is str:
        return len(item) + 2
    if kind in _SCALARS:
        return item.bit_length() * 3 // 10 + 1 if kind is int and item.bit_length() > 64 else 8
    key = id(item)
    known = sizes.get(key)
    if known is not None:
        return known
    sizes[key] = 5  # while in progress: a cycle prints as "[...]"
    total = 0
    if isinstance(item, dict):
        total = 2 + 4 * len(item)
        for name, value in item.items():
            total += _size(name, sizes, limit) + _size(value, sizes, limit)
            if total > limit:
                break
    elif isinstance(item, (list, tuple, set, frozenset)):
        total = 2 + 2 * len(item)
        for value in item:
            total += _size(value, sizes, limit)
            if total > limit:
                break
    elif isinstance(item, Namespace):
        total = 13 + _size(item._Namespace__attrs, sizes, limit)  # type: ignore[attr-defined]
    elif isinstance(item, str):
        total = len(item)
    else:
        total = 8
    sizes[key] = total = min(total, limit + 1)
    return total


def printed_size(value: Any, limit: int) -> int:
    """About how many characters ``str(value)`` has (capped just over ``limit``).

    A shared reference prints each time it appears (``[a] * 1000`` prints ``a``
    a thousand times), which is what makes nested repetition explode; sizes
    are memoised per object, so measuring such a structure takes time in the
    number of distinct objects, not in its printed size.
    """
    if type(value) is str:
        return len(value)
    return _size(value, {}, limit)

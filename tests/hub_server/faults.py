"""Injected failures: make the Nth request of a route answer 500 or lose its connection.

A rule names a route (the names in `routes.ROUTES`, e.g. `lfs-upload`, `commit`), a mode (`500` or
`drop`), how many matching requests to let through first (`skip`) and how many to fail (`times`).
Rules come from `--fault ROUTE:MODE[:TIMES[:SKIP]]` or from `POST /_local/faults` while running.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Literal

FaultMode = Literal["500", "drop"]
FAULT_MODES: tuple[FaultMode, ...] = ("500", "drop")


@dataclass
class FaultRule:
    route: str
    mode: FaultMode
    times: int = 1
    skip: int = 0
    #: Sent as `Retry-After` with a 500, so a client that backs off waits this long (seconds).
    retry_after: int | None = None
    seen: int = 0
    fired: int = 0

    @classmethod
    def parse(cls, spec: str) -> FaultRule:
        """`ROUTE:MODE[:TIMES[:SKIP]]`, e.g. `lfs-upload:500:3` or `commit:drop:1:1`."""
        parts = spec.split(":")
        if len(parts) < 2 or len(parts) > 4:
            raise ValueError(f"fault spec must be ROUTE:MODE[:TIMES[:SKIP]], got {spec!r}")
        return cls.from_dict(dict(zip(("route", "mode", "times", "skip"), parts, strict=False)))

    @classmethod
    def from_dict(cls, raw: dict[str, object]) -> FaultRule:
        mode = str(raw.get("mode"))
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}, got {mode!r}")
        retry_after = raw.get("retry_after")
        return cls(route=str(raw["route"]), mode=mode,  # type: ignore[arg-type]
                   times=int(str(raw.get("times", 1))), skip=int(str(raw.get("skip", 0))),
                   retry_after=None if retry_after is None else int(str(retry_after)))


class FaultPlan:
    def __init__(self, rules: list[FaultRule] | None = None) -> None:
        self._rules = list(rules or [])
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, route: str) -> FaultRule | None:
        """The rule that fails this request of `route`, if any; counts the request either way."""
        with self._lock:
            for rule in self._rules:
                if rule.route != route or rule.fired >= rule.times:
                    continue
                rule.seen += 1
                if rule.seen > rule.skip:
                    rule.fired += 1
                    return rule
        return None

    def snapshot(self) -> list[dict[str, object]]:
        with self._lock:
            return [asdict(rule) for rule in self._rules]

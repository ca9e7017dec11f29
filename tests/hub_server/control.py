"""`/_local/faults`: add (POST), list (GET) or clear (DELETE) injected faults while the server runs.

This route is test plumbing, not part of the Hub protocol: it is never logged and needs no token
(the server only listens on 127.0.0.1).
"""

from __future__ import annotations

from .app import Request, Response, State
from .errors import HubError
from .faults import FaultRule


def faults(request: Request, state: State) -> Response:
    if request.method == "POST":
        try:
            state.faults.add(FaultRule.from_dict(request.json()))
        except (KeyError, ValueError) as err:
            raise HubError(400, "BadFaultRule", f"bad fault rule: {err}") from None
    elif request.method == "DELETE":
        state.faults.clear()
    return Response.json(state.faults.snapshot())

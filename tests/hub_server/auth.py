"""Who is calling, and what they may see or change.

Tokens map to users (`--token SECRET:alice`); organisations list their members (`--org acme:alice,bob`).
A user may write to their own namespace and to organisations they belong to; they may read public
repos and repos they could write to. Everyone else is told the repo does not exist, as on the Hub.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import HubError


@dataclass(frozen=True)
class Identity:
    """The caller: `name` is None for an anonymous request."""

    name: str | None
    orgs: tuple[str, ...] = ()

    @property
    def anonymous(self) -> bool:
        return self.name is None


ANONYMOUS = Identity(None)


class Auth:
    def __init__(self, tokens: Mapping[str, str], orgs: Mapping[str, tuple[str, ...]]) -> None:
        self.tokens = dict(tokens)
        self.orgs = dict(orgs)

    def identify(self, authorization: str | None) -> Identity:
        """The identity behind an `Authorization` header; an unknown token is a 401, never anonymous."""
        if not authorization:
            return ANONYMOUS
        scheme, _, secret = authorization.partition(" ")
        user = self.tokens.get(secret.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise HubError(401, "InvalidCredentials", "Invalid credentials in Authorization header")
        return Identity(user, tuple(sorted(org for org, members in self.orgs.items() if user in members)))

    def can_write(self, who: Identity, namespace: str) -> bool:
        return who.name is not None and (who.name == namespace or namespace in who.orgs)

    def can_read(self, who: Identity, namespace: str, private: bool) -> bool:
        return not private or self.can_write(who, namespace)


def repo_not_found(who: Identity) -> HubError:
    """What the Hub answers for a repo that is missing or hidden from the caller (the two look the same)."""
    if who.anonymous:
        return HubError(401, "RepoNotFound", "Invalid username or password.")
    return HubError(404, "RepoNotFound", "Repository not found")

"""Routes that move file bytes: resolve (HEAD/GET, with ranges) and the LFS batch/upload/verify trio."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from urllib.parse import unquote

from .app import LfsTicket, Request, Response, State
from .common import URL_PREFIXES, commit_at, readable_repo, writable_repo
from .errors import HubError

LFS_CONTENT_TYPE = "application/vnd.git-lfs+json"
TICKET_LIFETIME = 3600.0
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def resolve(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    commit = commit_at(repo, request.params["rev"])
    path = unquote(request.params["path"])
    entry = commit.files.get(path)
    if entry is None:
        raise HubError(404, "EntryNotFound", f"{path} does not exist on {commit.id}",
                       headers={"X-Repo-Commit": commit.id})
    headers = {
        "X-Repo-Commit": commit.id,
        "ETag": f'"{entry.sha256 if entry.lfs else entry.git_oid}"',
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
    }
    if request.method == "HEAD":
        return Response(200, b"", {**headers, "Content-Length": str(entry.size)})
    data = state.store.read_object(entry.sha256)
    wanted = request.headers.get("Range")
    if not wanted:
        return Response(200, data, headers)
    first, last = _parse_range(wanted, len(data))
    if first > last:
        raise HubError(416, "RangeNotSatisfiable", f"range {wanted} is outside {len(data)} bytes",
                       headers={"Content-Range": f"bytes */{len(data)}"})
    return Response(206, data[first: last + 1], {**headers, "Content-Range": f"bytes {first}-{last}/{len(data)}"})


def _parse_range(header: str, size: int) -> tuple[int, int]:
    """`bytes=a-b`, `bytes=a-` or the suffix form `bytes=-n`; an empty result has first > last."""
    found = _RANGE.match(header.strip())
    if found is None:
        raise HubError(400, "BadRequest", f"unsupported Range header {header!r}")
    start, end = found.groups()
    if not start:
        return max(0, size - int(end or 0)), size - 1
    return int(start), min(int(end) if end else size - 1, size - 1)


def lfs_batch(request: Request, state: State) -> Response:
    """Hand out one upload ticket per object the store does not hold yet; held objects get no actions."""
    repo = writable_repo(request, state)
    body = request.json()
    if body.get("operation") != "upload":
        raise HubError(400, "NotSupported", "the local hub only implements LFS uploads (downloads use resolve)")
    verify_href = f"{request.base_url}/{URL_PREFIXES[repo.repo_type]}{repo.repo_id}.git/info/lfs/objects/verify"
    objects = []
    for item in body.get("objects", []):
        oid, size = str(item["oid"]), int(item["size"])
        answer: dict[str, object] = {"oid": oid, "size": size}
        if not state.store.has_object(oid, size):
            ticket = secrets.token_urlsafe(24)
            state.tickets[ticket] = LfsTicket(sha256=oid, size=size, expires=time.time() + TICKET_LIFETIME)
            answer["authenticated"] = True
            answer["actions"] = {
                "upload": {"href": f"{request.base_url}/lfs-upload/{ticket}", "expires_in": int(TICKET_LIFETIME)},
                "verify": {"href": verify_href},
            }
        objects.append(answer)
    return Response.json({"transfer": "basic", "objects": objects}, headers={"Content-Type": LFS_CONTENT_TYPE})


def lfs_upload(request: Request, state: State) -> Response:
    """The PUT carries no credentials: the ticket in the URL is the authorisation."""
    ticket = state.tickets.get(request.params["ticket"])
    if ticket is None or ticket.expires < time.time():
        raise HubError(403, "InvalidUploadTicket", "unknown or expired upload URL")
    data = request.body()
    if len(data) != ticket.size or hashlib.sha256(data).hexdigest() != ticket.sha256:
        raise HubError(400, "ChecksumMismatch",
                       f"expected {ticket.size} bytes with sha256 {ticket.sha256}, got {len(data)} bytes")
    state.store.put_object(data)
    return Response(200)


def lfs_verify(request: Request, state: State) -> Response:
    writable_repo(request, state)
    body = request.json()
    if not state.store.has_object(str(body.get("oid")), int(body.get("size", -1))):
        raise HubError(404, "LfsObjectMissing", f"LFS object {body.get('oid')} was not uploaded")
    return Response.json({})

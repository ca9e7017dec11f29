"""Routes about a repo's files: preupload, commit, tree listing, paths-info."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from .app import Request, Response, State
from .common import (
    URL_PREFIXES,
    branch_for_write,
    commit_at,
    directories,
    directory_json,
    file_json,
    readable_repo,
    writable_repo,
)
from .errors import HubError
from .store import LFS_SIZE_THRESHOLD, FileEntry, git_blob_sha1, matches_lfs_pattern

TREE_PAGE_SIZE = 1000


def preupload(request: Request, state: State) -> Response:
    """Tell the client, per file, whether it goes to LFS and which version the repo already holds."""
    repo = writable_repo(request, state)
    commit = commit_at(repo, request.params["rev"])
    patterns = repo.lfs_patterns(commit, state.store)
    answers = []
    for item in request.json().get("files", []):
        path, size = str(item["path"]), int(item.get("size", 0))
        sample = base64.b64decode(item.get("sample", ""))
        lfs = size > LFS_SIZE_THRESHOLD or b"\0" in sample or matches_lfs_pattern(path, patterns)
        answer: dict[str, Any] = {"path": path, "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False}
        existing = commit.files.get(path)
        if existing is not None:
            answer["oid"] = existing.upload_oid()
        answers.append(answer)
    return Response.json({"files": answers, "commitOid": commit.id})


def commit(request: Request, state: State) -> Response:
    """Apply an ndjson commit atomically: every operation is checked before the branch moves."""
    repo = writable_repo(request, state)
    if request.arg("create_pr") in ("1", "true", "True"):
        raise HubError(400, "NotSupported", "the local hub does not implement pull requests")
    branch = branch_for_write(repo, request.params["rev"])
    lines = [json.loads(line) for line in request.body().splitlines() if line.strip()]
    header = next((line["value"] for line in lines if line.get("key") == "header"), None)
    if header is None:
        raise HubError(400, "BadRequest", "the commit payload has no header line")
    with state.store.lock:
        head = repo.resolve(branch)
        assert head is not None  # branch_for_write checked the branch exists
        parent = header.get("parentCommit")
        if parent and parent != head.id:
            raise HubError(412, "PreconditionFailed",
                           f"A commit has happened since {parent}: the head of {branch} is {head.id}")
        files = dict(head.files)
        for line in lines:
            _apply(state, files, str(line.get("key")), line.get("value") or {})
        new = state.store.commit(repo, branch, files, title=str(header.get("summary") or "Commit"),
                                 message=str(header.get("description") or ""), author=str(request.who.name))
    url = f"{request.base_url}/{URL_PREFIXES[repo.repo_type]}{repo.repo_id}/commit/{new.id}"
    return Response.json({"commitOid": new.id, "commitUrl": url, "hookOutput": "", "success": True})


def _apply(state: State, files: dict[str, FileEntry], key: str, value: dict[str, Any]) -> None:
    path = str(value.get("path", "")).strip("/")
    if key == "header":
        return
    if key == "file":
        data = base64.b64decode(value.get("content", "")) if value.get("encoding") == "base64" else \
            str(value.get("content", "")).encode()
        files[path] = state.store.entry(path, data, lfs=False)
    elif key == "lfsFile":
        oid, size = str(value.get("oid")), value.get("size")
        if not state.store.has_object(oid, None if size is None else int(size)):
            raise HubError(422, "LfsObjectMissing", f"{path}: LFS object {oid} was never uploaded")
        files[path] = FileEntry(path=path, size=int(size) if size is not None else len(state.store.read_object(oid)),
                                sha256=oid, git_oid=_lfs_pointer_oid(oid, size), lfs=True)
    elif key == "deletedFile":
        if files.pop(path, None) is None:
            raise HubError(404, "EntryNotFound", f"A file with this name doesn't exist: {path}")
    elif key == "deletedFolder":
        doomed = [p for p in files if p.startswith(path + "/")]
        if not doomed:
            raise HubError(404, "EntryNotFound", f"A folder with this name doesn't exist: {path}")
        for p in doomed:
            del files[p]
    else:
        raise HubError(400, "NotSupported", f"the local hub does not implement commit operation {key!r}")


def _lfs_pointer_oid(sha256: str, size: object) -> str:
    """Git stores an LFS file as a pointer blob; its id is what tree listings call the file's `oid`."""
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    return git_blob_sha1(pointer.encode())


def tree(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    commit = commit_at(repo, request.params["rev"])
    folder = unquote(request.params.get("path", "")).strip("/")
    recursive = request.arg("recursive", "false") in ("true", "True", "1")
    folders = directories(commit)
    if folder and folder not in folders:
        raise HubError(404, "EntryNotFound", f"{folder} does not exist on {commit.id}",
                       headers={"X-Repo-Commit": commit.id})
    prefix = f"{folder}/" if folder else ""

    def listed(path: str) -> bool:
        return path.startswith(prefix) and (recursive or "/" not in path[len(prefix):])

    entries = [directory_json(commit, d) for d in sorted(folders) if listed(d)]
    entries += [file_json(commit.files[p]) for p in sorted(commit.files) if listed(p)]
    start = int(request.arg("cursor", "0") or 0)
    page = entries[start: start + TREE_PAGE_SIZE]
    headers = {}
    if start + TREE_PAGE_SIZE < len(entries):
        query = {k: v[0] for k, v in request.query.items()}
        query["cursor"] = str(start + TREE_PAGE_SIZE)
        headers["Link"] = f'<{request.base_url}{request.path}?{urlencode(query)}>; rel="next"'
    return Response.json(page, headers=headers)


def paths_info(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    commit = commit_at(repo, request.params["rev"])
    raw = request.body()
    if (request.headers.get("Content-Type") or "").startswith("application/json"):
        paths = [str(p) for p in json.loads(raw or b"{}").get("paths", [])]
    else:
        paths = parse_qs(raw.decode(), keep_blank_values=True).get("paths", [])
    folders = directories(commit)
    found = []
    for path in (p.strip("/") for p in paths):
        if path in commit.files:
            found.append(file_json(commit.files[path]))
        elif path in folders:
            found.append(directory_json(commit, path))
    return Response.json(found)

"""Lookups shared by the routes: repo and revision from URL parts, with the Hub's error answers."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import unquote

from .app import Request, State
from .auth import repo_not_found
from .errors import HubError
from .store import Commit, FileEntry, Repo

#: URL segment -> repo type, for `/api/{segment}/...` and for `/{prefix}{repo}/resolve/...`.
API_TYPES = {"datasets": "dataset", "models": "model", "spaces": "space"}
URL_PREFIXES = {"dataset": "datasets/", "model": "", "space": "spaces/"}
PREFIX_TYPES = {prefix: repo_type for repo_type, prefix in URL_PREFIXES.items()}


def repo_type_of(request: Request) -> str:
    """From an `/api/{type}s/` route (`kind`) or a `/{prefix}{repo}` route (`prefix`)."""
    if "kind" in request.params:
        return API_TYPES[request.params["kind"]]
    return PREFIX_TYPES[request.params.get("prefix", "")]


def repo_url(request: Request, repo: Repo) -> str:
    return f"{request.base_url}/{URL_PREFIXES[repo.repo_type]}{repo.repo_id}"


def readable_repo(request: Request, state: State) -> Repo:
    repo = state.store.get(repo_type_of(request), unquote(request.params["repo"]))
    if repo is None or not state.auth.can_read(request.who, repo.namespace, repo.private):
        raise repo_not_found(request.who)
    return repo


def writable_repo(request: Request, state: State) -> Repo:
    repo = readable_repo(request, state)
    if not state.auth.can_write(request.who, repo.namespace):
        raise HubError(403, "Forbidden", f"You don't have the rights to write to {repo.repo_id}")
    return repo


def commit_at(repo: Repo, raw_revision: str) -> Commit:
    revision = unquote(raw_revision)
    commit = repo.resolve(revision)
    if commit is None:
        raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
    return commit


def branch_for_write(repo: Repo, raw_revision: str) -> str:
    """Commits and uploads go to a branch; PR refs and bare shas are refused."""
    branch = unquote(raw_revision)
    if branch not in repo.branches:
        raise HubError(404, "RevisionNotFound", f"Invalid rev id: {branch} (only existing branches accept commits)")
    return branch


def file_json(entry: FileEntry) -> dict[str, Any]:
    """A file as tree listings and paths-info describe it."""
    data: dict[str, Any] = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": entry.path}
    if entry.lfs:
        data["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": 134}
    return data


def directory_json(commit: Commit, path: str) -> dict[str, Any]:
    return {"type": "directory", "oid": hashlib.sha1(f"{commit.id}:{path}".encode()).hexdigest(), "path": path}


def directories(commit: Commit) -> set[str]:
    """Every folder that holds a file of `commit` (folders exist only through their files)."""
    found: set[str] = set()
    for path in commit.files:
        parts = path.split("/")[:-1]
        found.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return found


def repo_info_json(request: Request, repo: Repo, commit: Commit) -> dict[str, Any]:
    with_blobs = request.arg("blobs", "false") in ("true", "True", "1")
    siblings = []
    for entry in sorted(commit.files.values(), key=lambda e: e.path):
        sibling: dict[str, Any] = {"rfilename": entry.path}
        if with_blobs:
            sibling.update(size=entry.size, blobId=entry.git_oid)
            if entry.lfs:
                sibling["lfs"] = {"size": entry.size, "sha256": entry.sha256, "pointerSize": 134}
        siblings.append(sibling)
    return {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id, "author": repo.namespace,
        "sha": commit.id, "private": repo.private, "gated": False, "disabled": False, "downloads": 0, "likes": 0,
        "tags": [], "createdAt": repo.created_at, "lastModified": commit.date, "siblings": siblings,
    }

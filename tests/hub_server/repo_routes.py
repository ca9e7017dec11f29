"""Routes about repos and accounts: info, create, delete, settings, branches, refs, commits, whoami."""

from __future__ import annotations

import re
from urllib.parse import unquote

from .app import Request, Response, State
from .common import (
    URL_PREFIXES,
    commit_at,
    readable_repo,
    repo_info_json,
    writable_repo,
)
from .errors import HubError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def repo_info(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    commit = commit_at(repo, request.params.get("rev", "main"))
    return Response.json(repo_info_json(request, repo, commit))


def create_repo(request: Request, state: State) -> Response:
    if request.who.name is None:
        raise HubError(401, "Unauthorized", "You must be authenticated to create a repo")
    body = request.json()
    name = str(body.get("name", ""))
    namespace = str(body.get("organization") or request.who.name)
    repo_type = str(body.get("type") or "model")
    if not _NAME.match(name) or repo_type not in URL_PREFIXES:
        raise HubError(400, "BadRequest", f"invalid repo name {name!r} or type {repo_type!r}")
    if not state.auth.can_write(request.who, namespace):
        raise HubError(403, "Forbidden", f"You don't have the rights to create a repo under {namespace}")
    repo_id = f"{namespace}/{name}"
    url = f"{request.base_url}/{URL_PREFIXES[repo_type]}{repo_id}"
    with state.store.lock:
        if state.store.get(repo_type, repo_id) is not None:
            raise HubError(409, "RepoExists", f"You already created this {repo_type} repo", body={"url": url})
        private = body.get("visibility") == "private" if "visibility" in body else bool(body.get("private"))
        state.store.create(repo_type, repo_id, private=private, author=request.who.name)
    return Response.json({"url": url, "name": repo_id, "id": repo_id})


def delete_repo(request: Request, state: State) -> Response:
    body = request.json()
    namespace = str(body.get("organization") or request.who.name or "")
    repo = state.store.get(str(body.get("type") or "model"), f"{namespace}/{body.get('name')}")
    if repo is None or not state.auth.can_read(request.who, repo.namespace, repo.private):
        raise HubError(404 if request.who.name else 401, "RepoNotFound", "Repository not found")
    if not state.auth.can_write(request.who, repo.namespace):
        raise HubError(403, "Forbidden", f"You don't have the rights to delete {repo.repo_id}")
    state.store.delete(repo)
    return Response.json({})


def update_settings(request: Request, state: State) -> Response:
    repo = writable_repo(request, state)
    body = request.json()
    if "visibility" in body:
        repo.private = body["visibility"] == "private"
    elif "private" in body:
        repo.private = bool(body["private"])
    state.store.save(repo)
    return Response.json({"private": repo.private})


def create_branch(request: Request, state: State) -> Response:
    repo = writable_repo(request, state)
    branch = unquote(request.params["branch"])
    body = request.json()
    start = commit_at(repo, str(body.get("startingPoint") or "main"))
    with state.store.lock:
        if branch in repo.branches:
            raise HubError(409, "Conflict", f"Reference refs/heads/{branch} already exists")
        repo.branches[branch] = start.id
        state.store.save(repo)
    return Response.json({})


def list_refs(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    branches = [{"name": name, "ref": f"refs/heads/{name}", "targetCommit": sha}
                for name, sha in sorted(repo.branches.items())]
    return Response.json({"branches": branches, "converts": [], "tags": [], "pullRequests": []})


def list_commits(request: Request, state: State) -> Response:
    repo = readable_repo(request, state)
    commits = repo.history(commit_at(repo, request.params["rev"]))
    return Response.json([
        {"id": c.id, "title": c.title, "message": c.message, "date": c.date, "authors": [{"user": c.author}]}
        for c in commits
    ])


def whoami(request: Request, state: State) -> Response:
    if request.who.name is None:
        raise HubError(401, "Unauthorized", "Invalid username or password.")
    return Response.json({
        "type": "user", "name": request.who.name, "fullname": request.who.name,
        "orgs": [{"type": "org", "name": org} for org in request.who.orgs],
        "auth": {"type": "access_token", "accessToken": {"displayName": "local", "role": "write"}},
    })


def agent_harnesses(request: Request, state: State) -> Response:
    return Response.json({"standardEnvVars": [], "harnesses": {}})


def validate_yaml(request: Request, state: State) -> Response:
    """Checks only that a README's front matter is closed; always answers JSON (the client parses first)."""
    content = str(request.json().get("content", ""))
    lines = content.splitlines()
    if lines and lines[0].strip() == "---" and "---" not in (line.strip() for line in lines[1:]):
        return Response.json({"errors": [{"message": "YAML front matter is opened but never closed"}],
                              "warnings": []}, status=400, headers={"X-Error-Code": "InvalidYaml"})
    return Response.json({"errors": [], "warnings": []})


def xet_token(request: Request, state: State) -> Response:
    raise HubError(501, "XetNotSupported",
                   "the local hub does not serve Xet storage; set HF_HUB_DISABLE_XET=1 before importing the client")

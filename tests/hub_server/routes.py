"""The route table: (name, methods, raw-path pattern, handler). Names are what faults and the log use.

Patterns match the raw, still percent-encoded path (hub-protocol.md pitfall 7): a revision never holds
a literal `/` (it is quoted with `safe=""`), so `[^/]+` captures it whole; handlers unquote.
"""

from __future__ import annotations

import re

from . import content_routes, control, file_routes, repo_routes
from .app import Route

_KIND = r"(?P<kind>datasets|models|spaces)"
_REPO = r"(?P<repo>[^/]+/[^/]+)"
_PREFIX = r"(?P<prefix>datasets/|spaces/|)"
_REV = r"(?P<rev>[^/]+)"

_TABLE = (
    # name, methods, pattern over the raw path, handler
    ("whoami", "GET", r"/api/whoami-v2", repo_routes.whoami),
    ("agent-harnesses", "GET", r"/api/agent-harnesses", repo_routes.agent_harnesses),
    ("validate-yaml", "POST", r"/api/validate-yaml", repo_routes.validate_yaml),
    ("repo-create", "POST", r"/api/repos/create", repo_routes.create_repo),
    ("repo-delete", "DELETE", r"/api/repos/delete", repo_routes.delete_repo),
    ("repo-info", "GET", rf"/api/{_KIND}/{_REPO}", repo_routes.repo_info),
    ("repo-info", "GET", rf"/api/{_KIND}/{_REPO}/revision/{_REV}", repo_routes.repo_info),
    ("preupload", "POST", rf"/api/{_KIND}/{_REPO}/preupload/{_REV}", content_routes.preupload),
    ("commit", "POST", rf"/api/{_KIND}/{_REPO}/commit/{_REV}", content_routes.commit),
    ("tree", "GET", rf"/api/{_KIND}/{_REPO}/tree/{_REV}(?:/(?P<path>.+))?", content_routes.tree),
    ("paths-info", "POST", rf"/api/{_KIND}/{_REPO}/paths-info/{_REV}", content_routes.paths_info),
    ("branch-create", "POST", rf"/api/{_KIND}/{_REPO}/branch/(?P<branch>[^/]+)", repo_routes.create_branch),
    ("refs", "GET", rf"/api/{_KIND}/{_REPO}/refs", repo_routes.list_refs),
    ("commits", "GET", rf"/api/{_KIND}/{_REPO}/commits/{_REV}", repo_routes.list_commits),
    ("settings", "PUT", rf"/api/{_KIND}/{_REPO}/settings", repo_routes.update_settings),
    ("xet-token", "GET", rf"/api/{_KIND}/{_REPO}/xet-(?:read|write)-token/{_REV}", repo_routes.xet_token),
    ("lfs-batch", "POST", rf"/{_PREFIX}{_REPO}\.git/info/lfs/objects/batch", file_routes.lfs_batch),
    ("lfs-verify", "POST", rf"/{_PREFIX}{_REPO}\.git/info/lfs/objects/verify", file_routes.lfs_verify),
    ("lfs-upload", "PUT", r"/lfs-upload/(?P<ticket>[A-Za-z0-9_-]+)", file_routes.lfs_upload),
    ("resolve", "HEAD GET", rf"/{_PREFIX}{_REPO}/resolve/{_REV}/(?P<path>.+)", file_routes.resolve),
    ("control", "GET POST DELETE", r"/_local/faults", control.faults),
)

ROUTES: tuple[Route, ...] = tuple(
    Route(name, tuple(methods.split()), re.compile(f"^{pattern}$"), handler)
    for name, methods, pattern, handler in _TABLE
)

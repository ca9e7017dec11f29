"""The local hub itself, over plain HTTP: the protocol details the clients depend on (hub-protocol.md §2-6)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.error
import urllib.request
import uuid

import pytest

ALICE = "alice-token-0001"  # the tokens conftest starts the server with
BOB = "bob-token-0002"


@pytest.fixture
def repo(hub) -> str:
    """A private dataset repo of alice's holding `data/a.bin` (LFS) and `README.md` (regular)."""
    name = f"proto-{uuid.uuid4().hex[:8]}"
    hub.call("POST", "/api/repos/create", token=ALICE, body={"name": name, "type": "dataset", "private": True})
    blob = _blob(f"alice/{name}")
    oid = hashlib.sha256(blob).hexdigest()
    _, _, batch = hub.call("POST", f"/datasets/alice/{name}.git/info/lfs/objects/batch", token=ALICE,
                           body={"operation": "upload", "objects": [{"oid": oid, "size": len(blob)}]})
    upload = batch["objects"][0]["actions"]["upload"]["href"].removeprefix(hub.url)
    hub.call("PUT", upload, raw=blob)
    lines = [{"key": "header", "value": {"summary": "add files"}},
             {"key": "lfsFile", "value": {"path": "data/a.bin", "algo": "sha256", "oid": oid, "size": len(blob)}},
             {"key": "file", "value": {"path": "README.md", "encoding": "base64",
                                       "content": base64.b64encode(b"# hi\n").decode()}}]
    status, _, _ = hub.call("POST", f"/api/datasets/alice/{name}/commit/main", token=ALICE,
                            raw=b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    assert status == 200
    return f"alice/{name}"


def _blob(repo: str) -> bytes:
    """1 KiB of content no other repo holds (the server stores each content once, whatever the repo)."""
    return hashlib.sha256(repo.encode()).digest() * 32


def test_every_error_answer_carries_an_error_code_and_a_json_body(hub, repo):
    cases = {
        "anonymous, private repo": ("GET", f"/api/datasets/{repo}", None, 401, "RepoNotFound"),
        "other user, private repo": ("GET", f"/api/datasets/{repo}", BOB, 404, "RepoNotFound"),
        "unknown token": ("GET", f"/api/datasets/{repo}", "forged", 401, "InvalidCredentials"),
        "unknown revision": ("GET", f"/api/datasets/{repo}/revision/nope", ALICE, 404, "RevisionNotFound"),
        "missing file": ("HEAD", f"/datasets/{repo}/resolve/main/nope.txt", ALICE, 404, "EntryNotFound"),
        "missing folder": ("GET", f"/api/datasets/{repo}/tree/main/nope", ALICE, 404, "EntryNotFound"),
        "write without rights": ("POST", f"/api/datasets/{repo}/preupload/main", BOB, 404, "RepoNotFound"),
        "unknown route": ("GET", "/api/spaces-of-nothing", ALICE, 404, "RouteNotFound"),
        "xet": ("GET", f"/api/datasets/{repo}/xet-write-token/main", ALICE, 501, "XetNotSupported"),
    }
    for label, (method, path, token, status, code) in cases.items():
        got_status, headers, body = hub.call(method, path, token=token)
        assert (label, got_status, headers.get("X-Error-Code")) == (label, status, code)
        assert method == "HEAD" or (isinstance(body, dict) and body["error"]), label


def test_a_missing_file_answer_names_the_commit(hub, repo):
    _, headers, _ = hub.call("HEAD", f"/datasets/{repo}/resolve/main/nope.txt", token=ALICE)

    assert headers["X-Repo-Commit"] == hub.head(repo, ALICE)


def test_resolve_sends_a_40_hex_commit_an_etag_and_byte_ranges(hub, repo):
    path = f"/datasets/{repo}/resolve/main/data/a.bin"
    blob = _blob(repo)

    _, head, _ = hub.call("HEAD", path, token=ALICE)
    status, ranged, body = _ranged(hub, path, "bytes=1-3")
    too_far = _ranged(hub, path, "bytes=5000-")

    assert re.fullmatch(r"[0-9a-f]{40}", head["X-Repo-Commit"])
    assert (head["ETag"], head["Content-Length"]) == (f'"{hashlib.sha256(blob).hexdigest()}"', "1024")
    assert (status, ranged["Content-Range"], body) == (206, "bytes 1-3/1024", blob[1:4])
    assert (too_far[0], too_far[1]["Content-Range"]) == (416, "bytes */1024")


def _ranged(hub, path: str, wanted: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(hub.url + path, headers={"Authorization": f"Bearer {ALICE}", "Range": wanted})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_creating_an_existing_repo_answers_409_with_its_url(hub, repo):
    status, headers, body = hub.call("POST", "/api/repos/create", token=ALICE,
                                     body={"name": repo.split("/")[1], "type": "dataset"})

    assert (status, headers["X-Error-Code"], body["url"]) == (409, "RepoExists", f"{hub.url}/datasets/{repo}")


def test_an_lfs_upload_url_authorises_itself_and_checks_the_bytes(hub, repo):
    blob = b"fresh bytes " + uuid.uuid4().bytes
    oid = hashlib.sha256(blob).hexdigest()
    _, _, batch = hub.call("POST", f"/datasets/{repo}.git/info/lfs/objects/batch", token=ALICE,
                           body={"operation": "upload", "objects": [{"oid": oid, "size": len(blob)}]})
    upload = batch["objects"][0]["actions"]["upload"]["href"].removeprefix(hub.url)

    wrong = hub.call("PUT", upload, raw=b"x" * len(blob))
    forged = hub.call("PUT", "/lfs-upload/not-a-ticket", raw=blob)
    right = hub.call("PUT", upload, raw=blob)  # no Authorization header, like the client's PUT
    _, _, again = hub.call("POST", f"/datasets/{repo}.git/info/lfs/objects/batch", token=ALICE,
                           body={"operation": "upload", "objects": [{"oid": oid, "size": len(blob)}]})

    assert (wrong[0], wrong[1]["X-Error-Code"]) == (400, "ChecksumMismatch")
    assert (forged[0], forged[1]["X-Error-Code"]) == (403, "InvalidUploadTicket")
    assert right[0] == 200
    assert "actions" not in again["objects"][0]  # stored: the client skips the PUT


def test_validate_yaml_answers_json_even_for_an_error(hub):
    good = hub.call("POST", "/api/validate-yaml", token=ALICE, body={"content": "---\na: 1\n---\n# x"})
    bad = hub.call("POST", "/api/validate-yaml", token=ALICE, body={"content": "---\na: 1\n# never closed"})

    assert (good[0], good[2]) == (200, {"errors": [], "warnings": []})
    assert (bad[0], bad[2]["errors"][0]["message"]) == (400, "YAML front matter is opened but never closed")


def test_a_stale_parent_commit_is_refused_with_412(hub, repo):
    line = {"key": "header", "value": {"summary": "late", "parentCommit": "0" * 40}}

    status, headers, _ = hub.call("POST", f"/api/datasets/{repo}/commit/main", token=ALICE,
                                  raw=json.dumps(line).encode() + b"\n")

    assert (status, headers["X-Error-Code"]) == (412, "PreconditionFailed")


def test_a_fault_rule_lets_skip_requests_through_then_fails_times_requests(hub):
    hub.fail("whoami", "500", times=1, skip=1)

    statuses = [hub.call("GET", "/api/whoami-v2", token=ALICE)[0] for _ in range(3)]

    assert statuses == [200, 500, 200]


def test_the_request_log_records_route_status_user_and_body_size(hub, repo):
    body = {"paths": ["README.md", "data", "nope"]}
    mark = hub.mark()
    _, _, found = hub.call("POST", f"/api/datasets/{repo}/paths-info/main", token=ALICE, body=body)

    (entry,) = hub.requests(mark)

    assert [(f["type"], f["path"]) for f in found] == [("file", "README.md"), ("directory", "data")]
    assert {k: entry[k] for k in ("method", "route", "status", "user", "body_bytes")} == {
        "method": "POST", "route": "paths-info", "status": 200, "user": "alice", "body_bytes": len(json.dumps(body))}

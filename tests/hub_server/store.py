"""Repos on disk: metadata as one JSON file per repo, file contents as content-addressed objects.

Each commit keeps a full snapshot of its tree (path -> FileEntry), so any old commit stays readable
(`revision=<sha>`) without git. Commit and blob ids are 40-hex sha1 values; the blob id of a file is
its git blob sha1, so the client's own `git_hash` of a regular file matches what the server reports.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Files above this size are stored as LFS objects whatever their name (as on the Hub).
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024

#: The `.gitattributes` written by the initial commit of every new repo: which names go to LFS.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.gz", "*.h5", "*.lz4", "*.model", "*.msgpack", "*.npy",
        "*.npz", "*.onnx", "*.parquet", "*.pickle", "*.pkl", "*.pt", "*.pth", "*.safetensors",
        "*.tar", "*.tgz", "*.xz", "*.zip", "*.zst",
    )
)


def git_blob_sha1(data: bytes) -> str:
    """The id git gives a blob with this content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def now_iso() -> str:
    """The Hub's timestamp format (`%Y-%m-%dT%H:%M:%S.%fZ`, milliseconds)."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


@dataclass
class FileEntry:
    path: str
    size: int
    sha256: str
    git_oid: str
    lfs: bool

    def upload_oid(self) -> str:
        """What preupload reports as `oid`: sha256 for LFS files, the git blob sha1 otherwise."""
        return self.sha256 if self.lfs else self.git_oid


@dataclass
class Commit:
    id: str
    parent: str | None
    title: str
    message: str
    date: str
    author: str
    files: dict[str, FileEntry]


@dataclass
class Repo:
    repo_type: str  # "dataset" | "model" | "space"
    repo_id: str  # "namespace/name"
    private: bool
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.repo_id.split("/", 1)[0]

    def resolve(self, revision: str) -> Commit | None:
        """A branch name or a full 40-hex commit id; anything else (tags, PR refs) is unknown."""
        sha = self.branches.get(revision, revision)
        return self.commits.get(sha)

    def head(self, branch: str = "main") -> Commit | None:
        return self.resolve(branch) if branch in self.branches else None

    def history(self, commit: Commit) -> list[Commit]:
        """`commit` and its ancestors, newest first."""
        chain: list[Commit] = []
        current: Commit | None = commit
        while current is not None:
            chain.append(current)
            current = self.commits.get(current.parent) if current.parent else None
        return chain

    def lfs_patterns(self, commit: Commit, store: Store) -> list[str]:
        entry = commit.files.get(".gitattributes")
        if entry is None:
            return []
        text = store.read_object(entry.sha256).decode("utf-8", "replace")
        return [line.split()[0] for line in text.splitlines() if "filter=lfs" in line and line.split()]


def matches_lfs_pattern(path: str, patterns: list[str]) -> bool:
    """gitattributes matching, simplified: a pattern with a slash matches the whole path, else the name."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(path if "/" in pattern else name, pattern) for pattern in patterns)


class Store:
    """All repos and objects under one directory. Every mutation holds `lock`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.RLock()
        (root / "objects").mkdir(parents=True, exist_ok=True)
        (root / "repos").mkdir(parents=True, exist_ok=True)
        self._repos: dict[tuple[str, str], Repo] = {}
        for meta in sorted((root / "repos").glob("*/*/*.json")):
            repo = _repo_from_json(json.loads(meta.read_text("utf-8")))
            self._repos[(repo.repo_type, repo.repo_id)] = repo

    # --- objects ---------------------------------------------------------------------------------
    def put_object(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / "objects" / digest
        if not path.exists():
            tmp = path.with_suffix(f".tmp-{secrets.token_hex(4)}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return digest

    def has_object(self, sha256: str, size: int | None = None) -> bool:
        path = self.root / "objects" / sha256
        return path.is_file() and (size is None or path.stat().st_size == size)

    def read_object(self, sha256: str) -> bytes:
        return (self.root / "objects" / sha256).read_bytes()

    # --- repos -----------------------------------------------------------------------------------
    def get(self, repo_type: str, repo_id: str) -> Repo | None:
        return self._repos.get((repo_type, repo_id))

    def create(self, repo_type: str, repo_id: str, *, private: bool, author: str) -> Repo:
        with self.lock:
            repo = Repo(repo_type=repo_type, repo_id=repo_id, private=private, created_at=now_iso())
            self._repos[(repo_type, repo_id)] = repo
            attributes = DEFAULT_GITATTRIBUTES.encode()
            self.commit(repo, "main", {".gitattributes": self.entry(".gitattributes", attributes, lfs=False)},
                        title="initial commit", message="", author=author)
            return repo

    def delete(self, repo: Repo) -> None:
        with self.lock:
            del self._repos[(repo.repo_type, repo.repo_id)]
            self._meta_path(repo).unlink(missing_ok=True)

    def entry(self, path: str, data: bytes, *, lfs: bool) -> FileEntry:
        """Store `data` and describe it as a file of a tree."""
        return FileEntry(path=path, size=len(data), sha256=self.put_object(data), git_oid=git_blob_sha1(data), lfs=lfs)

    def commit(self, repo: Repo, branch: str, files: dict[str, FileEntry], *, title: str, message: str,
               author: str) -> Commit:
        """Make `files` (a full tree) the new head of `branch`."""
        with self.lock:
            parent = repo.branches.get(branch)
            seed = json.dumps([parent, sorted(files), title, time.time_ns(), secrets.token_hex(8)])
            commit = Commit(id=hashlib.sha1(seed.encode()).hexdigest(), parent=parent, title=title,
                            message=message, date=now_iso(), author=author, files=dict(files))
            repo.commits[commit.id] = commit
            repo.branches[branch] = commit.id
            self.save(repo)
            return commit

    def save(self, repo: Repo) -> None:
        with self.lock:
            path = self._meta_path(repo)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(repo)), "utf-8")
            os.replace(tmp, path)

    def _meta_path(self, repo: Repo) -> Path:
        namespace, name = repo.repo_id.split("/", 1)
        return self.root / "repos" / repo.repo_type / namespace / f"{name}.json"


def _repo_from_json(raw: dict) -> Repo:
    commits = {
        sha: Commit(**{**c, "files": {p: FileEntry(**e) for p, e in c["files"].items()}})
        for sha, c in raw["commits"].items()
    }
    return Repo(repo_type=raw["repo_type"], repo_id=raw["repo_id"], private=raw["private"],
                created_at=raw["created_at"], branches=raw["branches"], commits=commits)

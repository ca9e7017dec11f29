"""Download a public chat-template corpus from PyPI and npm, pinned, and extract its templates.

``bench_patch_rate.py --corpus DIR`` then measures the patcher on templates
that are not ours: llama.cpp's (vendored in llama-cpp-python's sdist), vLLM's
(its sdist: the wheel carries only a few), axolotl's, unsloth's, ldp's and a
few more. Nothing is installed into the running environment: wheels are fetched
with ``pip download --no-deps``, npm packages with ``npm pack``, and unpacked
with ``zipfile``/``tarfile``. The output folder is git-ignored.

    python benchmarks/fetch_template_corpus.py [--dest benchmarks/.data/template-corpus] [--minimal]
        [--downloads DIR]   # reuse archives already downloaded (same file names) instead of the network
        [--max-mb 50] [--file-seconds 30]   # skip bigger files, and files slower to read, naming each

GGUF files (llama.cpp's vocab files) are read for their header's ``tokenizer.chat_template*`` strings only:
the vocab arrays are skipped by seeking, so a 15 MB vocab file costs milliseconds, not minutes.

Writes ``DEST/templates/<source>/<name>.jinja`` and ``DEST/templates/SOURCES.tsv``
(file, package, version, registry, path_in_package, kind, sha256_12, tier).
``--minimal`` fetches only the five packages that hold every ``model``-tier
template (about 200 MB less to unpack than the whole list, same headline).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import tarfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _template_sources import candidates, looks_like_chat_template, safe_name, tier  # noqa: E402

DEFAULT_DEST = Path(__file__).resolve().parent / ".data" / "template-corpus"
#: (registry, package, version, in the minimal set)
PACKAGES = (
    ("pypi-sdist", "llama-cpp-python", "0.3.36", True),
    ("pypi-sdist", "vllm", "0.33.0", True),
    ("pypi", "axolotl", "0.19.0", True),
    ("pypi", "unsloth", "2026.10.9", True),
    ("pypi", "ldp", "1.10.0", True),
    ("pypi", "unsloth-zoo", "2026.10.9", False),
    ("pypi", "chat-bricks", "0.1.5", False),
    ("pypi", "mistral-common", "1.13.1", False),
    ("pypi", "sglang", "0.5.23", False),
    ("pypi", "renderers", "0.1.12", False),
    ("pypi", "autochat", "0.19.0", False),
    ("pypi", "llamafactory", "0.9.5", False),
    ("pypi", "ms-swift", "4.6.0", False),
    ("npm", "@huggingface/jinja", "0.5.11", False),
    ("npm", "node-llama-cpp", "3.22.1", False),
    ("npm", "@mlc-ai/web-llm", "0.2.86", False),
    ("npm", "@wllama/wllama", "3.13.0", False),
)
#: vLLM's sdist metadata needs these setuptools plugins, without build isolation (else pip falls back to
#: an old release), and its version pinned (else it reports 0.33.0+empty and pip discards the file).
VLLM_BUILD_DEPS = ("setuptools-rust", "semantic-version", "setuptools-scm", "vcs-versioning")


def _run(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env, cwd=cwd)


def _archive_prefix(registry: str, package: str) -> str:
    """How an archive of ``package`` is named: ``llama_cpp_python-`` (pip), ``mlc-ai-web-llm-`` (npm)."""
    if registry == "npm":
        return package.replace("@", "").replace("/", "-") + "-"
    return package.replace("-", "_") + "-"


def _have(folder: Path, registry: str, package: str, version: str) -> Path | None:
    prefix = _archive_prefix(registry, package) + version
    return next((p for p in sorted(folder.glob("*")) if p.name.startswith(prefix) and p.is_file()), None)


def download(registry: str, package: str, version: str, folder: Path) -> Path:
    """The archive of one pinned package in ``folder``, downloaded unless it is there already."""
    found = _have(folder, registry, package, version)
    if found is not None:
        return found
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder)]
    if registry == "npm":
        _run(["npm", "pack", "-q", f"{package}@{version}"], cwd=folder)
    elif package == "vllm":
        deps = folder / "build-deps"
        _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(deps), *VLLM_BUILD_DEPS])
        env = {**os.environ, "VLLM_VERSION_OVERRIDE": version, "VLLM_TARGET_DEVICE": "empty",
               "PYTHONPATH": str(deps)}
        _run([*pip, "--no-binary", "vllm", "--no-build-isolation", f"vllm=={version}"], env=env)
    elif registry == "pypi-sdist":
        _run([*pip, "--no-binary", ":all:", f"{package}=={version}"])
    else:
        _run([*pip, "--only-binary", ":all:", f"{package}=={version}"])
    found = _have(folder, registry, package, version)
    if found is None:
        raise SystemExit(f"{package}=={version}: the download left no archive in {folder}; "
                         "see pip's or npm's output above")
    return found


def unpack(archive: Path, into: Path) -> Path:
    """``archive`` (wheel, .tar.gz, .tgz) unpacked into ``into/<archive stem>`` (once)."""
    stem = archive.name.removesuffix(".whl").removesuffix(".tar.gz").removesuffix(".tgz")
    target = into / stem
    if target.exists():
        return target
    partial = into / (stem + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(partial)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
    partial.rename(target)
    return target


class _TooSlow(Exception):
    """One file's candidates took longer than ``--file-seconds``."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _TooSlow


def _file_candidates(path: Path, root: Path, seconds: int) -> list[tuple[str, str, str]] | None:
    """The chat templates one file holds, or None when reading it took longer than ``seconds`` (named)."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        return [c for c in candidates(path, root) if looks_like_chat_template(c[1])]
    except _TooSlow:
        print(f"  skipped {path}: reading it took more than {seconds} s", flush=True)
        return None
    finally:
        signal.alarm(0)


def _package_files(root: Path, max_bytes: int) -> list[Path]:
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.stat().st_size > max_bytes and path.suffix.lower() != ".gguf":  # a GGUF header is read alone
            print(f"  skipped {path.relative_to(root)}: {path.stat().st_size >> 20} MB, over --max-mb", flush=True)
            continue
        files.append(path)
    return files


def extract(unpacked: list[tuple[Path, str, str, str]], out: Path, *, max_bytes: int, file_seconds: int) -> int:
    """Write every distinct template of the unpacked packages under ``out``; return how many."""
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    rows = []
    for root, package, version, registry in sorted(unpacked):  # by folder name: the first found names a template
        start, before = time.monotonic(), len(seen)
        source = safe_name(package.replace("@", "").replace("/", "-"))
        names: set[str] = set()
        files = _package_files(root, max_bytes)
        for path in files:
            inner = str(path.relative_to(root))
            for name, text, kind in _file_candidates(path, root, file_seconds) or ():
                digest = hashlib.sha256(text.encode()).hexdigest()
                if digest in seen:
                    rows.append((f"dup:{seen[digest]}", package, version, registry, inner, kind, digest[:12], ""))
                    continue
                stem, n = safe_name(name), 2
                while stem in names:
                    stem, n = f"{safe_name(name)}_{n}", n + 1
                names.add(stem)
                relative = f"{source}/{stem}.jinja"
                (out / source).mkdir(exist_ok=True)
                (out / relative).write_text(text, encoding="utf-8")
                seen[digest] = relative
                rows.append((relative, package, version, registry, inner, kind, digest[:12], tier(inner, kind, stem)))
        print(f"{package} {version}: {len(files)} files read, {len(seen) - before} new templates, "
              f"{time.monotonic() - start:.1f} s", flush=True)
    header = "file\tpackage\tversion\tregistry\tpath_in_package\tkind\tsha256_12\ttier\n"
    (out / "SOURCES.tsv").write_text(header + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return len(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where downloads and templates go")
    parser.add_argument("--minimal", action="store_true", help="only the packages holding model templates")
    parser.add_argument("--downloads", type=Path, help="a folder of archives downloaded before, used as is")
    parser.add_argument("--max-mb", type=int, default=50, help="skip files bigger than this (GGUF headers excepted)")
    parser.add_argument("--file-seconds", type=int, default=30, help="skip a file whose reading takes longer")
    args = parser.parse_args()
    downloads = args.dest / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    unpacked = []
    for registry, package, version, minimal in PACKAGES:
        if args.minimal and not minimal:
            continue
        archive = None
        if args.downloads is not None:
            archive = (_have(args.downloads, registry, package, version)
                       or _have(args.downloads / "sdist", registry, package, version))
        archive = archive or download(registry, package, version, downloads)
        print(f"unpacking {archive.name}", flush=True)
        unpacked.append((unpack(archive, args.dest / "unpacked"), package, version, registry))
    count = extract(unpacked, args.dest / "templates", max_bytes=args.max_mb << 20, file_seconds=args.file_seconds)
    print(f"{count} distinct templates in {args.dest / 'templates'} (SOURCES.tsv lists each and its duplicates)")


if __name__ == "__main__":
    main()

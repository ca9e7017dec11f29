"""The wheel installs everything: builders/ and templates/ included.

Builds the wheel, installs it into a fresh virtual environment (runtime
dependencies only) and, in a subprocess there, loads a shipped template and
runs ``load_dataset("whileai/export", ...)`` and the demo command; then the
same from the repository root (where the source folder comes first on
``sys.path``), and from an sdist and an editable install.

``whileai_datasets/builders`` and ``whileai_datasets/templates`` are relative
symlinks to the card's top-level folders, so the source tree itself is a
complete package: no install mapping for it to shadow."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECK = r"""
import json, sys
from importlib.resources import files
import datasets
import whileai_datasets
assert "site-packages" in whileai_datasets.__file__, whileai_datasets.__file__
templates = sorted(p.name for p in files("whileai_datasets.templates").iterdir() if p.name.endswith((".jinja", ".md")))
qwen = whileai_datasets.ChatTemplate.shipped("qwen2_5")
assert qwen.inspect().has_generation_block
ds = datasets.load_dataset("whileai/export", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
print(json.dumps({"rows": ds.num_rows, "first": ds[0]["messages"][0], "templates": templates,
                  "builder": whileai_datasets.builders.whileai_export.__file__}))
"""


#: Run from the repository root: the package there is the source folder.
FROM_ROOT = r"""
import json
from importlib.resources import files
import whileai_datasets
import whileai_datasets.builders.whileai_export as builder
qwen = whileai_datasets.ChatTemplate.shipped("qwen2_5")
assert qwen.inspect().has_generation_block
print(json.dumps({"package": whileai_datasets.__file__, "builder": builder.__file__,
                  "card": (files("whileai_datasets.templates") / "dataset_card.md").is_file()}))
"""


def _site_dirs() -> list[str]:
    """Where this interpreter's packages are installed: a venv's own site-packages, the system
    Python's, a conda env's, the user site: whichever this run uses."""
    found = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")]
    found += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def _inherit_packages(python: Path) -> None:
    """Let the venv of ``python`` import this interpreter's packages after its own.

    ``system_site_packages=True`` would give the *base* interpreter's site-packages, which inside
    a venv is not where the dependencies are. A ``.pth`` file of plain paths adds these folders
    to ``sys.path`` without running their own ``.pth`` files, so this run's editable install of
    the package does not leak into the child: the child's own install is the one tested."""
    child_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    (Path(child_site) / "zz_inherited_packages.pth").write_text("\n".join(_site_dirs()) + "\n", encoding="utf-8")


def _last_json(stdout: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(stdout.strip().splitlines()[-1])
    return loaded


def test_the_package_folder_links_to_the_top_level_folders() -> None:
    for name in ("builders", "templates"):
        link = ROOT / "whileai_datasets" / name
        assert link.is_symlink() and os.readlink(link) == f"../{name}"
        assert link.resolve() == (ROOT / name).resolve()
    tracked = subprocess.run(["git", "ls-files", "-s", "whileai_datasets/builders", "whileai_datasets/templates"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    modes = {line.split()[-1]: line.split()[0] for line in tracked if line}
    assert modes == {"whileai_datasets/builders": "120000", "whileai_datasets/templates": "120000"}


@pytest.mark.slow
def _fresh_env() -> dict[str, str]:
    """This process's environment for the fresh venv's Python, without PYTHONPATH: a source tree put on the
    path by whoever runs the suite would shadow the install under test."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_wheel_installs_and_loads_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )
    wheel = next(dist.glob("whileai_datasets-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # --no-compile: the byte-compiling of every dependency is most of an install and tests nothing of ours
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], env=_fresh_env(),
                   check=True, capture_output=True, timeout=1200)
    data = ROOT / "tests" / "data" / "otel.jsonl"
    done = subprocess.run(
        [str(python), "-c", CHECK, str(data), str(tmp_path / "cache")],
        env=_fresh_env(), check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rows"] == 1
    # every field of the message struct, null where the message has none (built-in feature types)
    assert {k: v for k, v in report["first"].items() if v is not None} == {"role": "user", "content": "Look up ORD-5"}
    assert str(env_dir) in report["builder"]
    assert {"qwen2_5.jinja", "llama3_1.jinja", "dataset_card.md"} <= set(report["templates"])
    demo = subprocess.run(
        [str(env_dir / "bin" / "whileai-datasets"), "demo", "--out", str(tmp_path / "demo.parquet")],
        check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={"HF_DATASETS_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert "rows        72" in demo.stdout
    # from the repository root, the source folder shadows the install: it must be complete
    root = subprocess.run([str(python), "-c", FROM_ROOT], env=_fresh_env(), check=True, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    found = _last_json(root.stdout)
    assert found["package"] == str(ROOT / "whileai_datasets" / "__init__.py")
    assert found["builder"] == str(ROOT / "whileai_datasets" / "builders" / "whileai_export.py")
    assert found["card"] is True
    # an sdist holds the files themselves (not the links) and installs the same package
    subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    sdist = next(dist.glob("whileai_datasets-*.tar.gz"))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(sdist)],
                   env=_fresh_env(), check=True, capture_output=True, timeout=1200)
    again = subprocess.run([str(python), "-c", CHECK, str(data), str(tmp_path / "cache")],
                           env=_fresh_env(), check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert _last_json(again.stdout)["rows"] == 1


@pytest.mark.slow
def test_an_editable_install_imports_the_top_level_folders(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _inherit_packages(python)  # the dependencies are already installed where this test runs
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)], env=_fresh_env(),
                   check=True, capture_output=True, timeout=1200)
    for cwd in (tmp_path, ROOT):
        done = subprocess.run([str(python), "-c", FROM_ROOT], env=_fresh_env(), check=True, capture_output=True,
                              text=True, timeout=600, cwd=cwd)
        found = _last_json(done.stdout)
        assert Path(str(found["builder"])).resolve() == (ROOT / "builders" / "whileai_export.py").resolve()
        assert found["card"] is True

"""The wheel installs everything: builders/ and templates/ included.

Builds the wheel, installs it into a fresh virtual environment (runtime
dependencies only) and, in a subprocess there, loads a shipped template and
runs ``load_dataset("whileai/export", ...)`` and the demo command."""

from __future__ import annotations

import json
import subprocess
import sys
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


@pytest.mark.slow
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
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True, timeout=1200)
    data = ROOT / "tests" / "data" / "otel.jsonl"
    done = subprocess.run(
        [str(python), "-c", CHECK, str(data), str(tmp_path / "cache")],
        check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rows"] == 1
    assert report["first"] == {"role": "user", "content": "Look up ORD-5"}
    assert str(env_dir) in report["builder"]
    assert {"qwen2_5.jinja", "llama3_1.jinja", "dataset_card.md"} <= set(report["templates"])
    demo = subprocess.run(
        [str(env_dir / "bin" / "whileai-datasets"), "demo", "--out", str(tmp_path / "demo.parquet")],
        check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={"HF_DATASETS_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert "rows        72" in demo.stdout

"""Whole publishes to a local Hub server, one fresh process each (see bench_publish.py --publish)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._data import DATA_DIR, SYSTEM_PROMPT, TOOLS, make_unique_file

ROOT = Path(__file__).resolve().parent.parent
CACHE = DATA_DIR / "publish-cache"
OLD_SOURCE = DATA_DIR / "publish-old-src"
TOKEN = "bench-token-0001"
OLD_LIMIT = 100_000  # main's publish grows ~26 MB per 1,000 rows: never run it past this


def _load(n: int) -> Any:
    import datasets

    import whileai_datasets  # noqa: F401  (registers the builder)

    return datasets.load_dataset("whileai/export", data_files=str(make_unique_file(None, n)), split="train",
                                 cache_dir=str(CACHE), system_prompt=SYSTEM_PROMPT, tools=TOOLS)


def child(n: int, engine: str, repo: str) -> None:
    """One measured publish; prints a JSON line with the seconds and the peak RSS (MB) of this process tree."""
    from benchmarks._memory import TotalPeak

    peak = TotalPeak()
    if engine == "ray":
        import ray

        from whileai_datasets.ray_engine.publish import publish_rollouts

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        start = time.perf_counter()
        result = publish_rollouts(str(make_unique_file(None, n)), repo, system_prompt=SYSTEM_PROMPT, tools=TOOLS,
                                  split_key="scenario_id", token=TOKEN)
        seconds = time.perf_counter() - start
        ray.shutdown()
    else:
        from whileai_datasets.hub import publish, split_by

        ds = _load(n)
        start = time.perf_counter()
        result = publish(split_by(ds, "scenario_id"), repo, token=TOKEN, split_key="scenario_id")
        seconds = time.perf_counter() - start
    import whileai_datasets.hub.publishing as used

    print(json.dumps({"package": used.__file__, "seconds": seconds, "peak_mb": peak.mb, "anon_mb": peak.anon_mb, "configs": result["configs"]}))


def _old_source() -> Path:
    """main's package, unpacked once (`git archive main`), to import instead of this checkout's
    (a folder holding only `whileai_datasets`, so `benchmarks` still comes from here)."""
    shim = OLD_SOURCE / "package"
    if not (OLD_SOURCE / "whileai_datasets").exists():
        archive = subprocess.run(["git", "archive", "main"], cwd=ROOT, check=True, capture_output=True).stdout
        OLD_SOURCE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as handle:
            handle.write(archive)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(OLD_SOURCE, filter="data")
    if not (shim / "whileai_datasets").exists():
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "whileai_datasets").symlink_to(OLD_SOURCE / "whileai_datasets")
    return shim


def _server(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = root / "port"
    command = [sys.executable, str(ROOT / "tests" / "hub_server"), "--port", "0", "--port-file", str(port),
               "--data-dir", str(root / "data"), f"--token={TOKEN}:bench"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if port.exists():
            return server, f"http://127.0.0.1:{port.read_text()}"
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("the local hub did not start")


def _measure(n: int, engine: str, repo: str, endpoint: str, home: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(home), HF_UPDATE_DOWNLOAD_COUNTS="0",
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1",
               NO_PROXY="127.0.0.1,localhost")
    env["PYTHONPATH"] = str(ROOT)
    if engine == "old":
        env["BENCH_PUBLISH_PACKAGE"] = str(_old_source())
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_publish.py"), "--child", str(n),
               "ray" if engine == "ray" else "local", repo]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{engine} {n}: {done.stderr[-3000:]}")
    got = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if (engine == "old") != got["package"].startswith(str(OLD_SOURCE)):
        raise RuntimeError(f"{engine} ran the package at {got['package']}")
    return got


def run_publishes(sizes: list[int], *, old: bool, ray: bool, local: bool = True) -> None:
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server, endpoint = _server(Path(tmp))
        try:
            for n in sizes:
                _load(n)  # parse and cache outside the clock
                engines = [*(["new"] if local else []), *(["old"] if old and n <= OLD_LIMIT else []),
                           *(["ray"] if ray else [])]
                for engine in engines:
                    results[engine, n] = got = _measure(n, engine, f"bench/{engine}-{n}", endpoint, Path(tmp) / engine)
                    rows = sum(got["configs"]["canonical"].values())
                    print(f"{engine:4} {n:>9} rows ({rows} canonical): {got['seconds']:8.1f} s, "
                          f"peak RSS {got['peak_mb']:7.0f} MB (anonymous {got['anon_mb']:7.0f} MB)", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    _summary(results, sizes)


def _summary(results: dict[tuple[str, int], dict[str, Any]], sizes: list[int]) -> None:
    for n in sizes:
        if ("old", n) in results:
            old, new = results["old", n], results["new", n]
            print(f"at {n} rows: old/new time {old['seconds'] / new['seconds']:.2f}x, "
                  f"peak RSS {old['peak_mb']:.0f} MB -> {new['peak_mb']:.0f} MB")
    if len(sizes) < 2:
        return
    small, large = sorted(sizes)[0], sorted(sizes)[-1]
    for engine in ("new", "ray"):
        if (engine, small) in results and (engine, large) in results:
            a, b = results[engine, small], results[engine, large]
            per_row = (b["seconds"] - a["seconds"]) / (large - small)
            mb_per_k = (b["peak_mb"] - a["peak_mb"]) / (large - small) * 1000
            estimate = b["seconds"] + per_row * (10_000_000 - large)
            print(f"{engine}: {per_row * 1e6:.1f} µs per row, {mb_per_k:+.2f} MB peak RSS per 1,000 rows; "
                  f"10M rows estimated at {estimate / 60:.0f} min and {b['peak_mb'] + mb_per_k * (10_000_000 - large) / 1000:.0f} MB")

"""Whole publishes to a local Hub server, one fresh process each (see bench_publish.py --publish)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
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


def child(n: int, engine: str, repo: str, object_store_mb: int = 0) -> None:
    """One measured publish; prints a JSON line with the seconds, the peak RSS (MB) of this process tree,
    its CPU seconds, its RSS over the run (the peak of each tenth) and the load averages around it."""
    from benchmarks._memory import TotalPeak

    peak = TotalPeak()
    if engine in ("ray", "ray-staged"):
        import ray

        from whileai_datasets import TrainingOptions
        from whileai_datasets.hub import HoldOut
        from whileai_datasets.ray_engine.publish import publish_rollouts

        store = {"object_store_memory": object_store_mb * 2**20} if object_store_mb else {}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, **store)
        load, start = os.getloadavg(), time.perf_counter()
        peak.mark()
        options = TrainingOptions.whileai_export(system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=False)
        # ray: the shards come back through the object store; ray-staged: the workers write them to a folder
        staging = tempfile.mkdtemp(prefix="staging-", dir=DATA_DIR) if engine == "ray-staged" else None
        result = publish_rollouts(str(make_unique_file(None, n)), repo, options, hold_out=HoldOut("scenario_id"),
                                  token=TOKEN, staging=staging)  # as `publish` of _load
    else:
        from whileai_datasets.hub import publish, split_by

        ds = _load(n)
        load, start = os.getloadavg(), time.perf_counter()
        peak.mark()
        result = publish(split_by(ds, "scenario_id"), repo, token=TOKEN, split_key="scenario_id")
    seconds, cpu = time.perf_counter() - start, peak.cpu_seconds
    timeline, after = peak.timeline(), os.getloadavg()
    if engine in ("ray", "ray-staged"):
        ray.shutdown()
        if staging is not None:
            os.rmdir(staging)  # empty: the staged shards went into the commit
    import whileai_datasets.hub.publishing as used

    print(json.dumps({"package": used.__file__, "seconds": seconds, "cpu_seconds": cpu, "peak_mb": peak.mb,
                      "anon_mb": peak.anon_mb, "pss_mb": peak.pss_mb, "timeline_mb": timeline, "load_before": load, "load_after": after,
                      "configs": result["configs"]}))


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


def _measure(n: int, engine: str, repo: str, endpoint: str, home: Path, object_store_mb: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(home), HF_UPDATE_DOWNLOAD_COUNTS="0",
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1",
               NO_PROXY="127.0.0.1,localhost")
    env["PYTHONPATH"] = str(ROOT)
    if engine == "old":
        env["BENCH_PUBLISH_PACKAGE"] = str(_old_source())
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_publish.py"), "--child", str(n),
               engine if engine.startswith("ray") else "local", repo, str(object_store_mb)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{engine} {n}: {done.stderr[-3000:]}")
    got = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if (engine == "old") != got["package"].startswith(str(OLD_SOURCE)):
        raise RuntimeError(f"{engine} ran the package at {got['package']}")
    return got


def run_publishes(sizes: list[int], *, old: bool, ray: bool, local: bool = True, object_store_mb: int = 0,
                  compare: bool = True, ray_staged: bool = False) -> None:
    """Publish each size with each engine, one fresh process at a time; with both engines, check their
    repos hold the same rows (`_repo_rows`)."""
    import psutil

    results: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server, endpoint = _server(Path(tmp))
        try:
            for n in sizes:
                _load(n)  # parse and cache outside the clock
                engines = [*(["new"] if local else []), *(["old"] if old and n <= OLD_LIMIT else []),
                           *(["ray"] if ray else []), *(["ray-staged"] if ray and ray_staged else [])]
                for engine in engines:
                    served = psutil.Process(server.pid).cpu_times()
                    got = _measure(n, engine, f"bench/{engine}-{n}", endpoint, Path(tmp) / engine, object_store_mb)
                    after = psutil.Process(server.pid).cpu_times()
                    got["server_cpu_seconds"] = after.user + after.system - served.user - served.system
                    results[engine, n] = got
                    _print_run(engine, n, got)
                if compare and local and ray:
                    _compare(endpoint, f"bench/new-{n}", f"bench/ray-{n}", Path(tmp) / "compare")
                if ray_staged:
                    staged, shipped = results["ray-staged", n], results["ray", n]
                    print(f"at {n} rows: Ray publish, shards through the object store / written to a shared folder: "
                          f"time {shipped['seconds'] / staged['seconds']:.2f}x, CPU "
                          f"{shipped['cpu_seconds'] / staged['cpu_seconds']:.2f}x, peak RSS {staged['peak_mb']:.0f} MB "
                          f"-> {shipped['peak_mb']:.0f} MB", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    _summary(results, sizes)


def _print_run(engine: str, n: int, got: dict[str, Any]) -> None:
    rows = sum(got["configs"]["canonical"].values())
    loads = "/".join(f"{v:.1f}" for v in got["load_before"]) + " -> " + "/".join(f"{v:.1f}" for v in got["load_after"])
    print(f"{engine:4} {n:>9} rows ({rows} canonical): {got['seconds']:8.1f} s, CPU {got['cpu_seconds']:8.1f} s "
          f"(+ hub server {got['server_cpu_seconds']:.1f} s), peak RSS {got['peak_mb']:7.0f} MB "
          f"(anonymous {got['anon_mb']:7.0f} MB, proportional {got.get('pss_mb', 0):7.0f} MB); load average {loads}", flush=True)
    print(f"     RSS by tenth of the run (MB): {got['timeline_mb']}", flush=True)


def _compare(endpoint: str, local: str, ray: str, folder: Path) -> bool:
    """Whether two repos hold the same rows: per config and split, the row count and a hash of the rows
    values in order (`_repo_rows`); where they differ, the first differing row and column."""
    import shutil

    ours, theirs = _repo_rows(endpoint, local, folder / "local"), _repo_rows(endpoint, ray, folder / "ray")
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key)
        same = a is not None and b is not None and a.rows == b.rows and a.windows == b.windows
        print(f"  {key[0]:>10} {key[1]:<8} local {a.rows if a else '-':>9} rows {a.digest[:12] if a else '':12}  "
              f"ray {b.rows if b else '-':>9} rows {b.digest[:12] if b else '':12}  {'same' if same else 'DIFFERENT'}",
              flush=True)
        if a is not None and b is not None and not same:
            print(f"    first difference: {_first_difference(a, b)}", flush=True)
    identical = {k: (v.rows, v.digest) for k, v in ours.items()} == {k: (v.rows, v.digest) for k, v in theirs.items()}
    print(f"repos {local} and {ray}: {'identical in rows' if identical else 'NOT identical'} "
          f"({len(ours)} config splits; rows hashed in order)", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return identical


#: Rows per hashed window: both repos' rows are cut at the same row numbers, whatever their shards.
_WINDOW = 8192


@dataclass
class _Rows:
    """One config split of a repo: its shards (downloaded), rows, and the sha256 of each window's rows
    (`_window_digest`) and of all of them."""

    files: list[str]
    rows: int = 0
    windows: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return hashlib.sha256("".join(self.windows).encode()).hexdigest()

    def tables(self) -> Iterator[Any]:
        """The rows in `_WINDOW`-row tables, cut at the same row numbers whatever the shards."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        held: list[Any] = []
        for local in self.files:
            for batch in pq.ParquetFile(local).iter_batches(batch_size=_WINDOW):
                held.append(pa.Table.from_batches([batch]).replace_schema_metadata(None))
                table = pa.concat_tables(held)
                while table.num_rows >= _WINDOW:
                    yield table.slice(0, _WINDOW).combine_chunks()
                    table = table.slice(_WINDOW)
                held = [table] if table.num_rows else []
        if held:
            yield pa.concat_tables(held).combine_chunks()


def _repo_rows(endpoint: str, repo: str, folder: Path) -> dict[tuple[str, str], _Rows]:
    """Per (config directory, split) of `repo`: its `_Rows` (shards downloaded through huggingface_hub)."""
    from collections import defaultdict

    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=endpoint, token=TOKEN)
    shards: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(api.list_repo_files(repo, repo_type="dataset")):
        if path.endswith(".parquet"):
            directory, name = path.rsplit("/", 1)
            shards[directory, name.split("-")[0]].append(hf_hub_download(
                repo, path, repo_type="dataset", endpoint=endpoint, token=TOKEN, cache_dir=str(folder)))
    out = {}
    for key, files in shards.items():
        found = out[key] = _Rows(files)
        for table in found.tables():
            found.windows.append(_window_digest(table))
            found.rows += table.num_rows
    return out


def _window_digest(table: Any) -> str:
    """The sha256 of `table` written as one uncompressed Parquet row group: by value, as Parquet stores no
    value under a null (Arrow leaves those bits undefined, and two writers of the same rows leave different
    ones: an IPC hash differed on a null bool column at 5,000 rows where every value was equal)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="none", row_group_size=max(1, table.num_rows), use_dictionary=False,
                   write_statistics=False)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _first_difference(a: _Rows, b: _Rows) -> str:
    """The first row and column where two config splits differ (or the schema, or the count)."""
    for index, (x, y) in enumerate(zip(a.tables(), b.tables())):
        if not x.schema.equals(y.schema):
            return f"window {index}: schemas differ: {x.schema} against {y.schema}"
        for name in x.column_names:
            left, right = x.column(name).to_pylist(), y.column(name).to_pylist()
            for row, (p, q) in enumerate(zip(left, right)):
                if p != q:
                    return f"row {index * _WINDOW + row}, column {name!r}: {str(p)[:300]} against {str(q)[:300]}"
        if x.num_rows != y.num_rows:
            break
    return f"rows {a.rows} against {b.rows}"


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
            cpu_per_row = (b["cpu_seconds"] - a["cpu_seconds"]) / (large - small)
            mb_per_k = (b["peak_mb"] - a["peak_mb"]) / (large - small) * 1000
            estimate = b["seconds"] + per_row * (10_000_000 - large)
            cpu_estimate = b["cpu_seconds"] + cpu_per_row * (10_000_000 - large)
            print(f"{engine}: time {large}/{small} rows {b['seconds'] / a['seconds']:.2f}x, CPU "
                  f"{b['cpu_seconds'] / a['cpu_seconds']:.2f}x (rows {large / small:.0f}x)")
            print(f"{engine}: {per_row * 1e6:.1f} µs per row ({cpu_per_row * 1e6:.1f} CPU µs), {mb_per_k:+.3f} MB "
                  f"peak RSS per 1,000 rows; 10M rows estimated at {estimate / 60:.0f} min ({cpu_estimate / 60:.0f} CPU "
                  f"min) and {b['peak_mb'] + mb_per_k * (10_000_000 - large) / 1000:.0f} MB")

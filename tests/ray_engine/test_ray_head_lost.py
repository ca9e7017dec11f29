"""What Ray cannot recover: the head node dies while an export runs (tests/support/ray_cluster.py, its driver in a process
of its own on the head's node, as on a cluster whose jobs are submitted there).

Ray ends the driver's process itself once the GCS is gone ("Failed to connect to GCS ... The program will
terminate"): no code of ours runs after that, so the guarantee is what is left on disk. OUT is not there (nor an
earlier OUT replaced); the parts written so far wait in the hidden staging folder beside it, which no reader of
OUT lists, and the next export to OUT removes it.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ray_cluster
from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl

pytest.importorskip("ray.data")

from whileai_datasets.ray_engine import output as ray_output

pytestmark = [pytest.mark.ray, pytest.mark.cluster,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import sys, warnings
warnings.filterwarnings("ignore")
import ray, ray.data
address, source, output, system = sys.argv[1:5]
ray.init(address=address, log_to_driver=False)
ray.data.DataContext.get_current().enable_progress_bars = False
from whileai_datasets import ray_engine
ray_engine.export_training(source, output, system_prompt=system, validate=False, unroll=True,
                           range_bytes=16 << 10, block_bytes=8 << 10)
print("finished")
"""


def test_a_lost_head_ends_the_export_leaving_no_output_a_reader_would_take_for_complete(tmp_path: Path) -> None:
    rows = seeded_rows(seed=4, mode="rl", repeats=6, budget=60)
    source = write_jsonl(tmp_path / "run.jsonl", rows * 4)  # about 40 read tasks: the job is mid-flight
    out = tmp_path / "out.jsonl"
    # the driver waits 5 s for a lost GCS (Ray's default: 60 s) before its process is ended
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "RAY_gcs_rpc_server_reconnect_timeout_s": "5"}
    with ray_cluster.three_nodes(connect=False) as cluster:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, cluster.address, str(source), str(out),
                                   SYSTEM_PROMPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            end = time.monotonic() + 300
            while not glob.glob(f"{tmp_path}/.out.jsonl.*/part-*") and driver.poll() is None:
                assert time.monotonic() < end, "no part was written within 300 s"
                time.sleep(0.05)
            assert driver.poll() is None, driver.communicate()[1][-3000:]  # still running: parts are mid-flight
            cluster.kill_head()
            stdout, stderr = driver.communicate(timeout=180)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
    assert driver.returncode != 0 and "finished" not in stdout
    assert "Failed to connect to GCS" in stderr  # Ray's own message: it ends the process
    assert not out.exists()  # nothing at OUT
    staged = glob.glob(f"{tmp_path}/.out.jsonl.whileai-*")
    assert len(staged) == 1 and os.listdir(staged[0])
    assert all(name.startswith("part-") for name in os.listdir(staged[0]))
    # the rerun's staging step removes the dead export's folder (its owner process is gone)
    rerun = ray_output.staging(str(out))
    try:
        assert rerun.swept == staged
    finally:
        rerun.discard()
    assert sorted(os.listdir(tmp_path)) == ["run.jsonl"]

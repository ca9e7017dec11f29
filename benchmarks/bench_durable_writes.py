"""What the durable write (fsync of the file and its folder before "done") costs.

The export's writer (``shaping.writer.Writer``) writes the same encoded rows
with and without the flushes (``_files.fsync_path`` made a no-op), alternating,
JSONL (the O_DIRECT path where the file system takes it) and Parquet (buffered),
into one folder on the disk under test. Prints seconds per method and the
ratio durable / not durable.

    python benchmarks/bench_durable_writes.py --mb 512 --repeat 3 --dir benchmarks/.data
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

import pyarrow as pa

from whileai_datasets import _files
from whileai_datasets.shaping import writer as export_writer


def _payload(megabytes: int) -> tuple[pa.Array, pa.Table]:
    line = '{"messages": [{"role": "user", "content": "%s"}], "loss_mask": [1]}\n'
    texts = [line % os.urandom(600).hex() for _ in range(1000)]
    lines = pa.array(texts * max(1, megabytes * 1_000_000 // sum(map(len, texts))))
    return lines, pa.table({"text": lines})


def _write(path: str, payload: pa.Array | pa.Table, chunk: int) -> float:
    start = time.perf_counter()
    writer = export_writer.open_writer(path, export_writer.TRAINING_NULLS)
    try:
        for offset in range(0, len(payload), chunk):
            writer.write_encoded(payload.slice(offset, chunk))
        writer.commit()
    finally:
        writer.abort()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default="benchmarks/.data")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    lines, table = _payload(args.mb)
    times: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for suffix, payload in ((".jsonl", lines), (".parquet", table)):
            for durable in (True, False):
                path = os.path.join(args.dir, f"durable{suffix}")
                flush = mock.patch.object(_files, "fsync_path") if not durable else mock.patch.object(
                    _files, "fsync_path", _files.fsync_path)
                with flush:
                    elapsed = _write(path, payload, 20_000)
                times.setdefault(f"{suffix[1:]} {'fsync' if durable else 'no fsync'}", []).append(elapsed)
                os.remove(path)
    print(f"{args.mb} MB of JSONL rows, {args.repeat} rounds, median seconds, in {os.path.abspath(args.dir)}")
    for name, values in times.items():
        print(f"  {name:18} {statistics.median(values):7.2f}")
    for kind in ("jsonl", "parquet"):
        ratio = statistics.median(times[f"{kind} fsync"]) / statistics.median(times[f"{kind} no fsync"])
        print(f"  {kind}: durable / not durable = {ratio:.2f}x")


if __name__ == "__main__":
    main()

"""The same transforms on Ray Data: past one machine without a new pipeline.

Every transform here is Arrow table in, Arrow table out, so it runs unchanged
inside ``ray.data.Dataset.map_batches(fn, batch_format="pyarrow")``. This
module adds what Ray needs around them:

* ``read_whileai``: whileai files (JSONL, plain or compressed, and Parquet;
  any row shape) as a Ray dataset of canonical rows. Files are split into
  byte ranges read in parallel and normalized by the builder's own
  ``Normalizer`` in ``map_batches`` (``pyarrow.json`` fails on real rows).
* ``stamp_groups``: the GRPO group fields with Ray's ``groupby``.
* ``tokenize``: ``wai_transforms.tokenize`` in ``map_batches`` over a pool of
  actors, each building the tokenizer once (from a path, a factory or an object).
* ``export_training``: ``whileai_datasets.export_dataset`` on Ray: the same
  options, the same rows (as Parquet or JSONL part files in a directory,
  written by Ray's write tasks) and the same report.
* ``publish_rollouts``: what ``whileai-datasets push`` publishes, with the
  shards built and written by Ray's workers and one commit from the driver.

A pipeline of your own::

    import ray
    from whileai_datasets import ray_engine, transforms as wai_transforms

    ds = ray_engine.read_whileai("/mnt/rollouts/*.jsonl", system_prompt=SYSTEM, row_key=True)
    ds = ds.map_batches(wai_transforms.strip_think, batch_format="pyarrow")
    ds = ray_engine.stamp_groups(ds)  # Ray's groupby; needs the row key
    ds = ds.map_batches(wai_transforms.to_trl("training"), batch_format="pyarrow")
    ds.drop_columns(["source_file", "source_offset"]).write_parquet("/mnt/out/")

Needs the ``ray`` extra (``pip install 'whileai-datasets[ray]'``).
"""

from __future__ import annotations

from whileai_datasets.ray_engine.engine import (
    CONFIGS,
    SOURCE_FILE,
    SOURCE_OFFSET,
    export_training,
    read_whileai,
    stamp_groups,
)
from whileai_datasets.ray_engine.publish import publish_rollouts
from whileai_datasets.ray_engine.tokenizing import tokenize

__all__ = ["CONFIGS", "SOURCE_FILE", "SOURCE_OFFSET", "export_training", "publish_rollouts", "read_whileai",
           "stamp_groups", "tokenize"]

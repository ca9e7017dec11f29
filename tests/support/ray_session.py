"""The local Ray runtime the Ray tests share, one per test module: two CPUs, no dashboard, no progress bars.

A module uses it as ``ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)``.
"""

from __future__ import annotations

from collections.abc import Iterator


def local_runtime() -> Iterator[None]:
    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()

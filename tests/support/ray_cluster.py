"""A real three-node Ray cluster on this machine, for the fault-tolerance tests (tests/ray_engine/test_ray_cluster.py).

A head node with no CPUs (this process's driver connects to it and the export's collector lives there, as on
a cluster whose head runs no work) and two worker nodes of one CPU each: every task and actor of a job runs on
a worker node, so killing one loses tasks and actors mid-flight. Every node listens on 127.0.0.1 only (the
suite's conftest sets RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before Ray is imported). ``three_nodes`` tears the
cluster down in a ``finally`` and checks that no process it started is left.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil

NODE_MEMORY = 200 << 20  # each node's object store


@dataclass
class ThreeNodes:
    """The cluster, its address, and a way to lose a worker node (and get a fresh one, as an autoscaler would)."""

    cluster: Any
    killed: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def kill_worker(self, *, replace: bool = True) -> None:
        """Kill one worker node's raylet and every worker process on it at once (no graceful shutdown), then
        (``replace``) add a fresh node of one CPU, as spot capacity comes back."""
        node = sorted(self.cluster.worker_nodes, key=lambda n: n.unique_id)[0]
        self.killed.append(node.unique_id)
        self.cluster.remove_node(node, allow_graceful=False)
        if replace:
            # from a watcher thread: a node that installs no signal handlers (only the main thread may);
            # the cluster's shutdown still removes it
            self.cluster._shutdown_at_exit = False
            try:
                self.cluster.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
            finally:
                self.cluster._shutdown_at_exit = True

    def kill_head(self) -> None:
        """Kill the head node (its GCS and raylet, and with them the node a driver connected to it runs on), at
        once."""
        self.cluster.remove_node(self.cluster.head_node, allow_graceful=False)

    @contextlib.contextmanager
    def kill_when(self, ready: Callable[[], bool]) -> Iterator[None]:
        """While the block runs, a thread kills a worker node as soon as ``ready()`` holds (polled every
        20 ms); afterwards, whether it did is in ``killed``."""
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                if ready():
                    self.kill_worker()
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def listening_addresses(pids: set[int]) -> set[str]:
    """The addresses the given processes listen on (TCP)."""
    found = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for conn in psutil.Process(pid).net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add(conn.laddr.ip)
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def started_processes() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@contextlib.contextmanager
def three_nodes(*, connect: bool = True) -> Iterator[ThreeNodes]:
    """Start the cluster, connect this process's driver to it (unless not ``connect``: a test whose driver runs
    in a process of its own), and tear it all down afterwards.

    Raises:
        AssertionError: a process the cluster started is still alive after the teardown.
    """
    import ray
    import ray.data
    from ray.cluster_utils import Cluster

    before = started_processes()
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": NODE_MEMORY})
        for _ in range(2):
            cluster.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
        cluster.wait_for_nodes()
        if connect:
            ray.init(address=cluster.address, log_to_driver=True)
            ray.data.DataContext.get_current().enable_progress_bars = False
        yield ThreeNodes(cluster)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        left = _wait_gone(started_processes() - before)
        assert not left, f"processes the Ray cluster started are still alive: {left}"


def _wait_gone(pids: set[int], timeout: float = 30.0) -> list[str]:
    """The processes of ``pids`` still alive after ``timeout`` seconds (zombies reaped)."""
    end = time.monotonic() + timeout
    alive: list[str] = []
    while time.monotonic() < end:
        alive = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {process.name()}")
                else:
                    with contextlib.suppress(ChildProcessError, psutil.TimeoutExpired):
                        process.wait(0)
        if not alive:
            return []
        time.sleep(0.2)
    return alive

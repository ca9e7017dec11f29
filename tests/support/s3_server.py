"""A local S3-protocol server for the object-storage tests: moto's server mode (the ``moto[server]`` test extra)
in a thread of this process, on 127.0.0.1 only.

``s3_server`` (session) starts it; ``s3`` (per test) gives a fresh bucket and points the usual AWS environment
(``AWS_ENDPOINT_URL``, keys, region) at the server, as a user's credentials would be found.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

KEY, SECRET, REGION = "testing", "testing", "us-east-1"


@dataclass
class Bucket:
    """A bucket on the local server and the ways a test reaches it."""

    endpoint: str
    name: str

    def uri(self, key: str) -> str:
        return f"s3://{self.name}/{key}"

    def filesystem(self, *, secret: str = SECRET) -> Any:
        """An explicit ``pyarrow.fs.S3FileSystem`` on the server (what ``filesystem=`` takes)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=KEY, secret_key=secret, region=REGION, endpoint_override=self.endpoint)

    def put(self, local: Path, key: str) -> str:
        self._client().upload_file(str(local), self.name, key)
        return self.uri(key)

    def get(self, key: str) -> bytes:
        body: bytes = self._client().get_object(Bucket=self.name, Key=key)["Body"].read()
        return body

    def listing(self) -> list[str]:
        listed = self._client().list_objects_v2(Bucket=self.name).get("Contents", [])
        return sorted(item["Key"] for item in listed)

    @contextlib.contextmanager
    def auth_enforced(self) -> Iterator[None]:
        """The server checks credentials (moto's IAM check): the test keys name no user, so access is denied."""
        import requests

        requests.post(f"{self.endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        try:
            yield
        finally:
            requests.post(f"{self.endpoint}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()

    def _client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                            region_name=REGION)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    server_module = pytest.importorskip("moto.server", reason="the moto[server] test extra")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1"
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A new bucket, and the environment's credentials pointed at the local server."""
    for name, value in {"AWS_ENDPOINT_URL": s3_server, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
                        "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = Bucket(s3_server, f"t-{uuid.uuid4().hex[:12]}")
    bucket._client().create_bucket(Bucket=bucket.name)
    return bucket

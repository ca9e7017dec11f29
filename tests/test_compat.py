"""The release differences named in whileai_datasets._compat, on whatever releases are installed."""

from __future__ import annotations

import socket

import pytest
from huggingface_hub import HfApi
from packaging.version import Version

from whileai_datasets import UnsupportedVersionError, _compat


@pytest.mark.parametrize("package", sorted(_compat.SUPPORTED))
def test_the_installed_releases_are_supported(package: str) -> None:
    low, high = _compat.SUPPORTED[package]
    assert low <= _compat.installed(package) < high


def test_a_lost_connection_is_a_hub_client_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(_compat.HUB_CLIENT_ERROR):
        HfApi(endpoint=f"http://127.0.0.1:{port}", token="hf_unused").whoami()


@pytest.mark.parametrize(("package", "release"), [("datasets", "4.6.1"), ("datasets", "6.0.0"),
                                                  ("huggingface_hub", "0.36.0"), ("pyarrow", "20.0.0")])
def test_a_release_outside_the_range_is_refused_with_the_range(
    monkeypatch: pytest.MonkeyPatch, package: str, release: str
) -> None:
    real = _compat.installed
    monkeypatch.setattr(_compat, "installed", lambda name: Version(release) if name == package else real(name))
    with pytest.raises(UnsupportedVersionError) as caught:
        _compat.check_supported()
    wanted = _compat.supported_range(package)
    assert f"whileai-datasets needs {wanted}; {package} {release} is installed" in str(caught.value)
    assert f"pip install '{wanted}'" in str(caught.value)

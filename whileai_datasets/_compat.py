"""What differs between the supported releases of datasets, huggingface_hub and pyarrow.

The package runs on datasets 4.7 (the first with the ``Json`` feature, the 4.x
line the trainers pin) through 5.x, huggingface_hub 1.5 (what transformers 5
needs) through 2.x, and pyarrow 21 (what datasets 4.7 needs) and later. Every
difference between those releases that the code meets is named here, once, so
the stages above read one API. No feature needs more than the lower bounds today;
`check_supported` refuses a release outside the ranges with the range to install.
"""

from __future__ import annotations

from importlib.metadata import version

from packaging.version import Version

from whileai_datasets.errors import UnsupportedVersionError

#: ``(lowest, first unsupported)`` per package; pyproject.toml's dependencies say the same.
SUPPORTED: dict[str, tuple[Version, Version]] = {
    "datasets": (Version("4.7"), Version("6")),
    "huggingface_hub": (Version("1.5"), Version("3")),
    "pyarrow": (Version("21"), Version("100")),
}


def installed(package: str) -> Version:
    """The installed release of ``package`` (a distribution name)."""
    return Version(version(package))


def supported_range(package: str) -> str:
    """``package``'s supported range as a pip requirement, e.g. ``datasets>=4.7,<6``."""
    low, high = SUPPORTED[package]
    return f"{package}>={low}" + (f",<{high}" if package != "pyarrow" else "")


def check_supported() -> None:
    """Refuse an installed datasets, huggingface_hub or pyarrow outside `SUPPORTED` (read from the
    installed metadata, so nothing is imported: a too-old datasets fails here, not on a missing name).

    Raises:
        UnsupportedVersionError: naming the package, its installed release and the range to install.
    """
    for package, (low, high) in SUPPORTED.items():
        have = installed(package)
        if not low <= have < high:
            raise UnsupportedVersionError(
                f"whileai-datasets needs {supported_range(package)}; {package} {have} is installed",
                hint=f"pip install '{supported_range(package)}'",
            )


def _hub_client_error() -> type[BaseException]:
    # huggingface_hub 2.x is built on httpx2, 1.x on httpx; both may be installed, so ask by release
    if installed("huggingface_hub") >= Version("2"):
        from httpx2 import HTTPError
    else:
        from httpx import HTTPError  # type: ignore[no-redef]
    return HTTPError  # type: ignore[no-any-return]


#: The base error of the HTTP client huggingface_hub sends its requests with (a lost connection, a timeout).
HUB_CLIENT_ERROR: type[BaseException] = _hub_client_error()


def require_ray(where: str) -> None:
    """Ray Data importable, or ``UnsupportedVersionError`` naming the option that asked for it (`where`:
    ``engine='ray'``, ``--engine ray``) and the extra that installs it."""
    try:
        import ray.data  # noqa: F401
    except ImportError:
        raise UnsupportedVersionError(
            f"{where} needs Ray Data, which is not installed",
            location=where,
            hint="pip install 'whileai-datasets[ray]'",
        ) from None

"""Publish a Dataset or DatasetDict to a private Hub dataset repo: Parquet splits plus a card.

A training set is not a release: repos are created private, an existing public repo is refused
unless the caller says `private=False`, and the card states what a trainer will train on.

One `publish` makes up to two commits on the branch: `push_to_hub`'s (the Parquet shards, stale
shards deleted, and the card YAML that `datasets` writes from `ds.features`), then the card body
rendered from `templates/dataset_card.md`. Shards are uploaded before the first commit, so a failed
upload leaves the remote head where it was; a repeat publish of the same data re-sends nothing that
the Hub already holds and commits nothing that has not changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypedDict

from datasets import Dataset, DatasetDict
from huggingface_hub import CommitOperationAdd, DatasetCard, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from whileai_datasets.errors import PublishError
from whileai_datasets.hub.card import hash_sources, package_versions, render_card
from whileai_datasets.hub.splits import count_disjoint_groups

try:  # the HTTP client huggingface_hub is built on (httpx2 from huggingface_hub 2.x, httpx before)
    from httpx2 import HTTPError as _ClientHTTPError
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    from httpx import HTTPError as _ClientHTTPError  # type: ignore[no-redef]

#: Failures of a request to the Hub: an error answer or a lost connection.
_HUB_ERRORS: tuple[type[BaseException], ...] = (HfHubHTTPError, _ClientHTTPError)
CARD_COMMIT_MESSAGE = "Update dataset card (whileai-datasets)"


class PublishResult(TypedDict):
    repo_id: str
    url: str
    commit: str  # the head after publishing: splits and card
    commit_url: str
    data_commit: str  # push_to_hub's commit (splits, datasets' YAML)
    private: bool
    splits: dict[str, int]


def publish(
    data: Dataset | DatasetDict,
    repo_id: str,
    *,
    private: bool = True,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    report: Mapping[str, Any] | None = None,
    sources: Sequence[str | os.PathLike[str]] | None = None,
    split_key: str | None = None,
    max_shard_size: int | str | None = None,
) -> PublishResult:
    """Push `data` as Parquet splits to the dataset repo `repo_id`, with a card, and return where it went.

    Args:
        data: A `DatasetDict` (its split names are kept, e.g. train and holdout) or a `Dataset`
            (published as the split "train").
        repo_id: "namespace/name"; a bare name goes to the token owner's namespace.
        private: Create the repo private (default). An existing repo must already have this
            visibility: publish never changes it, and refuses a public repo unless `private=False`.
        token: A Hub token; unset, huggingface_hub's own lookup (`HF_TOKEN`, then `hf auth login`).
        revision: Branch to commit to (created from main if missing); default main.
        commit_message: Message of the data commit.
        report: The export report (`export_dataset`'s dict); the card renders format, mask, counts
            and warnings from it.
        sources: Files (or directories) the rows came from; the card lists their sha256.
        split_key: The column the splits were grouped by (see `split_by`). Checked: publish refuses
            splits that share a value of it, because the card will say they do not.
        max_shard_size: Passed to `push_to_hub`.
    Returns:
        `repo_id`, `url`, `commit` (the new head), `commit_url`, `data_commit`, `private`, `splits`
        (rows per split).
    Raises:
        PublishError: no token, a token the Hub rejects, a visibility mismatch, splits that share a
            group, or a failed request (the message says what was committed and how to retry).
    Example:
        >>> publish(split_by(ds, "scenario_id", test_size=0.1), "me/rollouts",
        ...         report=report, split_key="scenario_id")  # doctest: +SKIP
    """
    splits = _as_splits(data)
    groups = count_disjoint_groups(splits, split_key) if split_key else None
    source_files = hash_sources(sources or ())
    resolved, origin = _resolve_token(token)
    api = HfApi(token=resolved, library_name="whileai-datasets")
    owner = _whoami(api, origin)
    repo_id = repo_id if "/" in repo_id else f"{owner}/{repo_id}"
    url = f"{api.endpoint}/datasets/{repo_id}"
    previous = _prepare_repo(api, repo_id, url, private=private)

    after_failure = _after_failure_hint(api, repo_id, revision, previous)
    with _hub_step(f"uploading the splits to {repo_id}", url, after_failure):
        pushed = splits.push_to_hub(repo_id, private=private, token=resolved, revision=revision,
                                    commit_message=commit_message, max_shard_size=max_shard_size)
    data_commit = pushed.oid

    card_hint = (f"The splits are committed as {data_commit}, with the card of the previous publish. "
                 "Run publish again to write the card: unchanged splits are not uploaded again")
    with _hub_step("reading back the card datasets wrote", url, card_hint):
        written = api.hf_hub_download(repo_id, "README.md", repo_type="dataset", revision=data_commit)
    card = render_card(DatasetCard.load(written).data, repo_id=repo_id, private=private,
                       splits={name: ds.num_rows for name, ds in splits.items()},
                       features=next(iter(splits.values())).features, report=report, sources=source_files,
                       split_key=split_key, split_groups=groups, versions=package_versions())
    with _hub_step("writing the dataset card", url, card_hint):
        final = api.create_commit(repo_id, operations=[CommitOperationAdd("README.md", str(card).encode())],
                                  commit_message=CARD_COMMIT_MESSAGE, repo_type="dataset", revision=revision,
                                  parent_commit=data_commit)
    return PublishResult(repo_id=repo_id, url=url, commit=final.oid, commit_url=final.commit_url,
                         data_commit=data_commit, private=private,
                         splits={name: ds.num_rows for name, ds in splits.items()})


# --- before any upload ------------------------------------------------------------------------------
def _as_splits(data: Dataset | DatasetDict) -> DatasetDict:
    if isinstance(data, DatasetDict):
        if not data:
            raise PublishError("expected at least one split, got an empty DatasetDict", location="publish(data=...)",
                               hint="Pass a Dataset or a DatasetDict such as split_by(ds, key=...)")
        return data
    if isinstance(data, Dataset):
        return DatasetDict({"train": data})
    raise PublishError(f"expected a datasets.Dataset or DatasetDict, got {type(data).__name__}",
                       location="publish(data=...)", hint="Load the rows with datasets first")


def _resolve_token(token: str | None) -> tuple[str, str]:
    """The token and where it came from; huggingface_hub's own lookup when `token` is unset."""
    if token:
        return token, "the token argument"
    found = get_token()
    if not found:
        raise PublishError("no Hugging Face token was found, and publishing needs one (nothing was sent)",
                           location="publish(token=None)",
                           hint="Pass token=, set HF_TOKEN, or run `hf auth login`")
    origin = "HF_TOKEN" if os.environ.get("HF_TOKEN") == found else "the login cached by `hf auth login`"
    return found, origin


def _whoami(api: HfApi, origin: str) -> str:
    try:
        return str(api.whoami()["name"])
    except HfHubHTTPError as err:
        if err.response is not None and err.response.status_code == 401:
            raise PublishError(f"the Hub rejected the token from {origin} (HTTP 401)", location=api.endpoint,
                               hint="Check the token, or run `hf auth login` again") from err
        raise PublishError(f"checking the token failed: {_describe(err)}", location=api.endpoint,
                           hint="Check that the Hub is reachable and retry") from err
    except _ClientHTTPError as err:
        raise PublishError(f"could not reach the Hub: {_describe(err)}", location=api.endpoint,
                           hint="Check HF_ENDPOINT and the network, then retry") from err


def _prepare_repo(api: HfApi, repo_id: str, url: str, *, private: bool) -> str | None:
    """Create the repo, or check the existing one has the visibility asked for; returns its head."""
    with _hub_step(f"looking up {repo_id}", url, "Retry; nothing was uploaded"):
        try:
            info = api.repo_info(repo_id, repo_type="dataset")
        except RepositoryNotFoundError:
            info = None
    if info is None:
        with _hub_step(f"creating the {'private' if private else 'public'} dataset repo", url,
                       "Check that the token may create repos in this namespace; nothing was uploaded"):
            api.create_repo(repo_id, repo_type="dataset", private=private)
            info = api.repo_info(repo_id, repo_type="dataset")
    elif not info.private and private:
        raise PublishError(f"{repo_id} exists and is public, and publish was not told to publish publicly",
                           location=url, hint="Pass private=False (CLI: --public) to push to a public repo, "
                           "or choose another repo_id; nothing was uploaded")
    elif info.private and not private:
        raise PublishError(f"{repo_id} exists and is private, but private=False was passed; publish does "
                           "not change the visibility of an existing repo (its history would go public too)",
                           location=url, hint="Change the visibility on the Hub (or with "
                           "HfApi.update_repo_settings) first, or drop private=False; nothing was uploaded")
    return info.sha


# --- error translation ---------------------------------------------------------------------------
@contextmanager
def _hub_step(what: str, location: str, hint: str | Callable[[], str]) -> Iterator[None]:
    """Turn a failed Hub request inside the block into a PublishError saying what failed and what next."""
    try:
        yield
    except PublishError:
        raise
    except Exception as err:
        cause = _hub_cause(err)
        if cause is None:
            raise
        raise PublishError(f"{what} failed: {_describe(cause)}", location=location,
                           hint=hint() if callable(hint) else hint) from err


def _hub_cause(err: BaseException) -> BaseException | None:
    """The failed request behind `err` (clients wrap it, e.g. in RuntimeError), if there is one."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, _HUB_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _describe(err: BaseException) -> str:
    response = getattr(err, "response", None)
    if response is not None:
        message = response.headers.get("X-Error-Message")
        return f"HTTP {response.status_code} on {_where(response)}" + (f" ({message})" if message else "")
    try:
        request = err.request  # type: ignore[attr-defined]
        where = f" on {request.method} {request.url.path}"
    except (AttributeError, RuntimeError):
        where = ""
    return f"{type(err).__name__}{where}: {err}"


def _where(response: Any) -> str:
    try:
        return f"{response.request.method} {response.request.url.path}"
    except (AttributeError, RuntimeError):
        return "a request"


def _after_failure_hint(api: HfApi, repo_id: str, revision: str | None, previous: str | None) -> Callable[[], str]:
    def hint() -> str:
        retry = "Your local dataset is untouched; run publish again to retry (files the Hub holds are not re-sent)"
        try:
            head = api.repo_info(repo_id, repo_type="dataset", revision=revision).sha
        except _HUB_ERRORS:
            return f"Could not read the repo head to check what was committed (it was {previous}). {retry}"
        if head == previous:
            return f"No commit was made: {repo_id} still points at {previous}. {retry}"
        return f"{repo_id} now points at {head} (it was {previous}). {retry}"

    return hint

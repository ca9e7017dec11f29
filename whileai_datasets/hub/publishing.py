"""Publish canonical rows to a private Hub dataset repo: one config per trainer, Parquet plus a card.

A training set is not a release: repos are created private, an existing public repo is refused
unless the caller says `private=False`, and the card states what a trainer will train on.

What is published loads with plain `datasets` (built-in feature types only, see
`columnar._portable`), and the repo's default config is the one a trainer trains exactly with
no option set (see `hub.configs`). Every config's shards and the card go up in **one commit**:
the configs are built chunk by chunk and each shard is uploaded as soon as it is written
(`hub.streaming`; memory stays flat in the row count), then a single commit names them all, so a
failure at any request leaves the branch where it was, a publish run again after an interruption
sends only the shards the Hub does not hold yet, and a repeat publish of the same rows sends
nothing the Hub already holds and commits nothing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from datasets import Dataset, DatasetDict
from datasets import config as datasets_config
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import CommitOperationAdd, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from whileai_datasets import _compat, option_names
from whileai_datasets._options import check_flag
from whileai_datasets._typing import SecretsPolicy
from whileai_datasets.errors import PublishError, causes
from whileai_datasets.hub import configs as repo_configs
from whileai_datasets.hub import layout, streaming, trainer_gaps
from whileai_datasets.hub.card import SourceFile, hash_sources, package_versions, render_card
from whileai_datasets.hub.card_configs import default_verdict
from whileai_datasets.hub.card_sections import CardSection, section_files, sections_text
from whileai_datasets.hub.reading import chunks
from whileai_datasets.hub.splits import count_disjoint_groups
from whileai_datasets.privacy import gate
from whileai_datasets.privacy.scanning import Findings
from whileai_datasets.transforms.anonymizing import Anonymize

#: Failures of a request to the Hub: an error answer or a lost connection.
_HUB_ERRORS: tuple[type[BaseException], ...] = (HfHubHTTPError, _compat.HUB_CLIENT_ERROR)
COMMIT_MESSAGE = "Publish with whileai-datasets"


class PublishResult(TypedDict):
    repo_id: str
    url: str
    commit: str  # the head after publishing: every config and the card
    commit_url: str
    private: bool
    splits: dict[str, int]  # rows per split of the default config
    configs: dict[str, dict[str, int]]  # rows per split of every config
    trainers: dict[str, dict[str, Any]]  # per trainer: its config and the rows it cannot train exactly


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
    preference: Dataset | DatasetDict | None = None,
    tokenizer: Any = None,
    chat_template: Any = None,
    card_sections: Sequence[CardSection] = (),
    secrets: SecretsPolicy = "refuse",
    salvage: bool = False,
) -> PublishResult:
    """Publish canonical rows to the dataset repo `repo_id` as trainer-ready configs, with a card.

    The repo holds the config `default` (prompt/completion rows, one per loss-carrying assistant
    turn: TRL's SFTTrainer with default settings trains exactly the turns `loss_mask` marks),
    `canonical` (the rows as given), `messages` and `sharegpt` (what axolotl, ms-swift and
    LLaMA-Factory read, see `hub.trainer_formats`), `preference` (TRL's DPO rows, when `preference`
    is given) and `tokenized` (`input_ids`, `attention_mask`, `assistant_masks`, `labels`, when
    `tokenizer` is given). Every feature type is built into `datasets`: readers need nothing but
    `datasets`.

    Args:
        data: Canonical training rows (`messages`, `loss_mask`, carried keys), as a `DatasetDict`
            (its split names are kept, e.g. train and holdout) or a `Dataset` (the split "train").
        repo_id: "namespace/name"; a bare name goes to the token owner's namespace.
        private: Create the repo private (default). An existing repo must already have this
            visibility: publish never changes it, and refuses a public repo unless `private=False`.
        token: A Hub token; unset, huggingface_hub's own lookup (`HF_TOKEN`, then `hf auth login`).
        revision: Branch to commit to (created from main if missing); default main.
        commit_message: Message of the commit.
        report: The export report (`export_dataset`'s dict); the card renders it.
        sources: Files (or directories) the rows came from; the card lists their sha256.
        split_key: The column the splits were grouped by (see `split_by`). Checked: publish refuses
            splits that share a value of it, because the card will say they do not.
        max_shard_size: Largest Parquet shard (bytes or "500MB"); `datasets`' default otherwise.
        preference: Preference pairs (`load_dataset("whileai/export", name="preference", ...)`, or
            TRL DPO rows), a `Dataset` or a `DatasetDict` with its own splits.
        tokenizer: A transformers fast tokenizer: adds the `tokenized` config and token counts on
            the card (supervised tokens of the default config against this package's mask).
        chat_template: The template for `tokenizer` (text or `ChatTemplate`); the tokenizer's own
            otherwise.
        salvage: With `tokenizer`: a conversation the template cannot take whole (one assistant turn it
            refuses, or renders without the turn's output) trains the turns before that one in the `tokenized`
            and default configs, as `tokenize(salvage=True)` and `audit(salvage=True)` count it, instead of being
            left out whole; the card names how many conversations and the turns they do not train.
        card_sections: More sections for the card, after its own text, with the files they show
            (`CardSection`), e.g. `audit(...).card_section()`: what each split trains, with plots.
        secrets: What a secret found in the rows does (every string of every split is scanned before any
            request, `whileai_datasets.privacy`): "refuse" (default) stops with an error naming the kinds and
            rows, before anything is sent; "redact" publishes each replaced by a typed placeholder; "allow"
            publishes them as they are, and the card says so. The card counts secrets and personal data
            either way.
    Returns:
        `repo_id`, `url`, `commit` (the new head), `commit_url`,
        `private`, `splits` (rows per split of the default config), `configs` (rows per split of each),
        `trainers` (per trainer: its config and the rows it cannot train exactly, `trainer_gaps.trainer_report`).
    Raises:
        PublishError: secrets in the rows (with `secrets="refuse"`), rows that are not canonical, no token,
            a token the Hub rejects, a visibility mismatch, splits that share a group, or a failed request
            (the message says what was committed and how to retry).
    Example:
        >>> publish(split_by(ds, "scenario_id", test_size=0.1), "me/rollouts",
        ...         report=report, split_key="scenario_id")  # doctest: +SKIP
    """
    check_flag(salvage, "salvage")
    if salvage and tokenizer is None:
        flag, tokenizer_flag = option_names.spell("salvage", True), option_names.spell("tokenizer")
        raise PublishError(f"{flag} keeps the turns before one the chat template cannot take, and no tokenizer was "
                           "given, so no template is measured", location=flag,
                           hint=f"Pass {tokenizer_flag} (the one you will train with), or drop {flag}.")
    splits = _as_splits(data, "publish(data=...)")
    pairs = _as_splits(preference, "publish(preference=...)") if preference is not None else None
    groups = count_disjoint_groups(splits, split_key) if split_key else None
    _check_columns(splits, pairs)
    source_files = hash_sources(sources or ())
    found_token = resolve_token(token)
    extras = streaming.survey(splits, repo_configs.Extras(tokenizer, chat_template, split_key, pairs is not None,
                                                          salvage=salvage))
    splits, pairs, privacy = screened(splits, pairs, secrets)
    api, repo_id, url, previous = open_repo(found_token, repo_id, private=private, revision=revision)
    after_failure = _after_failure_hint(api, repo_id, revision, previous)
    sources_by_kind = {"rows": splits, **({"preference": pairs} if pairs is not None else {})}
    with tempfile.TemporaryDirectory(prefix="whileai-publish-") as tmp:
        with _hub_step(f"uploading the splits to {repo_id}", url, after_failure):
            built = streaming.build(repo_configs.planned(extras), sources_by_kind, Path(tmp),
                                    shard_limit(max_shard_size), _preupload(api, repo_id, revision))
        return commit_built(api, built, Publication(
            repo_id=repo_id, url=url, private=private, revision=revision, previous=previous,
            commit_message=commit_message, report=report, sources=source_files, split_key=split_key,
            split_groups=groups, tokenizer=tokenizer, chat_template=chat_template,
            card_sections=tuple(card_sections), privacy=gate.card_view(privacy, secrets)), Path(tmp))


@dataclass(frozen=True)
class Publication:
    """Where a built publish goes and what its card says besides the configs."""

    repo_id: str
    url: str
    private: bool
    revision: str | None
    previous: str | None  # the head of the branch before this publish (None: an empty repo)
    commit_message: str | None = None
    report: Mapping[str, Any] | None = None
    sources: Sequence[SourceFile] = ()
    split_key: str | None = None
    split_groups: Mapping[str, int] | None = None
    tokenizer: Any = None
    chat_template: Any = None
    card_sections: Sequence[CardSection] = ()
    privacy: Mapping[str, Any] | None = None  # what the secrets scan found and did (`privacy.gate.card_view`)


def commit_built(api: HfApi, built: streaming.Built, where: Publication, folder: Path) -> PublishResult:
    """The card and one commit naming every shard of `built` (already uploaded) and the card."""
    _refuse_empty(built.configs)
    trainers = trainer_gaps.trainer_report(built.gaps, {c.name: sum(c.rows.values()) for c in built.configs})
    exact, said = default_verdict(built.configs)  # TRL's default SFTTrainer on `default`, in the card's words
    trainers["trl-default"] = {"config": repo_configs.DEFAULT, "rows": sum(built.configs[0].rows.values()),
                               "unit": "rows", "exact": exact, "inexact": {}, "how": said}
    card = render_card(layout.card_data(built.configs), repo_id=where.repo_id, private=where.private,
                       configs=built.configs, report=where.report, sources=where.sources,
                       split_key=where.split_key, split_groups=where.split_groups, versions=package_versions(),
                       tokenizer=where.tokenizer, chat_template=where.chat_template, trainers=trainers,
                       privacy=where.privacy)
    after_failure = _after_failure_hint(api, where.repo_id, where.revision, where.previous)
    with _hub_step(f"uploading the splits to {where.repo_id}", where.url, after_failure):
        existing = (api.list_repo_files(where.repo_id, repo_type="dataset", revision=where.revision)
                    if where.previous else [])
        card.text += sections_text(where.card_sections)
        ops = layout.operations(folder, built.paths, existing, built.configs, str(card),
                                section_files(where.card_sections))
        final = api.create_commit(where.repo_id, operations=ops, commit_message=where.commit_message or COMMIT_MESSAGE,
                                  repo_type="dataset", revision=where.revision, parent_commit=where.previous)
    rows = {config.name: dict(config.rows) for config in built.configs}
    return PublishResult(repo_id=where.repo_id, url=where.url, commit=final.oid, commit_url=final.commit_url,
                         private=where.private, splits=rows[repo_configs.DEFAULT], configs=rows,
                         trainers=trainers)


def shard_limit(max_shard_size: int | str | None) -> int:
    """Largest shard in bytes of Arrow data: `max_shard_size`, or `datasets`' default."""
    return int(convert_file_size_to_int(max_shard_size or datasets_config.MAX_SHARD_SIZE))


def _preupload(api: HfApi, repo_id: str, revision: str | None) -> streaming.ShardDone:
    """Upload each shard as soon as it is written (no commit yet: nothing is visible until the one commit).

    The Hub stores LFS files by content, so a shard it already holds (an interrupted publish run
    again) is answered "present" and not sent; the commit then names each shard by its final path."""
    def upload(shard: streaming.Shard) -> None:
        addition = CommitOperationAdd(path_in_repo=shard.path, path_or_fileobj=str(shard.local))
        api.preupload_lfs_files(repo_id, additions=[addition], repo_type="dataset", revision=revision)

    return upload


def _check_columns(splits: DatasetDict, pairs: DatasetDict | None) -> None:
    for name, ds in splits.items():
        repo_configs.check_columns(ds.column_names, f"split {name!r}")
    for name, ds in (pairs or {}).items():
        repo_configs.check_pair_columns(ds.column_names, f"preference split {name!r}")


def _refuse_empty(built: Sequence[repo_configs.Config]) -> None:
    """A split with no rows would be a Parquet file `datasets` cannot read (and nothing to train on)."""
    hints = {spec.name: spec.empty_hint for spec in repo_configs.REGISTRY}
    for config in built:
        for name, rows in config.rows.items():
            if not rows:
                raise PublishError(f"the {config.name!r} config would have no rows in split {name!r}",
                                   location=f"split {name!r}", hint=hints.get(config.name, "Leave that split out")
                                   + "; nothing was committed")


# --- before any upload ------------------------------------------------------------------------------
def screened(splits: DatasetDict, pairs: DatasetDict | None, secrets: str
             ) -> tuple[DatasetDict, DatasetDict | None, Findings]:
    """Every split scanned for secrets before any request (`privacy.gate.screen`: refused by default); with
    `secrets="redact"` and something found, the splits with each secret replaced by its placeholder."""
    every = {**{name: ds for name, ds in splits.items()},
             **{f"preference {name}": ds for name, ds in (pairs or {}).items()}}
    found = gate.screen(every, secrets, chunks)
    if secrets != "redact" or not found.secret_rows:
        return splits, pairs, found
    redact = Anonymize(personal=False, report_column=None)

    def redacted(given: DatasetDict) -> DatasetDict:
        return DatasetDict({name: ds.with_format("arrow").map(redact, batched=True, desc="redacting secrets")
                           .with_format(ds.format["type"]) for name, ds in given.items()})

    return redacted(splits), (redacted(pairs) if pairs is not None else None), found


def _as_splits(data: Dataset | DatasetDict, where: str) -> DatasetDict:
    if isinstance(data, DatasetDict):
        if not data:
            raise PublishError("expected at least one split, got an empty DatasetDict", location=where,
                               hint="Pass a Dataset or a DatasetDict such as split_by(ds, key=...)")
        return data
    if isinstance(data, Dataset):
        return DatasetDict({"train": data})
    raise PublishError(f"expected a datasets.Dataset or DatasetDict, got {type(data).__name__}",
                       location=where, hint="Load the rows with datasets first")


class OpenRepo(NamedTuple):
    """The repo a publication commits to: the client, the full repo id, its URL, the branch head before (None: empty)."""

    api: HfApi
    repo_id: str
    url: str
    previous: str | None


def open_repo(found_token: tuple[str, str], repo_id: str, *, private: bool, revision: str | None) -> OpenRepo:
    """Publish's opening steps, the same on every engine: whose token it is (`resolve_token`'s pair), the repo id
    under that owner when `repo_id` has none, and the repo (and branch) created or checked."""
    resolved, origin = found_token
    api = HfApi(token=resolved, library_name="whileai-datasets")
    owner = _whoami(api, origin)
    repo_id = repo_id if "/" in repo_id else f"{owner}/{repo_id}"
    url = f"{api.endpoint}/datasets/{repo_id}"
    return OpenRepo(api, repo_id, url, _prepare_repo(api, repo_id, url, private=private, revision=revision))


def resolve_token(token: str | None) -> tuple[str, str]:
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
    except _compat.HUB_CLIENT_ERROR as err:
        raise PublishError(f"could not reach the Hub: {_describe(err)}", location=api.endpoint,
                           hint="Check HF_ENDPOINT and the network, then retry") from err


def _prepare_repo(api: HfApi, repo_id: str, url: str, *, private: bool, revision: str | None) -> str | None:
    """Create the repo (and the branch), or check the existing one has the visibility asked for;
    returns the head of the branch the commit goes to (None for an empty repo)."""
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
    if revision is None or revision == "main" or info.sha is None:
        return info.sha
    with _hub_step(f"creating the branch {revision!r}", url, "Retry; nothing was uploaded"):
        api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
        return api.repo_info(repo_id, repo_type="dataset", revision=revision).sha


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
    return next((cause for cause in causes(err) if isinstance(cause, _HUB_ERRORS)), None)


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

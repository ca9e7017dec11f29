"""A test set of agent rollouts with planted secrets, personal data and look-alikes, made at test time.

Every value is generated here from a seeded generator in the issuer's format (``AKIA`` + 16 upper-case
letters and digits, ``ghp_`` + 36 letters and digits, ...), so no file holds anything a secret scanner
(GitHub's, the Hub's) would flag. Each kind is planted in three places: a user turn, a tool call's
arguments (JSON text, where a newline is the two characters ``\\n``) and a tool result. The look-alikes
(commit hashes, UUIDs, sha256 digests, base64 image data, the word "password" in prose, env lines of
secret-looking names that hold none, a public key) are planted the same way and must not be found.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

PLACES = ("user", "arguments", "result")
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"
_B64 = _ALNUM + "+/"


@dataclass
class Planted:
    """One row's plan: what kind it carries (a secret kind, a personal kind, or ``lookalike``) and the values."""

    kind: str
    group: str  # "secret", "personal" or "lookalike"
    place: str
    text: str
    values: list[str] = field(default_factory=list)


def _classes(text: str) -> int:
    return sum((any(c.islower() for c in text), any(c.isupper() for c in text), any(c.isdigit() for c in text)))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:  # mixed classes where the alphabet has them, as real keys do
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if _classes(value) >= min(2, _classes(alphabet)):
            return value


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def secrets(rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """(kind, text holding it, the secret values) for every secret kind."""
    aws = "AKIA" + "".join(rng.choice(_UPPER_DIGITS) for _ in range(16))
    aws_secret = _pick(rng, _B64, 40)
    key_body = "\n".join(_pick(rng, _B64, 70) for _ in range(4))
    private_key = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key_body}\n-----END OPENSSH PRIVATE KEY-----"
    claims = {"sub": _pick(rng, _ALNUM, 12), "iat": 1700000000}
    jwt = ".".join((_b64url({"alg": "HS256", "typ": "JWT"}), _b64url(claims), _pick(rng, _URLSAFE, 43)))
    url_password = _pick(rng, _ALNUM, 16)
    url_token = _pick(rng, _ALNUM, 40)
    env_password = _pick(rng, _ALNUM, 14)
    assigned = _pick(rng, _ALNUM, 24)
    sas = _pick(rng, _ALNUM, 40) + "%3D"
    github = "ghp_" + _pick(rng, _ALNUM, 36)
    slack = "-".join(("xoxb", _pick(rng, string.digits, 12), _pick(rng, string.digits, 13), _pick(rng, _ALNUM, 24)))
    return [
        ("aws_access_key", f"aws configure: access key id {aws}, region eu-west-1", [aws]),
        ("aws_secret_key", f"aws_secret_access_key = {aws_secret}", [aws_secret]),
        ("gcp_api_key", f"maps key {(gcp := 'AIza' + _pick(rng, _URLSAFE, 35))} for the geocoder", [gcp]),
        ("gcp_oauth_secret", f'"client_secret": "{(oauth := "GOCSPX-" + _pick(rng, _URLSAFE, 28))}"', [oauth]),
        ("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
         f"{(azure := _pick(rng, _B64, 86) + '==')};EndpointSuffix=core.windows.net", [azure]),
        ("azure_client_secret", f"app secret {(entra := _pick(rng, _ALNUM, 3) + '8Q~' + _pick(rng, _ALNUM, 34))} "
         "expires in 2027", [entra]),
        ("azure_sas_token", f"https://acct.blob.core.windows.net/logs/app.txt?sv=2022-11-02&ss=b&sig={sas}", [sas]),
        ("github_token", f"cloned with {github} yesterday", [github]),
        ("gitlab_token", f"token: {(gitlab := 'glpat-' + _pick(rng, _URLSAFE, 20))}", [gitlab]),
        ("slack_token", f"bot {slack}", [slack]),
        ("openai_key", f"use {(openai := 'sk-proj-' + _pick(rng, _URLSAFE, 60))} for the eval", [openai]),
        ("anthropic_key", f"key {(anthropic := 'sk-ant-api03-' + _pick(rng, _URLSAFE, 93) + 'AA')}.", [anthropic]),
        ("huggingface_token", f"login with {(hf := 'hf_' + _pick(rng, string.ascii_letters, 34))}", [hf]),
        ("private_key", f"$ cat ~/.ssh/id_ed25519\n{private_key}\n", [private_key]),
        ("jwt", f"Authorization: Bearer {jwt}", [jwt]),
        ("url_password", f"DATABASE_URL=postgres://app:{url_password}@db.internal:5432/prod", [url_password]),
        ("url_token", f"origin\thttps://{url_token}@github.com/acme/api.git (fetch)\n"
         f"origin\thttps://{url_token}@github.com/acme/api.git (push)", [url_token]),
        ("env_secret", f"DEBUG=false\nPORT=8080\nSTRIPE_SECRET_KEY={env_password}\nLOG_LEVEL=info", [env_password]),
        ("assigned_secret", f'config = {{"api_key": "{assigned}", "retries": 3}}', [assigned]),
    ]


def personal(rng: random.Random) -> list[tuple[str, str, list[str]]]:
    """(kind, text, values) for each kind of personal data."""
    name = "j" + _pick(rng, string.ascii_lowercase, 6)
    return [
        ("email", f"mail the report to {name}@acme-corp.io, then close", [f"{name}@acme-corp.io"]),
        ("home_user", f"Traceback: File \"/home/{name}/project/main.py\", line 12; also C:\\Users\\{name}.", [name]),
        ("file_owner", f"total 8\n-rw-r--r--  1 {name} staff  120 Jan  3 10:00 notes.txt", [name]),
    ]


def lookalikes(rng: random.Random) -> list[tuple[str, str]]:
    """(name, text) of values that look like secrets and are not."""
    commit = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    digest = "".join(rng.choice("0123456789abcdef") for _ in range(64))
    image = base64.b64encode(rng.randbytes(3000)).decode()
    public_body = "\n".join(_pick(rng, _B64, 64) for _ in range(3))
    return [
        ("commit_hash", f"commit {commit}\nAuthor: CI Bot\n\n    fix the build ({commit[:7]})"),
        ("uuid", f"request_id={uuid.UUID(int=rng.getrandbits(128), version=4)} status=ok"),
        ("sha256", f'{{"digest": "sha256:{digest}", "size": 1024, "ratio": 0.00005}}'),
        ("base64_image", f"data:image/png;base64,{image}"),
        ("password_prose", "Forgot your password? The password must be at least 12 characters long; password: "
                           "required. Never share a password or a token with anyone."),
        ("env_names", "TOKENIZERS_PARALLELISM=false\nMAX_TOKENS=4096\nHF_HOME=/tmp/hf\nPASSWORD_MIN_LENGTH=12"),
        ("public_key", f"-----BEGIN PUBLIC KEY-----\n{public_body}\n-----END PUBLIC KEY-----"),
    ]


def plan(seed: int = 0) -> list[Planted]:
    """Every kind and look-alike in every place, one row each."""
    rng = random.Random(seed)
    rows = []
    for group, found in (("secret", secrets(rng)), ("personal", personal(rng))):
        for kind, text, values in found:
            rows += [Planted(kind, group, place, text, values) for place in PLACES]
    for name, text in lookalikes(rng):
        rows += [Planted(name, "lookalike", place, text) for place in PLACES]
    return rows


def rollout(planted: Planted) -> dict[str, Any]:
    """A whileai training row carrying ``planted.text`` in its place; tool-call arguments are written as JSON
    text by hand, so a number keeps its form (``0.00005``)."""
    user, command, result = "Check the deploy, please.", "ls -la", "ok"
    if planted.place == "user":
        user = f"Here is what I have: {planted.text}"
    elif planted.place == "arguments":
        command = planted.text
    else:
        result = planted.text
    arguments = '{"command": ' + json.dumps(command) + ', "timeout": 0.00005}'
    return {"messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": user},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
        {"role": "assistant", "content": "Done."},
    ]}


def write_jsonl(path: Any, seed: int = 0) -> list[Planted]:
    """The planted rows written as whileai JSONL at ``path``; their plans, in row order."""
    rows = plan(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for planted in rows:
            handle.write(json.dumps(rollout(planted)) + "\n")
    return rows

"""What counts as a secret or as personal data: one rule per kind, a regular expression and a check.

Every pattern is written in the syntax Python's ``re`` and RE2 (``pyarrow.compute``'s regex engine) share
(no look-around, no back-reference), so the same rules are the Arrow prefilter (``PREFILTER``: the rows
worth a look, found by ``match_substring_regex`` over whole string columns) and the exact pass in Python
over those few strings (``spans``). The formats are the issuers' own (key prefixes, lengths, alphabets);
the agent-specific kinds (``.env`` and ``env`` lines, ``git remote -v`` URLs carrying a token) are what a
coding agent's tool results show and a general scanner reads as plain text. detect-secrets was measured
against these rules on the same planted set (benchmarks/bench_privacy.py, BENCHMARKS.md): it found fewer
of the kinds (no Anthropic, Hugging Face, GCP or project-scoped OpenAI keys in 1.5) and scans each line
in Python with every plugin, far over the speed a publish can afford.

A span covers the secret value only (a password inside a URL, the value of ``API_KEY=``): the key name,
the URL's user and host and every character around it stay, so anonymization changes nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Literal, NamedTuple

Group = Literal["secret", "personal"]


class Span(NamedTuple):
    """One value found in a string: its kind, ``text[start:end]`` (code points), and the value."""

    kind: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class Rule:
    """One kind: a pattern whose group ``value`` (or the whole match) is the value; ``check`` refuses look-alikes."""

    kind: str
    group: Group
    pattern: str
    description: str
    check: Callable[[str], bool] | None = None
    #: Literals one of which every match holds (looked for in the lower-cased text when ``folded``): a string
    #: without any is not searched with this rule (``str`` containment is far cheaper than a regex search).
    needles: tuple[str, ...] = ()
    folded: bool = False
    #: A cheaper RE2 pattern that matches wherever ``pattern`` does (the prefilter's part; default ``pattern``):
    #: a prefix of it, with its long counted repetitions cut short. Counted repetitions multiply the states of
    #: RE2's automaton; the exact pattern runs in Python on the strings the prefilter keeps.
    loose: str | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        return _COMPILED[self.kind]


# --- checks -----------------------------------------------------------------------------------------------
#: Values that stand for a secret in docs and templates rather than being one.
_PLACEHOLDER_WORDS = frozenset({"password", "passwd", "pass", "secret", "token", "changeme", "none", "null",
                                "true", "false", "undefined", "redacted", "example", "xxx", "your_token",
                                "your-token", "your_api_key", "your-api-key", "mypassword", "placeholder"})


#: A name in code rather than a value: words of one case (or Capitalized) joined by ``_`` or ``.``.
_CODE_NAME = re.compile(r"_?(?:[A-Z][A-Z0-9]*|[a-z][a-z0-9]*|[A-Z][a-z]+[0-9]*)(?:[_.]+(?:[A-Z][A-Z0-9]*|"
                        r"[a-z][a-z0-9]*|[A-Z][a-z]+[0-9]*))+_?")


#: Another variable's name (``HF_TOKEN=HUB_TOKEN`` in code).
_ENV_NAME = re.compile(r"_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def placeholder(value: str) -> bool:
    """A stand-in rather than a value: a variable (``$X``, ``${X}``, ``{{x}}``, ``%(x)s``, ``<x>``, a name in
    code such as ``HUB_TOKEN`` or ``config.api_key``), a run of one character (``****``), a word such as
    ``password``, or our own placeholders (``<secret:...>``)."""
    stripped = value.strip("\"'`,;)")
    if not stripped or stripped[0] in "$<{%*[(" or stripped.startswith("os.environ") or "..." in stripped:
        return True
    return len(set(stripped)) == 1 or stripped.lower() in _PLACEHOLDER_WORDS or bool(_ENV_NAME.fullmatch(stripped))


def entropy(value: str) -> float:
    """Shannon entropy of ``value``'s characters, in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _classes(value: str) -> int:
    return sum((any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value)))


def high_entropy(value: str) -> bool:
    """A random-looking value: not a stand-in, at least two of lower case, upper case and digits, and at least
    3 bits per character (an English word falls below; a hex digest reaches about 3.7, a base64 key about 5),
    and not a name in code (``_GEMMA4_STOPS``, ``config.api_key``)."""
    return (not placeholder(value) and not _CODE_NAME.fullmatch(value.rstrip(".")) and _classes(value) >= 2
            and entropy(value) >= 3.0)


def _not_placeholder(value: str) -> bool:
    return not placeholder(value) and not value.isdigit() and len(value) >= 5


def _jwt(value: str) -> bool:
    """A JSON Web Token: its header decodes to a JSON object naming its algorithm."""
    head = value.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _url_user_token(value: str) -> bool:
    return high_entropy(value) and entropy(value) >= 3.5


#: Account names that stand for no person (a home folder or a file owner of the system's own).
SYSTEM_ACCOUNTS = frozenset({"root", "nobody", "daemon", "bin", "sys", "www-data", "_www", "Shared", "Public",
                             "Default", "All Users", "Default User", "linuxbrew", "runner", "git", "postgres",
                             "admin", "user", "ubuntu", "ec2-user", "node", "app", "vscode", "codespace"})
#: The pseudonyms ``anonymize`` writes: found again, they are left alone (anonymizing twice changes nothing).
PSEUDONYM = re.compile(r"user-[0-9a-f]{10}")


def _person(value: str) -> bool:
    return value not in SYSTEM_ACCOUNTS and not PSEUDONYM.fullmatch(value) and not value.isdigit()


_EXAMPLE_DOMAINS = ("example.com", "example.org", "example.net", "example.invalid")


def _email(value: str) -> bool:
    local, _, domain = value.rpartition("@")
    return local.lower() not in {"git", "noreply", "no-reply"} and not domain.lower().endswith(_EXAMPLE_DOMAINS)


# --- the rules ------------------------------------------------------------------------------------------
_B64 = r"A-Za-z0-9+/"
#: One base64 character, a slash escaped or not (datasets' Json text writes ``/`` as ``\\/``).
_B64_CHAR = r"(?:[A-Za-z0-9+]|\\?/)"
#: A slash, escaped or not.
_SLASH = r"\\?/"
_URLSAFE = r"A-Za-z0-9_\-"
#: Before a name in a line (``KEY=value`` in .env files, ``env`` output, JSON-escaped text).
_LINE_START = r"(?:^|\\n|[\s\"'`;])"
#: An optional quote, escaped or not (a key inside JSON text held in a JSON string: ``{\\"api_key\\": ...}``).
_QUOTE = r"(?:\\?[\"'])?"
#: A secret-named key in code, JSON or YAML (``api_key``, ``clientSecret``, ``password``), any case.
_SECRET_KEY = (r"(?:secret|token|passw(?:or)?d|api_?key|apikey|access_?key|private_?key|credential|auth_?key)s?")
_SECRET_WORD = r"(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH_?KEY)"

RULES: tuple[Rule, ...] = (
    Rule("private_key", "secret",
         r"-----BEGIN[A-Z0-9 ]{0,20} PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]{0,20} PRIVATE "
         r"KEY(?: BLOCK)?-----|(?:[" + _B64 + r"=\s]|\\[nr/])*)",
         "a PEM or OpenSSH private key block (RSA, EC, DSA, OpenSSH, PGP)", needles=("PRIVATE KEY",),
         loose=r"PRIVATE KEY(?: BLOCK)?-----"),
    Rule("aws_access_key", "secret", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", "an AWS access key id",
         needles=("AKIA", "ASIA", "ABIA", "ACCA"),
         loose=r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{4}"),
    Rule("aws_secret_key", "secret",
         r"(?i)aws_?secret_?(?:access_?)?key" + _QUOTE + r"\s*[:=]\s*" + _QUOTE + r"(?P<value>" + _B64_CHAR
         + r"{40})", "an AWS secret access key (after its name)", needles=("secret",), folded=True,
         loose=r"(?i)aws_?secret_?(?:access_?)?key"),
    Rule("gcp_api_key", "secret", r"\bAIza[0-9A-Za-z_\-]{35}", "a Google Cloud API key", needles=("AIza",),
         loose=r"\bAIza[0-9A-Za-z_\-]{4}"),
    Rule("gcp_oauth_secret", "secret", r"\bGOCSPX-[0-9A-Za-z_\-]{28}", "a Google OAuth client secret",
         needles=("GOCSPX-",),
         loose=r"\bGOCSPX-"),
    Rule("azure_storage_key", "secret", r"(?i)AccountKey=(?P<value>" + _B64_CHAR + r"{86}==)",
         "an Azure storage account key (in a connection string)", needles=("accountkey=",), folded=True,
         loose=r"(?i)AccountKey="),
    Rule("azure_client_secret", "secret", r"\b[A-Za-z0-9_~.\-]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}",
         "an Azure AD (Entra) client secret", needles=("Q~",),
         loose=r"[0-9]Q~[A-Za-z0-9_~.\-]{4}"),
    Rule("azure_sas_token", "secret", r"[?&]sig=(?P<value>[A-Za-z0-9%+/]{40,}={0,2})",
         "the signature of an Azure shared access signature URL", needles=("sig=",),
         loose=r"[?&]sig="),
    Rule("github_token", "secret", r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b",
         "a GitHub token (classic, fine-grained, OAuth, app)",
         needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
         loose=r"\b(?:gh[pousr]_[A-Za-z0-9]{4}|github_pat_)"),
    Rule("gitlab_token", "secret", r"\bgl(?:pat|dt|rt|ptt|oas)-[0-9A-Za-z_\-]{20,}", "a GitLab token",
         needles=("glpat-", "gldt-", "glrt-", "glptt-", "gloas-"),
         loose=r"\bgl(?:pat|dt|rt|ptt|oas)-"),
    Rule("slack_token", "secret",
         r"\bxox[abposr]-[0-9A-Za-z\-]{10,}|https:" + _SLASH * 2 + r"hooks\.slack\.com" + _SLASH + "services"
         + _SLASH + r"T[A-Z0-9]+" + _SLASH + r"B[A-Z0-9]+" + _SLASH + r"[A-Za-z0-9]{16,}",
         "a Slack token or incoming-webhook URL", needles=("xox", "hooks.slack.com"),
         loose=r"\bxox[abposr]-|hooks\.slack\.com"),
    Rule("anthropic_key", "secret", r"\bsk-ant-[a-z]{2,8}[0-9]{0,3}-[" + _URLSAFE + r"]{32,}",
         "an Anthropic API key", needles=("sk-ant-",),
         loose=r"\bsk-ant-"),
    Rule("openai_key", "secret",
         r"\bsk-(?:(?:proj|svcacct|admin)-[" + _URLSAFE + r"]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|"
         r"[A-Za-z0-9]{48})", "an OpenAI API key", needles=("sk-",),
         loose=r"\bsk-[A-Za-z0-9]"),
    Rule("huggingface_token", "secret", r"\b(?:hf|api_org)_[A-Za-z]{34}\b", "a Hugging Face token",
         needles=("hf_", "api_org_"),
         loose=r"\b(?:hf|api_org)_[A-Za-z]{4}"),
    Rule("jwt", "secret",
         r"\beyJ[" + _URLSAFE + r"]{8,}\.eyJ[" + _URLSAFE + r"]{8,}\.[" + _URLSAFE + r"]*", "a JSON Web Token",
         _jwt, needles=("eyJ",),
         loose=r"\beyJ[" + _URLSAFE + r"]+\.eyJ"),
    Rule("url_password", "secret",
         r"[a-zA-Z][a-zA-Z0-9+.\-]{1,20}:" + _SLASH * 2 + r"[^\s:/@\"'<>\\]+:(?P<value>[^\s:/@\"'<>\\]+)"
         r"@[A-Za-z0-9\[]", "a password inside a URL (database URLs, `git remote -v`)", _not_placeholder,
         needles=("@",),
         loose=r":" + _SLASH * 2 + r"[^\s:/@\"\'<>\\]+:[^\s:/@\"\'<>\\]+@"),
    Rule("url_token", "secret",
         r"(?:https?|git|ssh):" + _SLASH * 2 + r"(?P<value>[" + _URLSAFE + r"]{20,})@[A-Za-z0-9]",
         "a token as a URL's user (`git remote -v` of a clone made with a token)", _url_user_token,
         needles=("@",),
         loose=r":" + _SLASH * 2 + r"[" + _URLSAFE + r"]+@"),
    Rule("env_secret", "secret",
         _LINE_START + r"(?:export\s+)?(?:[A-Z0-9]+_)*" + _SECRET_WORD + r"(?:_[A-Z0-9]+)*=" + _QUOTE
         + r"(?P<value>[^\s\"'\\]+)",
         "the value of a secret-named variable (`.env` files, `env` output)", _not_placeholder,
         needles=("SECRET", "TOKEN", "PASSW", "API", "KEY", "CREDENTIAL"),
         loose=_SECRET_WORD + r"(?:_[A-Z0-9]+)*=" + _QUOTE + r"[^\s\"'\\]"),
    Rule("assigned_secret", "secret",
         r"(?i)\b[A-Za-z0-9_.\-]{0,40}" + _SECRET_KEY + _QUOTE + r"\s*(?::=|=>|=|:)\s*" + _QUOTE
         + r"(?P<value>[A-Za-z0-9+/=_\-.~!@#%^&*]{12,})",
         "a high-entropy value assigned to a secret-named key (code, JSON, YAML)", high_entropy,
         needles=("secret", "token", "passw", "api", "key", "credential"), folded=True,
         loose=r"(?i)" + _SECRET_KEY + _QUOTE + r"\s*(?::=|=>|=|:)\s*" + _QUOTE + r"[A-Za-z0-9+/=_\-.~!@#%^&*]{4}"),
    # personal data
    Rule("email", "personal",
         r"\b[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}\b",
         "an email address", _email, needles=("@",), loose=r"[A-Za-z0-9._%+\-]@[A-Za-z0-9\-]+\.[A-Za-z]"),
    Rule("home_user", "personal",
         r"(?:" + _SLASH + r"(?:home|Users)" + _SLASH + r"|[A-Za-z]:(?:\\\\|\\|/)Users(?:\\\\|\\|/))"
         r"(?P<value>[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)",
         "a user name in a home-directory path (/home/NAME, /Users/NAME, C:\\Users\\NAME)", _person,
         needles=("home", "Users"),
         loose=_SLASH + r"(?:home|Users)" + _SLASH + r"[A-Za-z0-9_\-]|[A-Za-z]:(?:\\\\|\\|/)Users"),
    Rule("file_owner", "personal",
         r"(?m)(?:^|\\n)[\-dlcbps][rwxsStT\-]{9}[.@+]?\s+[0-9]+\s+(?P<value>[A-Za-z_][A-Za-z0-9_.\-]*)\s+"
         r"[A-Za-z0-9_.\-]+\s+[0-9]",
         "the owner of a file in `ls -l` output", _person, needles=("r-", "rw", "--"),
         loose=r"[\-dlcbps][rwxsStT\-]{9}[.@+]?\s+[0-9]+\s+[A-Za-z_]"),
)
RULE = {rule.kind: rule for rule in RULES}
SECRET_KINDS = tuple(rule.kind for rule in RULES if rule.group == "secret")
PERSONAL_KINDS = tuple(rule.kind for rule in RULES if rule.group == "personal")
_COMPILED = {rule.kind: re.compile(rule.pattern) for rule in RULES}
#: Every pattern in one: a string that matches none of them holds nothing (RE2 syntax, for pyarrow.compute).
PREFILTER = "|".join(f"(?:{(rule.loose or rule.pattern).replace('(?P<value>', '(')})" for rule in RULES)
#: The secret rules alone (a scan that leaves personal data out).
SECRETS_PREFILTER = "|".join(f"(?:{(rule.loose or rule.pattern).replace('(?P<value>', '(')})" for rule in RULES
                             if rule.group == "secret")
#: The ``ls -l`` owner's group, replaced with the owner when it is the same name.
_GROUP_AFTER_OWNER = re.compile(r"\s+(?P<value>[A-Za-z0-9_.\-]+)")


def spans(text: str, *, personal: bool = True) -> list[Span]:
    """Every secret (and, with `personal`, every piece of personal data) in ``text``, in order, no two
    overlapping: where two overlap the one of the earlier rule in ``RULES`` wins (a GitHub token inside an
    ``.env`` line is a ``github_token``; an address after a URL's password is part of the password's URL)."""
    found: list[Span] = []
    lowered = text.lower()
    for rule in RULES:
        if rule.group == "personal" and not personal:
            break
        if rule.needles and not any(needle in (lowered if rule.folded else text) for needle in rule.needles):
            continue
        for match in rule.compiled.finditer(text):
            start, end = match.span("value") if "value" in rule.compiled.groupindex else match.span()
            value = text[start:end]
            if start == end or (rule.check is not None and not rule.check(value)):
                continue
            if rule.kind == "email" and text[max(0, start - 5):start].endswith((":", "//", "\\/")):
                continue  # a URL's user and host (``https://user@host``), not an address
            if not any(start < s.end and s.start < end for s in found):
                found.append(Span(rule.kind, start, end, value))
            if rule.kind == "file_owner":
                group = _GROUP_AFTER_OWNER.match(text, end)
                if group and group.group("value") == value:
                    found.append(Span(rule.kind, group.start("value"), group.end("value"), value))
    return sorted(found, key=lambda s: s.start)


def masked(value: str) -> str:
    """A preview that never shows a secret: at most its first 4 characters (fewer for a short one) and its length."""
    shown = value[: min(4, len(value) // 4)]
    return f"{shown}…({len(value)} chars)"

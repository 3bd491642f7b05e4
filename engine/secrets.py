"""Keeping API keys and header values out of every log line, error message, status and --json output.

Providers register the keys they hold, and the config registers `remote.headers` values and a
literal `remote.apiKey` as soon as it is resolved; `redact` masks them in any text, and the
structlog processor applies it to every log event. Text is masked before it is cut (`masked_cut`),
so a secret straddling the cut cannot leave as a prefix. Registration is process-wide because
logging is.
"""

from __future__ import annotations

import re
from typing import Any, MutableMapping

__all__ = ["Secret", "register_secret", "register_header_secrets", "register_url_secrets", "url_without_password",
           "url_without_query_secrets", "carries_credentials", "names_a_variable", "ENV_NAME_RE",
           "VARIABLE_REF_RE", "redact", "masked_cut", "redact_processor"]

_SECRETS: set[str] = set()
# An `apiKey` that names where the key is, not the key: `OPENAI_API_KEY`, or OpenClaw's `$NAME` / `${NAME}`.
ENV_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
VARIABLE_REF_RE = re.compile(r"^\$(?:\{([A-Z_][A-Z0-9_]*)\}|([A-Z_][A-Z0-9_]*))$")
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")
_SCHEME_RE = re.compile(r"(?i)^(bearer|basic|token|apikey|api-key)\s+")


class Secret:
    """A secret setting (an API key, a DSN with its password): shown as `**********`, read only by
    `get_secret_value()`, as pydantic's `SecretStr`, which the config's validation turns into this."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.get_secret_value() == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('**********')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __len__(self) -> int:
        return len(self._value)


def register_secret(value: str | None) -> None:
    """Remember a secret (and its long prefix, which some APIs echo back) for redaction."""
    if not value:
        return
    value = value.strip()
    bare = _SCHEME_RE.sub("", value)  # "Bearer abc…": the token alone is the secret too
    for v in {value, bare}:
        if len(v) >= 4:
            _SECRETS.add(v)
            if len(v) >= 16:
                _SECRETS.add(v[:12])


def names_a_variable(value: str) -> bool:
    """Whether a key setting names an environment variable (so it is no secret itself)."""
    return bool(ENV_NAME_RE.match(value) or VARIABLE_REF_RE.match(value))


def register_header_secrets(headers: dict[str, str] | None) -> None:
    """Every configured header value is treated as a secret (Authorization, api-key, tokens…)."""
    for value in (headers or {}).values():
        if isinstance(value, str):
            register_secret(value)


_URL_PASSWORD_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@:]*):([^/?#]*)@")
# A query parameter whose name says it holds a credential: `?key=` (Gemini), `?code=` (Azure Functions),
# `?sig=` (a SAS URL), `?access_token=`, `?api-key=`… (`api-version`, `model` and the like are not).
_URL_QUERY_SECRET_RE = re.compile(
    r"([?&](?:[^=&#]*[-_.])?(?:api)?(?:key|token|secret|password|passwd|pwd|sig|signature|auth|credentials?|code)=)"
    r"([^&#]+)", re.IGNORECASE)


def register_url_secrets(url: str | None) -> None:
    """A password in a URL's credentials (`http://user:PASSWORD@host/v1`) is a secret too, and so is
    the value of a query parameter named for a credential (`https://proxy/v1?key=SECRET`)."""
    from urllib.parse import unquote  # noqa: PLC0415

    url = (url or "").strip()
    m = _URL_PASSWORD_RE.match(url)
    found = [m.group(2)] if m and m.group(2) else []
    found += [value for _name, value in _URL_QUERY_SECRET_RE.findall(url.split("#", 1)[0])]
    for value in found:
        register_secret(value)
        register_secret(unquote(value))


_AUTH_HEADER_RE = re.compile(r"(?i)^(?:proxy-)?authorization$|api[-_]?key|(?:^|[-_])key$|token|secret")


def carries_credentials(url: str | None, headers: dict[str, str] | None) -> bool:
    """Whether the configured URL or headers already authenticate (`?key=…`, `api-key: …`,
    `Authorization: …`), so a provider needs no `apiKey` of its own."""
    if any(_AUTH_HEADER_RE.search(name) for name in (headers or {})):
        return True
    return bool(_URL_QUERY_SECRET_RE.search((url or "").split("#", 1)[0]))


def url_without_query_secrets(url: str) -> str:
    """`https://host/v1?key=***&api-version=2024-02-01` for `…?key=SECRET&api-version=2024-02-01`."""
    return _URL_QUERY_SECRET_RE.sub(r"\1***", url)


def url_without_password(url: str) -> str:
    """`http://user:***@host/v1?key=***` for `http://user:PASSWORD@host/v1?key=SECRET`; other URLs as
    they are."""
    if not isinstance(url, str):
        return url
    return url_without_query_secrets(_URL_PASSWORD_RE.sub(r"\1:***@", url.strip()))


def masked_cut(text: str, limit: int) -> str:
    """`text` with secrets masked, then cut to `limit` characters (never the other way round)."""
    return redact(text)[:limit]


def redact(text: str) -> str:
    for s in sorted(_SECRETS, key=len, reverse=True):
        if s in text:
            text = text.replace(s, "***")
    return _BEARER_RE.sub(r"\1***", text)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _walk(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v) for v in value)
    return value


def redact_processor(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    return _walk(event)

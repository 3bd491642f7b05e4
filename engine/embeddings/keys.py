"""API keys for remote providers: from config (`remote.apiKey`) or the usual environment variables."""

from __future__ import annotations

import os
from typing import Mapping

from ..errors import ProviderUnavailableError
from ..secrets import ENV_NAME_RE, VARIABLE_REF_RE, register_secret

__all__ = ["ENV_KEYS", "resolve_api_key", "MissingKeyError"]

ENV_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "voyage": ("VOYAGE_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "ollama": ("OLLAMA_API_KEY",),
    # rerank providers (memorySearch.query.rerank)
    "cohere": ("COHERE_API_KEY", "CO_API_KEY"),
    "jina": ("JINA_API_KEY",),
}


class MissingKeyError(ProviderUnavailableError):
    """No API key found; `auto` moves on to the next provider."""


def resolve_api_key(
    provider: str, configured: str | None, *, required: bool = True, environ: Mapping[str, str] | None = None,
    key_path: str = "memorySearch.remote.apiKey",
) -> str | None:
    """The key to use. A configured value that is the *name* of an environment variable
    (`"GEMINI_API_KEY"`, `"MY_TEAM_OPENAI_KEY"`) means: read that variable."""
    env = os.environ if environ is None else environ
    names = ENV_KEYS.get(provider, ())
    key: str | None = None
    ref = VARIABLE_REF_RE.match(configured or "")
    if ref:  # `$NAME` or `${NAME}` (OpenClaw's shorthand; `${NAME}` unset is left as written): only a variable
        name = ref.group(1) or ref.group(2)
        if not env.get(name):
            raise MissingKeyError(
                f"No API key found for provider {provider}: {key_path} is {configured}, and the environment "
                f"variable {name} is not set"
            )
        key = env[name]
    elif configured:
        if ENV_NAME_RE.match(configured) and configured in env:
            key = env[configured]
        elif ENV_NAME_RE.match(configured) and configured.endswith("_KEY"):
            raise MissingKeyError(
                f"No API key found for provider {provider}: {key_path} names the "
                f"environment variable {configured}, which is not set"
            )
        else:
            key = configured
    else:
        key = next((env[n] for n in names if env.get(n)), None)
    key = key.strip() if key else None
    if not key and required:
        hint = " or ".join(names) if names else "an API key"
        raise MissingKeyError(
            f"No API key found for provider {provider}: set {hint} in the environment, "
            f"or {key_path} in the config"
        )
    register_secret(key)
    return key

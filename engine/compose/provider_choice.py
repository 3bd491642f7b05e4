"""`ProviderChoice`: which embedding provider an indexed backend embeds with, the one the config
asks for or `memorySearch.fallback` after it failed, written once for builtin, Postgres and the
kit's plugins (each has it through `IndexedBackend`).

As OpenClaw does: a sync whose embedding fails, with a fallback configured that differs from the
provider in use and has not been taken yet, switches to the fallback (with its own default model)
and rebuilds the index with it; the switch is recorded (status, answers, the index's meta). Beyond
OpenClaw: a sync someone asked for (`memsift index`, the API's) asks the configured provider again,
so an index recovers once it is back, while the syncs memsift runs by itself (a host's start, a
watcher, a search) keep the provider in use: a provider that stays down does not cost a rebuild
per changed file. A long-running host's watcher and interval syncs ask the configured provider
one short text at most every `retry_configured_s` (10 min), and rebuild with it once it answers.
And every process follows the index (`adopt_index_provider`): one the fallback built is searched
with the fallback, one rebuilt with the configured provider (by `memsift index` elsewhere) with
it, no rebuild either way.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from ..embeddings import ProviderSelection, create_provider, select_provider
from ..errors import ProviderError, embedding_failure
from ..logging import get_logger
from ..results import Fallback

__all__ = ["ProviderChoice"]

log = get_logger("memsift.embeddings")

# The reasons of the syncs memsift runs by itself: they keep the provider in use.
AUTOMATIC_SYNCS = frozenset({"start", "watch", "interval", "session-delta", "search", "bootstrap",
                             "bootstrap vectors", "recovery"})
# Those of a long-running host, which ask a configured provider that failed whether it is back.
RETRYING_SYNCS = frozenset({"watch", "interval"})
PROBE_BUDGET_S = 30.0  # the one short text asked of it (its own timeouts and retries inside)


class ProviderChoice:
    """Mixed into `IndexedBackend`; a manager sets `self.ms` and may pass a chosen selection to
    `choose_provider` (tests, benchmarks); otherwise the config's is chosen on first use, so a plain
    read never loads a provider."""

    ms: Any
    provider: Any = None  # the EmbeddingProvider in use, or None (keyword only)
    selection: ProviderSelection | None = None  # what is in use: what was asked for, why none, the fallback
    _configured: ProviderSelection | None = None  # what the config asks for
    _fallback: Any = None  # the fallback's provider once set up; False: it cannot be
    retry_configured_s = 600.0  # a host asks a configured provider that failed at most this often
    _configured_asked = 0.0  # time.monotonic() of the last such question

    def choose_provider(self, selection: ProviderSelection | None) -> None:
        self._configured = self.selection = selection
        self.provider = selection.provider if selection else None

    def ensure_provider(self) -> None:
        if self._configured is None:
            self.choose_provider(select_provider(self.ms))

    @property
    def configured_selection(self) -> ProviderSelection:
        self.ensure_provider()
        assert self._configured is not None
        return self._configured

    @property
    def selection_in_use(self) -> ProviderSelection:
        self.ensure_provider()
        assert self.selection is not None
        return self.selection

    def may_fall_back(self) -> bool:
        """A fallback is configured, not yet in use, and can be set up (no key missing, say): an
        embedding failure then switches to it instead of leaving chunks without vectors."""
        fb = self.configured_selection.fallback_id
        in_use = self.selection_in_use
        if fb is None or in_use.fallback_from or (self.provider is not None and self.provider.id == fb):
            return False
        return self._fallback_provider() is not None

    def _fallback_provider(self) -> Any:
        """The configured fallback's provider, set up once (cheap checks: no model load, no
        network); None when it cannot be (logged once)."""
        if self._fallback is None:
            fb = self.configured_selection.fallback_id
            assert fb is not None
            try:
                self._fallback = create_provider(fb, self.ms, primary=False)
            except ProviderError as exc:
                log.warning("fallback provider unavailable", fallback=fb, error=str(exc))
                self._fallback = False
        return self._fallback or None

    def syncing(self) -> bool:
        """A sync of this manager is running (its provider is then not swapped under it)."""
        return False

    async def index_meta(self) -> dict[str, Any] | None:
        """The published index's meta (its `providerKey`, the `fallback` it records), or None when
        there is none or it cannot be read (what needs the index says why). Each backend reads its own."""
        return None

    async def sync_begins_with(self, reason: str) -> None:
        """Called by a sync under its lock: one someone asked for asks the configured provider again
        (an index the fallback built recovers); memsift's own follow the index (a watcher started on
        an index the fallback built does not try to rebuild it), and a host's watcher and interval
        syncs go back to the configured provider once it answers."""
        configured = self.configured_selection
        automatic = reason in AUTOMATIC_SYNCS
        # The index's meta, where it is used: to follow the index, or before a fallback can be taken
        meta = await self.index_meta() if automatic or configured.fallback_id else None
        if automatic:
            self._follow_index(meta)
            if reason in RETRYING_SYNCS and await self._configured_answers_again():
                self.provider, self.selection = configured.provider, configured
                return  # it just answered
        elif configured.provider is not None:
            self.provider, self.selection = configured.provider, configured
        await self._ask_before_rebuilding(meta)

    async def _ask_before_rebuilding(self, meta: dict[str, Any] | None) -> None:
        """A sync about to build with a provider the index was not built with (a first index, the
        configured provider again after the fallback's index), while a fallback can be taken: one
        short text asked of it first. One that fails is left at once for the fallback (or for the
        index's own provider, which the fallback is): no index built without vectors and published
        before the fallback's, no full rebuild per `memsift index` while the provider stays down."""
        p = self.provider
        if p is None or (meta and meta.get("providerKey") == p.fingerprint) or not self.may_fall_back():
            return
        try:
            await p.embed_query("memsift")
        except ProviderError as exc:
            self.switch_to_fallback(embedding_failure(exc))

    async def _configured_answers_again(self) -> bool:
        """While the fallback embeds: does the configured provider answer one short text again?
        Asked at most every `retry_configured_s`; a failure is only logged."""
        configured = self.configured_selection
        if configured.provider is None or self.provider is configured.provider:
            return False
        now = time.monotonic()
        if self._configured_asked and now - self._configured_asked < self.retry_configured_s:
            return False
        self._configured_asked = now
        with anyio.move_on_after(PROBE_BUDGET_S):
            try:
                await configured.provider.embed_query("memsift")
            except ProviderError as exc:
                log.info("the configured provider still fails; the fallback goes on", error=str(exc))
                return False
            log.warning("the configured embedding provider answers again; rebuilding with it",
                        provider=configured.provider.id)
            return True
        log.info("the configured provider did not answer in time; the fallback goes on")
        return False

    def switch_to_fallback(self, reason: str) -> bool:
        """After the provider in use failed: use the configured fallback (once). False when there is
        none to switch to, or it cannot be set up either (logged)."""
        if not self.may_fall_back():
            return False
        fb = self.configured_selection.fallback_id
        current = self.provider.id if self.provider else self.configured_selection.requested
        provider = self._fallback_provider()
        log.warning("embedding provider failed; switching to the fallback", provider=current, fallback=fb,
                    reason=reason)
        self.provider = provider
        self.selection = ProviderSelection(provider, self.configured_selection.requested, fallback_from=current,
                                           fallback_reason=reason, fallback_id=fb)
        return True

    def adopt_index_provider(self, meta: dict[str, Any] | None) -> None:
        """Follow the index (its meta's provider key), between syncs: one the fallback built is
        searched and kept with the fallback, in any process, and one rebuilt with the configured
        provider with it; an index of neither is left for a sync to rebuild."""
        if not self.syncing():
            self._follow_index(meta)

    def followed(self, meta: dict[str, Any] | None) -> bool:
        """`adopt_index_provider(meta)`, and whether the provider changed by it (a question embedded
        before must be embedded again)."""
        before = self.provider
        self.adopt_index_provider(meta)
        return self.provider is not before

    def _follow_index(self, meta: dict[str, Any] | None) -> None:
        if not meta:
            return
        key = meta.get("providerKey")
        configured = self.configured_selection
        if self.provider is not None and key == self.provider.fingerprint:
            return
        if configured.provider is not None and key == configured.provider.fingerprint:
            self.provider, self.selection = configured.provider, configured
            return
        fb, info = configured.fallback_id, meta.get("fallback")
        if fb is None or not isinstance(info, dict) or meta.get("provider") != fb:
            return
        provider = self._fallback_provider()
        if provider is not None and provider.fingerprint == key:
            self.provider = provider
            self.selection = ProviderSelection(provider, configured.requested, fallback_from=info.get("from"),
                                               fallback_reason=info.get("reason"), fallback_id=fb)

    async def close_providers(self) -> None:
        """Close every provider this manager set up: the configured one, the fallback, whichever is in use."""
        mine = [self.provider, self._configured.provider if self._configured else None, self._fallback or None]
        for provider in {id(p): p for p in mine if p is not None}.values():
            await provider.aclose()

    def fallback_record(self) -> dict[str, Any]:
        """What an index's meta records of a fallback in use (`{}` when none): read back by
        `adopt_index_provider` in other processes, never part of the fingerprint."""
        s = self.selection
        if s is None or not s.fallback_from:
            return {}
        return {"fallback": {"from": s.fallback_from, "reason": s.fallback_reason}}

    def fallback(self) -> Fallback | None:
        s = self.selection
        if s is not None and s.fallback_from:
            return Fallback(from_=s.fallback_from, reason=s.fallback_reason or "", kind="provider")
        return None

    def fallback_words(self) -> str:
        """What status's "Searches" line adds while the fallback embeds (empty otherwise)."""
        fb = self.fallback()
        return f", with the fallback provider ({fb.from_} failed: {fb.reason})" if fb else ""

// memsift's MCP answers in the shapes OpenClaw's memory tools and memory runtime use, so the agent
// reads what it reads from memory-core: hits with path, startLine, endLine, score, snippet and
// citation; `disabled`/`unavailable` with a warning and an action when there is nothing to show;
// memory_get's `status: "ok" | "not_found" | "error"`.

const SOURCE_LINE = /\n*Source: \S+\s*$/;

function hit(h) {
  return {
    path: h.path,
    startLine: h.startLine,
    endLine: h.endLine,
    score: h.score,
    snippet: h.snippet,
    source: h.source ?? "memory",
    corpus: h.source ?? "memory",
    ...(h.citation ? { citation: h.citation } : {}),
    ...(h.rescued ? { rescued: true } : {}),
    ...(h.belowMinScore ? { belowMinScore: true } : {}),
    ...(h.stale ? { stale: true } : {}),
  };
}

/** The tool result of memory_search when memsift could not answer (the shape memory-core uses). */
export function unavailable(error, { warning, action, timedOut } = {}) {
  const reason = String(error || "memory search unavailable").trim();
  const said = warning ?? (timedOut ? "Memory search did not finish within its time limit." : "Memory search is unavailable.");
  const todo = action ?? "Check the memsift plugin (openclaw memsift status), then retry memory_search.";
  return {
    results: [],
    disabled: true,
    unavailable: true,
    ...(timedOut ? { timedOut: true } : {}),
    error: reason,
    warning: said,
    action: todo,
    debug: { backend: "memsift", warning: said, action: todo, error: reason },
  };
}

/** What the scope rules said to a chat that may not search memory. */
export function denial(denied) {
  const where = [denied.chatType && `${denied.chatType} chat`, denied.channel && `on ${denied.channel}`].filter(Boolean).join(" ");
  return unavailable(`memory is not available in this chat${where ? ` (${where})` : ""}: memsift's scope rule "${denied.rule}" denies it`, {
    warning: "Memory search is disabled for this chat by the memory scope rules.",
    action: "Answer without memory; the operator can allow this chat in memsift's memory.qmd.scope rules.",
  });
}

// memsift was asked for this corpus and ranked within it; this keeps the tool's promise should a
// backend answer another corpus's hit anyway.
function keptFor(corpus, h) {
  if (corpus === "memory") return (h.source ?? "memory") === "memory";
  if (corpus === "sessions") return h.source === "sessions";
  return true;
}

/** What a fallback means to the agent: another backend answered, or another embedding provider embedded. */
function fellBack(answer) {
  const { from, reason, kind } = answer.fallback;
  if (kind === "provider") {
    return `memsift's embedding provider ${from} failed (${reason}); the fallback provider ${answer.provider} embedded`;
  }
  return `memsift's ${from} backend failed (${reason}); ${answer.backend} answered`;
}

/** memory_search's tool result from memsift's answer. */
export function searchResult(answer, { corpus = "memory", toolMs } = {}) {
  if (answer.denied) return denial(answer.denied);
  if (answer.unavailable || (answer.disabled && !(answer.results ?? []).length && answer.error)) {
    return unavailable(answer.error, { warning: answer.warning, action: answer.action });
  }
  const results = (answer.results ?? []).filter((h) => keptFor(corpus, h)).map(hit);
  const warnings = [];
  if (answer.fallback) warnings.push(fellBack(answer));
  for (const [side, why] of Object.entries(answer.degraded ?? {})) warnings.push(`${side} search degraded: ${why}`);
  if (answer.warning) warnings.push(answer.warning);
  if (answer.syncError) warnings.push(`the index could not be updated (${answer.syncError}); recent changes may be missing`);
  for (const note of answer.notes ?? []) warnings.push(note);
  return {
    results,
    provider: answer.provider,
    model: answer.model,
    mode: answer.mode,
    citations: answer.citations,
    ...(answer.fallback ? { fallback: { from: answer.fallback.from, reason: answer.fallback.reason,
      ...(answer.fallback.kind ? { kind: answer.fallback.kind } : {}) } } : {}),
    ...(answer.truncated ? { truncated: true } : {}),
    ...(answer.timeWindows ? { timeWindows: answer.timeWindows } : {}),
    // A time-only answer whose window holds no notes, or more days than shown: said to the agent.
    ...(answer.timeNote ? { timeNote: answer.timeNote } : {}),
    ...(warnings.length ? { warning: warnings.join("; ") } : {}),
    ...(answer.action ? { action: answer.action } : {}),
    debug: {
      backend: `memsift:${answer.backend ?? "?"}`,
      effectiveMode: answer.mode,
      searchMs: answer.tookMs,
      ...(toolMs !== undefined ? { toolMs } : {}),
      hits: results.length,
    },
  };
}

/** The runtime manager's `search()` results: plain snippets (the tools add the citation line). */
export function searchHits(answer) {
  if (answer.denied || answer.unavailable) return [];
  return (answer.results ?? []).map((h) => ({ ...hit(h), snippet: String(h.snippet ?? "").replace(SOURCE_LINE, "") }));
}

/** memory_get's tool result (and the runtime manager's readFile) from memsift's answer. */
export function readResult(got, requestedPath) {
  const path = got.path ?? requestedPath;
  if (got.denied) {
    return {
      status: "error", path, text: "", code: "MEMORY_ACCESS_DENIED",
      error: `memory is not readable in this chat: memsift's scope rule "${got.denied.rule}" denies it`,
    };
  }
  if (got.missing) return { status: "not_found", path, text: "" };
  if (got.disabled || got.error) {
    return { status: "error", path, text: "", code: "MEMORY_READ_FAILED", error: got.error ?? "memsift could not read it" };
  }
  return {
    status: "ok",
    text: got.text ?? "",
    path,
    from: got.from,
    lines: got.lines,
    ...(got.truncated ? { truncated: true } : {}),
    ...(got.nextFrom ? { nextFrom: got.nextFrom } : {}),
    ...(got.nextOffset ? { nextOffset: got.nextOffset } : {}),
    ...(got.warning ? { warning: got.warning } : {}),
  };
}

/** OpenClaw's MemoryProviderStatus from memsift's memory_status (memsift's status already uses
 * OpenClaw's names: files, chunks, dirty, provider, model, fts, vector, cache; the rest is `custom`). */
export function providerStatus(st, { workspace, error } = {}) {
  const s = st?.status;
  if (!s) {
    return {
      backend: "builtin", provider: "memsift", workspaceDir: workspace, dirty: true,
      ...(error || st?.error ? { lastSyncError: error || st.error } : {}),
      custom: { engine: "memsift", ...(st?.denied ? { denied: st.denied } : {}) },
    };
  }
  const pick = (...keys) => Object.fromEntries(keys.filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
  return {
    ...pick("provider", "model", "requestedProvider", "files", "chunks", "dirty", "workspaceDir", "dbPath", "sources",
      "extraPaths", "cache", "fts", "vector", "fallback"),
    backend: "builtin", // OpenClaw's type names this one value; memsift's backend is custom.backend
    custom: {
      engine: "memsift",
      ...pick("backend", "searchMode", "searchNow", "agentId"),
      ...(st.warning ? { warning: st.warning } : {}),
    },
  };
}

// The memory slot's runtime: OpenClaw's own callers (status scans, doctor, compaction, recall
// helpers) get a search manager backed by the same memsift process as the tools.
//
// `status()` is synchronous in OpenClaw's contract, so the manager keeps the last status memsift
// gave (fetched when the manager is made, refreshed after every call) and answers from it.

import { providerStatus, readResult, searchHits } from "./answers.js";
import { given } from "./tools.js";

class MemsiftSearchManager {
  constructor(deps, target) {
    this.deps = deps;
    this.target = target;
    this.child = deps.processForTarget(target);
    this.lastStatus = providerStatus(undefined, { workspace: target.workspace });
  }

  async refreshStatus({ deep = false } = {}) {
    try {
      this.lastStatus = providerStatus(await this.child.call("memory_status", deep ? { deep: true } : {}), { workspace: this.target.workspace });
    } catch (error) {
      this.lastStatus = providerStatus(undefined, { workspace: this.target.workspace, error: error.message });
    }
    return this.lastStatus;
  }

  async search(query, opts = {}) {
    const answer = await this.child.call("memory_search", given({
      query,
      maxResults: opts.maxResults || undefined,
      minScore: typeof opts.minScore === "number" ? opts.minScore : undefined,
      sessionKey: opts.sessionKey || undefined,
      mode: opts.lexicalOnly ? "keyword" : undefined, // reply-path recall: no embedding round-trip
    }), { signal: opts.signal });
    const hits = searchHits(answer);
    return opts.sources?.length ? hits.filter((h) => opts.sources.includes(h.source)) : hits;
  }

  async readFile({ relPath, from, lines }) {
    const got = await this.child.call("memory_get", given({ path: relPath, from: from || undefined, lines: lines || undefined }));
    const read = readResult(got, relPath);
    if (read.status === "error") throw new Error(read.error);
    return read;
  }

  status() {
    return this.lastStatus;
  }

  /** A sync is memsift's own `index` (changed files only; `force` rebuilds). */
  async sync(params = {}) {
    await this.deps.runCli(this.target, ["index", ...(params.force ? ["--force"] : [])]);
    await this.refreshStatus();
  }

  getCachedEmbeddingAvailability() {
    const vector = this.lastStatus.vector;
    return vector ? { ok: Boolean(vector.available), cached: true, ...(vector.loadError ? { error: vector.loadError } : {}) } : null;
  }

  async probeEmbeddingAvailability() {
    const st = await this.refreshStatus({ deep: true });
    if (st.vector?.available) return { ok: true, checked: true };
    return { ok: false, checked: true, error: st.vector?.loadError ?? st.lastSyncError ?? `embeddings are off (provider ${st.provider})` };
  }

  async probeVectorAvailability() {
    return Boolean((await this.refreshStatus()).vector?.available);
  }

  async probeVectorStoreAvailability() {
    return this.probeVectorAvailability();
  }

  async close() {
    // The process is shared with the tools and ends with the Gateway (the plugin's service).
  }
}

/** The `runtime` of registerMemoryCapability. */
export function memoryRuntime(deps) {
  return {
    async getMemorySearchManager(params) {
      try {
        const target = deps.targetFor({ cfg: params.cfg, agentId: params.agentId });
        const manager = new MemsiftSearchManager(deps, target);
        await manager.refreshStatus();
        return { manager, debug: { backend: "memsift" } };
      } catch (error) {
        return { manager: null, error: `memsift: ${error.message}` };
      }
    },
    resolveMemoryBackendConfig() {
      return { backend: "builtin" };
    },
    async closeMemorySearchManager() {},
    async closeAllMemorySearchManagers() {
      await deps.stopAll();
    },
  };
}

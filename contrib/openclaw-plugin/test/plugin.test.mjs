// The plugin without OpenClaw: its registrations captured from a stand-in `api`, its tools and its
// runtime run against the real memsift on a copy of the example workspace. (That OpenClaw loads
// it, and the Gateway answers through it, is tests/plugins/test_openclaw_gateway.py.)
//
//   MEMSIFT_COMMAND='["python", "-m", "memsift.engine.cli.main"]' node --test test/plugin.test.mjs
//
// MEMSIFT_COMMAND (a JSON list) names the memsift to run; default `memsift` on PATH.

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import plugin from "../index.js";
import { providerStatus, readResult, searchResult } from "../src/answers.js";
import { MemsiftProcess } from "../src/memsift-process.js";
import { memorySearchTool } from "../src/tools.js";
import { memoryPromptSection } from "../src/prompt.js";
import { memsiftPrefix, pluginSettings } from "../src/settings.js";
import { checkMemsiftVersion } from "../src/cli.js";
import { lineName, worksWith } from "../src/version.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLE = path.resolve(HERE, "../../example-workspace");
const COMMAND = process.env.MEMSIFT_COMMAND ? JSON.parse(process.env.MEMSIFT_COMMAND) : ["memsift"];
const QUESTION = "why did we pick Postgres for the ledger?"; // README command 1

const scratch = mkdtempSync(path.join(os.tmpdir(), "memsift-plugin-test-"));
const workspace = path.join(scratch, "ws");
const env = { ...process.env, MEMSIFT_STATE_DIR: path.join(scratch, "state"), XDG_CONFIG_HOME: path.join(scratch, "xdg"),
  MEMSIFT_NO_RESIDENT: "1" };
const stopped = [];

function fakeApi(pluginConfig = {}, config = { agents: { defaults: { workspace } } }) {
  const seen = { tools: {}, capability: undefined, cli: undefined, services: [], warnings: [] };
  const api = {
    pluginConfig: { command: COMMAND, openclawConfig: false, ...pluginConfig },
    config,
    registrationMode: "full",
    logger: { warn: (m) => seen.warnings.push(m), info() {}, debug() {} },
    runtime: { agent: { resolveAgentWorkspaceDir: (cfg) => cfg?.agents?.defaults?.workspace } },
    registerMemoryCapability: (capability) => { seen.capability = capability; },
    registerTool: (factory, opts) => { seen.tools[opts.names[0]] = factory; },
    registerCli: (registrar, opts) => { seen.cli = { registrar, opts }; },
    registerService: (service) => { seen.services.push(service); },
  };
  return { api, seen };
}

function registered(pluginConfig, config) {
  const { api, seen } = fakeApi(pluginConfig, config);
  plugin.register(api);
  stopped.push(seen);
  return seen;
}

async function call(seen, tool, args, ctx = {}) {
  const made = seen.tools[tool]({ agentId: "main", workspaceDir: workspace, sessionKey: "agent:main:main", ...ctx });
  return (await made.execute("call-1", args, undefined)).details;
}

before(() => {
  cpSync(EXAMPLE, workspace, { recursive: true });
  for (const [key, value] of Object.entries(env)) process.env[key] = value; // the children inherit it
});

after(async () => {
  for (const seen of stopped) for (const service of seen.services) await service.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe("registration", () => {
  test("fills the memory slot: capability, both tools, its CLI namespace, a service", () => {
    const seen = registered();
    assert.equal(plugin.id, "memsift");
    assert.equal(plugin.kind, "memory");
    assert.equal(typeof seen.capability.runtime.getMemorySearchManager, "function");
    assert.deepEqual(Object.keys(seen.tools).sort(), ["memory_get", "memory_search"]);
    assert.equal(seen.cli.opts.descriptors[0].name, "memsift");
    assert.equal(seen.services[0].id, "memsift");
    const tool = seen.tools.memory_search({ agentId: "main", workspaceDir: workspace });
    assert.deepEqual(tool.parameters.required, ["query"]);
    assert.ok(["query", "maxResults", "minScore", "corpus"].every((k) => k in tool.parameters.properties));
  });

  test("the prompt section says when to search, and nothing without the tools", () => {
    const lines = memoryPromptSection({ availableTools: new Set(["memory_search", "memory_get"]) });
    assert.equal(lines[0], "## Memory Recall");
    assert.match(lines.join("\n"), /run memory_search; then use memory_get/);
    assert.deepEqual(memoryPromptSection({ availableTools: new Set(["exec"]) }), []);
    assert.match(memoryPromptSection({ availableTools: new Set(["memory_search"]), citationsMode: "off" }).join("\n"), /Citations are disabled/);
  });

  test("settings: defaults, command forms, and the memsift command line", () => {
    const s = pluginSettings({ command: "/opt/memsift", backend: "qmd", configPath: "/etc/memsift.json5" });
    assert.deepEqual(s.command, ["/opt/memsift"]);
    assert.equal(s.callTimeoutMs, 30000);
    assert.deepEqual(memsiftPrefix(s, { workspace: "/ws", agentId: "ops", openclawConfig: "/oc.json" }),
      ["/opt/memsift", "-w", "/ws", "-a", "ops", "-c", "/etc/memsift.json5", "--openclaw-config", "/oc.json", "-b", "qmd"]);
    assert.throws(() => pluginSettings({ command: [] }), /command/);
    assert.throws(() => pluginSettings({ callTimeoutMs: 5 }), /callTimeoutMs/);
  });
});

describe("tools against the real memsift", () => {
  let seen;
  before(() => { seen = registered(); });

  test("memory_search answers with OpenClaw's result shape", async () => {
    const found = await call(seen, "memory_search", { query: QUESTION, maxResults: 2 });
    assert.equal(found.results.length, 2);
    const [decision] = found.results;
    assert.ok(decision.path === "MEMORY.md" && decision.snippet.includes("PostgreSQL 16"),
      JSON.stringify(found.results.map((h) => h.path)));
    for (const h of found.results) {
      assert.ok(Number.isInteger(h.startLine) && h.endLine >= h.startLine && h.score > 0);
      assert.equal(h.citation, `${h.path}#L${h.startLine}-L${h.endLine}`);
      assert.ok(h.snippet.includes(`Source: ${h.path}#L`)); // a direct chat: cited (memory.citations auto)
    }
    assert.equal(found.debug.backend, "memsift:builtin");
    assert.equal(found.provider, "local");
    assert.ok(!JSON.stringify(found).includes("null"));
  });

  test("memory_search says when the day asked for has no notes, and shows the nearest", async () => {
    const found = await call(seen, "memory_search", { query: "what did I do on November 20, 2026?" });
    assert.match(found.timeNote ?? "", /^no notes in 2026-11-20/);
    assert.equal(found.results[0]?.path, "memory/2026-11-18.md", JSON.stringify(found.results.map((h) => h.path)));
  });

  test("memory_get reads a hit's citation and a range", async () => {
    const got = await call(seen, "memory_get", { path: "MEMORY.md", from: 21, lines: 3 });
    assert.equal(got.status, "ok");
    assert.match(got.text, /^## Decisions/);
    assert.equal(got.lines, 3);
    const cited = await call(seen, "memory_get", { path: "memory/2026-11-05.md#L6-L7" });
    assert.match(cited.text, /Lunch with Lena/);
    assert.equal((await call(seen, "memory_get", { path: "memory/2020-01-01.md" })).status, "not_found");
    const outside = await call(seen, "memory_get", { path: "../../etc/passwd" });
    assert.equal(outside.status, "error");
    assert.match(outside.error, /not allowed/);
  });

  test("a chat the scope rules deny gets OpenClaw's unavailable shape, never hits", async () => {
    const denied = await call(seen, "memory_search", { query: QUESTION }, { sessionKey: "agent:main:discord:group:42" });
    assert.deepEqual(denied.results, []);
    assert.equal(denied.disabled, true);
    assert.equal(denied.unavailable, true);
    assert.match(denied.error, /default deny/);
    assert.ok(denied.warning && denied.action);
    const read = await call(seen, "memory_get", { path: "MEMORY.md" }, { sessionKey: "agent:main:discord:group:42" });
    assert.equal(read.status, "error");
    assert.equal(read.text, "");
    assert.equal(read.code, "MEMORY_ACCESS_DENIED");
  });

  test("bad arguments are the caller's error", async () => {
    const tool = seen.tools.memory_search({ agentId: "main", workspaceDir: workspace });
    await assert.rejects(tool.execute("x", { maxResults: 2 }), (e) => e.name === "ToolInputError" && /query/.test(e.message));
    await assert.rejects(tool.execute("x", { query: "a", maxResults: 0 }), /maxResults/);
    const wiki = await call(seen, "memory_search", { query: QUESTION, corpus: "wiki" });
    assert.equal(wiki.unavailable, true);
  });

  test("the runtime's search manager: search, readFile, status, probes", async () => {
    const { manager } = await seen.capability.runtime.getMemorySearchManager({ cfg: { agents: { defaults: { workspace } } }, agentId: "main" });
    const hits = await manager.search(QUESTION, { maxResults: 2 });
    assert.equal(hits.length, 2);
    assert.ok(hits.every((h) => !/Source:/.test(h.snippet))); // plain snippets for OpenClaw's own callers
    const read = await manager.readFile({ relPath: "MEMORY.md", from: 1, lines: 1 });
    assert.equal(read.status, "ok");
    const st = manager.status();
    assert.equal(st.backend, "builtin");
    assert.equal(st.custom.engine, "memsift");
    assert.ok(st.files >= 5 && st.chunks >= st.files);
    assert.equal(await manager.probeVectorAvailability(), true);
    assert.equal((await manager.probeEmbeddingAvailability()).ok, true);
  });
});

describe("failure is visible, never a hang", () => {
  test("memsift missing", async () => {
    const seen = registered({ command: "memsift-that-is-not-installed" });
    const found = await call(seen, "memory_search", { query: QUESTION });
    assert.equal(found.unavailable, true);
    assert.match(found.error, /memsift was not found/);
    assert.match(found.action, /command/);
    const { manager, error } = await seen.capability.runtime.getMemorySearchManager({ cfg: {}, agentId: "main" });
    assert.ok(manager === null ? /no workspace|not found/.test(error) : manager.status().lastSyncError);
  });

  test("a workspace that does not exist: memsift's own message", async () => {
    const seen = registered({ workspace: path.join(scratch, "nope") });
    const found = await call(seen, "memory_search", { query: QUESTION });
    assert.equal(found.unavailable, true);
    assert.match(found.error, /does not exist/);
  });

  test("a memsift of another release line is refused at start, saying which and what to do", async () => {
    const mine = JSON.parse(readFileSync(path.join(HERE, "..", "package.json"), "utf8")).version;
    const child = new MemsiftProcess({ argv: [...COMMAND, "-w", workspace, "mcp"], clientVersion: "9.9.0", env,
      callTimeoutMs: 60_000, startupTimeoutMs: 120_000 });
    await assert.rejects(child.call("memory_search", { query: QUESTION }), (e) => {
      assert.equal(e.kind, "version");
      assert.match(e.message, new RegExp(`memsift ${mine.replaceAll(".", "\\.")} was found .*this plugin \\(9\\.9\\.0\\) works with memsift 9\\.x only`));
      assert.match(e.action, /memsift openclaw install/);
      return true;
    });
    await child.connection.exited; // stopped, not left serving
    await child.stop();
    // The same memsift, as the plugin of its own release sees it: served (the tools' tests above), and
    // the CLI namespace's check agrees.
    assert.equal(await checkMemsiftVersion({ command: COMMAND }, mine, { env }), mine);
    await assert.rejects(checkMemsiftVersion({ command: COMMAND }, "9.9.0", { env }), /works with memsift 9\.x only/);
  });

  test("release lines: major.minor before 1.0, the major after", () => {
    assert.ok(worksWith("0.2.0", "0.2.7") && worksWith("0.2.0", "0.2.0rc1") && worksWith("0.2.1", "0.2.0+g12ab"));
    assert.ok(!worksWith("0.2.0", "0.1.0") && !worksWith("0.2.0", "0.3.0") && !worksWith("0.2.0", undefined));
    assert.ok(worksWith("1.2.0", "1.9.1") && !worksWith("1.2.0", "2.0.0") && !worksWith("1.0.0", "not a version"));
    assert.equal(lineName("0.2.5"), "0.2");
    assert.equal(lineName("3.1.0"), "3");
  });

  test("a memsift that never answers: the call's budget ends it", async () => {
    const silent = path.join(scratch, "silent.mjs");
    writeFileSync(silent, "process.stdin.resume(); setInterval(() => {}, 1000);\n");
    const child = new MemsiftProcess({ argv: [process.execPath, silent], callTimeoutMs: 1000, startupTimeoutMs: 1000 });
    const started = Date.now();
    await assert.rejects(child.call("memory_search", { query: "x" }), (e) => e.kind === "timeout");
    assert.ok(Date.now() - started < 10_000);
    const pid = child.connection.child.pid;
    await child.stop();
    assert.equal(spawnSync("kill", ["-0", String(pid)]).status !== 0, true); // gone
  });

  test("a Gateway restarted in-process keeps one memsift per agent and one exit listener", async () => {
    // Editing memory.search restarts the Gateway in-process: the plugin is registered again each time.
    const listeners = process.listenerCount("exit");
    let seen;
    for (let restart = 0; restart < 5; restart += 1) {
      seen = registered();
      assert.ok((await call(seen, "memory_search", { query: QUESTION })).results.length > 0);
    }
    assert.ok(process.listenerCount("exit") <= listeners + 1, `${process.listenerCount("exit")} exit listeners`);
    const serving = () => execFileSync("pgrep", ["-f", "--", `-w ${workspace} -a main`]).toString().trim().split("\n");
    for (let waited = 0; serving().length > 1 && waited < 50; waited += 1) await new Promise((r) => setTimeout(r, 100));
    assert.equal(serving().length, 1, `children serving the agent: ${serving().join(", ")}`); // earlier ones stopped
    for (const service of seen.services) await service.stop();
  });

  test("the service stops every memsift it started", async () => {
    const seen = registered();
    await call(seen, "memory_search", { query: QUESTION });
    const pids = execFileSync("pgrep", ["-f", "--", `-w ${workspace} -a main`]).toString().trim().split("\n");
    assert.ok(pids.length >= 1);
    for (const s of stopped) for (const service of s.services) await service.stop();
    const left = spawnSync("pgrep", ["-f", "--", `-w ${workspace} -a main`]).stdout.toString().trim();
    assert.equal(left, "");
  });
});

describe("the user's time zone", () => {
  test("'yesterday' is a day of the Gateway config's agents.defaults.userTimezone, as its daily files are", async () => {
    const zoned = path.join(scratch, "zoned");
    mkdirSync(path.join(zoned, "memory"), { recursive: true });
    writeFileSync(path.join(zoned, "memory", "2026-12-04.md"), "- 10:00 Drafted the quarterly report.\n");
    writeFileSync(path.join(zoned, "memory", "2026-12-05.md"), "- 09:00 Met Anna about the ledger migration.\n");
    const gatewayConfig = path.join(scratch, "openclaw.json");
    writeFileSync(gatewayConfig, JSON.stringify({ agents: { defaults: { workspace: zoned,
      userTimezone: "America/Los_Angeles" } } }));
    const saved = { MEMSIFT_NOW: process.env.MEMSIFT_NOW, TZ: process.env.TZ };
    // 00:50 UTC on the 6th: the Gateway's machine says yesterday was the 5th; in California it is still the 5th.
    Object.assign(process.env, { MEMSIFT_NOW: "2026-12-06T00:50:00+00:00", TZ: "UTC" });
    try {
      const seen = registered({ openclawConfig: gatewayConfig }, { agents: { defaults: { workspace: zoned } } });
      const found = await call(seen, "memory_search", { query: "what did I do yesterday?" }, { workspaceDir: zoned });
      assert.deepEqual(found.results.map((h) => h.path), ["memory/2026-12-04.md"]);
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});

describe("session transcripts", () => {
  test("are read where the Gateway writes them: its state folder's agents/<id>/sessions", async () => {
    const gatewayState = path.join(scratch, "gateway-state");
    const sessions = path.join(gatewayState, "agents", "main", "sessions");
    mkdirSync(sessions, { recursive: true });
    const message = (role, content) => JSON.stringify({ type: "message", message: { role, content, timestamp: 1_700_000_000_000 } });
    writeFileSync(path.join(sessions, "abc.jsonl"), [JSON.stringify({ type: "session", id: "abc" }),
      message("user", "what is the wifi password for the cabin"), message("assistant", "It is on the fridge")].join("\n") + "\n");
    const chatty = path.join(scratch, "chatty");
    mkdirSync(path.join(chatty, "memory"), { recursive: true });
    writeFileSync(path.join(chatty, "MEMORY.md"), "# Memory\n\n- The boat is moored at pier 4.\n");
    const gatewayConfig = path.join(scratch, "openclaw-sessions.json");
    writeFileSync(gatewayConfig, JSON.stringify({ agents: { defaults: { workspace: chatty,
      memorySearch: { sources: ["memory", "sessions"], experimental: { sessionMemory: true } } } } }));
    const { api, seen } = fakeApi({ openclawConfig: gatewayConfig }, { agents: { defaults: { workspace: chatty } } });
    api.runtime.state = { resolveStateDir: () => gatewayState };
    const saved = process.env.OPENCLAW_STATE_DIR;
    delete process.env.OPENCLAW_STATE_DIR; // the Gateway's own resolution tells memsift
    try {
      plugin.register(api);
      stopped.push(seen);
      const found = await call(seen, "memory_search", { query: "wifi password cabin", corpus: "sessions" },
        { workspaceDir: chatty });
      assert.deepEqual(found.results.map((h) => [h.path, h.source, h.startLine, h.endLine]),
        [["sessions/abc.jsonl", "sessions", 2, 3]]);
      const read = await call(seen, "memory_get", { path: "sessions/abc.jsonl#L2-L3", corpus: "sessions" },
        { workspaceDir: chatty });
      assert.equal(read.status, "ok");
      assert.equal(read.text, "User: what is the wifi password for the cabin\nAssistant: It is on the fridge");
    } finally {
      if (saved !== undefined) process.env.OPENCLAW_STATE_DIR = saved;
    }
  });
});

describe("answers, mapped", () => {
  test("search: hits, fallback and degraded sides become warnings; nothing null", () => {
    const out = searchResult({ results: [{ path: "a.md", startLine: 1, endLine: 2, score: 0.5, snippet: "x", source: "sessions" }],
      backend: "builtin", mode: "fts-only", provider: "none", fallback: { from: "qmd", reason: "timed out" },
      degraded: { vector: "no provider" }, tookMs: 3 }, { corpus: "all" });
    assert.equal(out.results.length, 1);
    assert.match(out.warning, /qmd backend failed \(timed out\)/);
    assert.match(out.warning, /vector search degraded/);
    assert.deepEqual(searchResult({ results: [{ path: "a.md", source: "sessions" }] }, { corpus: "memory" }).results, []);
    const embedded = searchResult({ results: [], backend: "lancedb", mode: "hybrid", provider: "local",
      fallback: { from: "openai", reason: "HTTP 503", kind: "provider" } });
    assert.match(embedded.warning, /embedding provider openai failed \(HTTP 503\); the fallback provider local embedded/);
    assert.doesNotMatch(embedded.warning, /backend/);
    assert.equal(embedded.fallback.kind, "provider");
  });

  test("memory_search asks memsift for the corpus, so it cuts to maxResults within it", async () => {
    const asked = [];
    const child = { call: async (name, args) => { asked.push({ name, args }); return { results: [] }; } };
    const tool = memorySearchTool({ agentId: "main" }, { processFor: () => child });
    await tool.execute("x", { query: "ledger", maxResults: 2 });
    await tool.execute("y", { query: "ledger", corpus: "sessions" });
    await tool.execute("z", { query: "ledger", corpus: "all" });
    assert.deepEqual(asked.map((a) => a.args.corpus), ["memory", "sessions", "all"]);
    assert.deepEqual(asked[0].args, { query: "ledger", maxResults: 2, corpus: "memory" });
  });

  test("read and status", () => {
    assert.deepEqual(readResult({ path: "m.md", missing: true }, "m.md"), { status: "not_found", path: "m.md", text: "" });
    assert.equal(readResult({ path: "m.md", text: "x", from: 1, lines: 1, truncated: true, nextFrom: 2 }).nextFrom, 2);
    const st = providerStatus({ status: { backend: "qmd", files: 3, chunks: 9, provider: "local", vector: { available: true } } });
    assert.equal(st.backend, "builtin");
    assert.equal(st.custom.backend, "qmd");
    assert.equal(providerStatus(undefined, { error: "boom" }).lastSyncError, "boom");
  });
});

// memsift as OpenClaw's memory: the plugin that fills `plugins.slots.memory`.
//
// It registers the memory capability (a prompt section and a runtime whose search manager is
// memsift), the tools memory_search and memory_get, and the `openclaw memsift` commands. Every
// answer comes from a long-lived `memsift … mcp` child per agent (one per Gateway for one agent),
// started on first use and stopped with the Gateway. The agent's workspace, its id and the
// Gateway's config file go to memsift, so the same `memory.search.*` keys apply and memsift's
// scope rules judge the session key of every call.

import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { registerMemsiftCli, runMemsift } from "./src/cli.js";
import { MemsiftProcess } from "./src/memsift-process.js";
import { memoryPromptSection } from "./src/prompt.js";
import { memoryRuntime } from "./src/runtime.js";
import { memsiftPrefix, openclawConfigPath, pluginSettings } from "./src/settings.js";
import { memoryGetTool, memorySearchTool } from "./src/tools.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const VERSION = JSON.parse(readFileSync(path.join(HERE, "package.json"), "utf8")).version;

function expandHome(p) {
  return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}

/** The agent OpenClaw 2026.9 uses when none is named: systemAgent, else the only one, else "main". */
function defaultAgentId(cfg) {
  const system = cfg?.agents?.defaults?.systemAgent?.agentId;
  if (typeof system === "string" && system.trim()) return system.trim().toLowerCase();
  const ids = Object.keys(cfg?.agents?.entries ?? {});
  return ids.length === 1 ? ids[0].toLowerCase() : "main";
}

// One set of memsift children per Gateway process, whatever the number of registrations: a Gateway
// restarted in-process (an edit of memory.search in openclaw.json) registers the plugin again, and
// each registration used to start children of its own (three served one agent, ~169 MB each) and add
// a process-exit listener ("11 exit listeners added"). Shared through globalThis, so a second copy of
// this module (another import URL) shares it too.
const SHARED = Symbol.for("memsift.openclaw-plugin.children");

function shared() {
  globalThis[SHARED] ??= { processes: new Map(), exitHooked: false };
  return globalThis[SHARED];
}

/** A new registration: the running children may hold stale settings, so each ends once its calls in
 * flight are answered, and the next call starts one anew (never two serving an agent for long). */
function retireEarlierChildren() {
  for (const child of shared().processes.values()) void child.retire();
}

function stopEveryChild() {
  const { processes } = shared();
  const all = [...processes.values()];
  processes.clear();
  return Promise.all(all.map((child) => child.stop()));
}

/** `env` with OPENCLAW_STATE_DIR set to the Gateway's state folder where it is known and not set already. */
export function withStateDir(env, resolveStateDir) {
  if (env.OPENCLAW_STATE_DIR) return env;
  let stateDir;
  try {
    stateDir = resolveStateDir?.();
  } catch {
    stateDir = undefined;
  }
  return typeof stateDir === "string" && stateDir ? { ...env, OPENCLAW_STATE_DIR: stateDir } : env;
}

/** Everything the tools, the runtime and the CLI share: settings, targets, one process per agent. */
export function createDeps(api, { env: givenEnv = process.env } = {}) {
  const settings = pluginSettings(api.pluginConfig);
  const { processes } = shared();
  // memsift reads the agents' session transcripts (`sources: ["memory", "sessions"]`) where the
  // Gateway writes them: its state folder, told to memsift as OpenClaw's own variable.
  const env = withStateDir(givenEnv, () => api.runtime?.state?.resolveStateDir?.());

  const targetFor = ({ cfg, agentId, workspaceDir }) => {
    const config = cfg ?? api.runtime?.config?.current?.() ?? api.config;
    const agent = (typeof agentId === "string" && agentId.trim() ? agentId.trim() : defaultAgentId(config)).toLowerCase();
    let workspace = settings.workspace ?? workspaceDir;
    if (!workspace) {
      try {
        workspace = api.runtime?.agent?.resolveAgentWorkspaceDir?.(config, agent);
      } catch {
        workspace = undefined;
      }
    }
    workspace ??= config?.agents?.defaults?.workspace;
    if (!workspace) {
      throw new Error(`no workspace is known for agent ${agent}: set agents.defaults.workspace (or agents.entries.${agent}.workspace), or plugins.entries.memsift.config.workspace`);
    }
    const openclawConfig = openclawConfigPath(settings, () => api.runtime?.state?.resolveStateDir?.(), env);
    return { workspace: path.resolve(expandHome(workspace)), agentId: agent, openclawConfig };
  };

  const processForTarget = (target) => {
    const argv = [...memsiftPrefix(settings, target), "mcp"];
    const key = JSON.stringify(argv);
    let child = processes.get(key);
    if (!child) {
      child = new MemsiftProcess({
        argv, env, logger: api.logger, clientVersion: VERSION,
        startupTimeoutMs: settings.startupTimeoutMs, callTimeoutMs: settings.callTimeoutMs,
      });
      processes.set(key, child);
    }
    return child;
  };

  // The service's stop (the Gateway stopping, or an earlier registration's stop after a restart):
  // every child ends once its calls in flight are answered, so no call of a newer registration fails.
  const stopAll = async () => {
    await Promise.all([...processes.values()].map((child) => child.retire()));
  };

  return {
    settings,
    version: VERSION,
    targetFor,
    processForTarget,
    processFor: (ctx) => processForTarget(targetFor({ cfg: ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config,
      agentId: ctx?.agentId, workspaceDir: ctx?.workspaceDir })),
    runCli: (target, args) => runMemsift(settings, target, args, { timeoutMs: settings.startupTimeoutMs, env }),
    stopAll,
    running: () => [...processes.values()].filter((child) => child.running).length,
  };
}

export default {
  id: "memsift",
  name: "Memory (memsift)",
  description: "memory_search and memory_get answered by memsift",
  kind: "memory",
  register(api) {
    retireEarlierChildren();
    const deps = createDeps(api);
    api.registerMemoryCapability?.({
      deterministicRecallToolName: "memory_search",
      promptBuilder: (params) => memoryPromptSection(params),
      runtime: memoryRuntime(deps),
    });
    api.registerTool((ctx) => memorySearchTool(ctx, deps), { names: ["memory_search"] });
    api.registerTool((ctx) => memoryGetTool(ctx, deps), { names: ["memory_get"] });
    api.registerCli((ctx) => registerMemsiftCli(ctx, deps), {
      descriptors: [{ name: "memsift", description: "Search, read, inspect and index memory with memsift", hasSubcommands: true }],
    });
    api.registerService?.({
      id: "memsift",
      start: () => {},
      stop: () => deps.stopAll(),
    });
    // A Gateway that exits without stopping its services: memsift's children go with it (they
    // also end on their own when their stdin closes). One listener per process.
    const state = shared();
    if (!state.exitHooked) {
      state.exitHooked = true;
      process.once("exit", () => void stopEveryChild());
    }
  },
};

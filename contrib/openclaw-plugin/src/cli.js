// `openclaw memsift search|get|status|index`: memsift's own commands on the agent's workspace, with
// the settings the Gateway's memsift uses (the same OpenClaw config, memsift config and backend).
// `openclaw memory …` stays memory-core's: it searches memory-core's own index even when the slot
// is switched (a limit of OpenClaw 2026.9), so this namespace is the way to ask memsift.

import { spawn } from "node:child_process";

import { MISSING_ACTION } from "./memsift-process.js";
import { memsiftPrefix } from "./settings.js";
import { versionProblem } from "./version.js";

/** `memsift --version` of the command the settings name: "0.2.0", or an Error naming what to do. */
export function memsiftVersion(settings, { env = process.env, timeoutMs = 60_000 } = {}) {
  const argv = [...settings.command, "--version"];
  return new Promise((resolve, reject) => {
    let output = "";
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"], env });
    child.stdout.on("data", (chunk) => { output += chunk; });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error.code === "ENOENT" ? new Error(`memsift was not found (command: ${argv[0]}). ${MISSING_ACTION}`) : error);
    });
    child.on("exit", () => {
      clearTimeout(timer);
      resolve(/version\s+(\S+)/.exec(output)?.[1]); // "memsift, version 0.2.0"
    });
  });
}

/** Rejects, saying what to do, when the memsift the settings name is not of this plugin's release line. */
export async function checkMemsiftVersion(settings, pluginVersion, options) {
  const found = await memsiftVersion(settings, options);
  const problem = versionProblem(pluginVersion, found, settings.command.join(" "));
  if (problem) throw new Error(`${problem[0]}. ${problem[1]}`);
  return found;
}

/** Run `memsift … <args>` for `target`; resolves to its exit code (stdio: "inherit" or "pipe"). */
export function runMemsift(settings, target, args, { stdio = "pipe", timeoutMs, env = process.env } = {}) {
  const argv = [...memsiftPrefix(settings, target), ...args];
  return new Promise((resolve, reject) => {
    let output = "";
    const child = spawn(argv[0], argv.slice(1), { stdio: stdio === "inherit" ? "inherit" : ["ignore", "pipe", "pipe"], env });
    child.stdout?.on("data", (chunk) => { output = (output + chunk).slice(-4000); });
    child.stderr?.on("data", (chunk) => { output = (output + chunk).slice(-4000); });
    const timer = timeoutMs ? setTimeout(() => child.kill("SIGTERM"), timeoutMs) : undefined;
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error.code === "ENOENT"
        ? new Error(`memsift was not found (command: ${argv[0]}). ${MISSING_ACTION}`)
        : error);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (stdio === "inherit" || code === 0) resolve(code ?? 1);
      else reject(new Error(`memsift ${args[0]} ${signal ? `was stopped by ${signal}` : `exited with status ${code}`}: ${output.trim().slice(-800)}`));
    });
  });
}

/** The `memsift` command group under `openclaw`. */
export function registerMemsiftCli({ program, config }, deps) {
  const group = program
    .command("memsift")
    .description("Search, read, inspect and index agent memory with memsift (the memory slot's plugin)")
    .option("--agent <id>", "the agent whose memory to use (default: the default agent)");

  const run = async (command, args) => {
    const opts = command.optsWithGlobals?.() ?? group.opts();
    let code;
    try {
      const target = deps.targetFor({ cfg: config, agentId: opts.agent });
      await checkMemsiftVersion(deps.settings, deps.version);
      code = await runMemsift(deps.settings, target, args, { stdio: "inherit" });
    } catch (error) {
      console.error(`openclaw memsift: ${error.message}`);
      code = 1;
    }
    process.exitCode = code;
  };

  // Each option goes to memsift under its own flag (a flag without a value: `true`).
  const forwarded = (opts, flags) => Object.entries(flags).flatMap(([key, flag]) =>
    opts[key] === undefined || opts[key] === false ? [] : opts[key] === true ? [flag] : [flag, String(opts[key])]);

  group.command("search")
    .description("Search memory as the agent's memory_search does")
    .argument("<query>", "what to recall")
    .option("-n, --max-results <n>", "most hits to show")
    .option("--session-key <key>", "judge as this chat (scope rules, citations)")
    .option("--explain", "show how each score was made")
    .option("--json", "one JSON document")
    .action(async (query, opts, command) => {
      await run(command, ["search", query,
        ...forwarded(opts, { maxResults: "-n", sessionKey: "--session-key", explain: "--explain", json: "--json" })]);
    });

  group.command("get")
    .description("Read a memory file, or lines of it (a hit's citation works)")
    .argument("<path>", "e.g. MEMORY.md, memory/2026-11-05.md#L6-L7")
    .option("--from <line>", "first line, 1-based")
    .option("--lines <n>", "how many lines")
    .option("--session-key <key>", "judge as this chat (scope rules)")
    .option("--json", "one JSON document")
    .action(async (path, opts, command) => {
      await run(command, ["get", path,
        ...forwarded(opts, { from: "--from", lines: "--lines", sessionKey: "--session-key", json: "--json" })]);
    });

  group.command("status")
    .description("memsift's index, backend, provider and what is degraded")
    .option("--deep", "also probe the embedding provider and check the index")
    .option("--json", "one JSON document")
    .action(async (opts, command) => {
      await run(command, ["status", ...forwarded(opts, { deep: "--deep", json: "--json" })]);
    });

  group.command("index")
    .description("Bring the index up to date with the memory files (it is kept fresh while the Gateway runs)")
    .option("--force", "rebuild it from the files")
    .action(async (opts, command) => {
      await run(command, ["index", ...forwarded(opts, { force: "--force" })]);
    });
}

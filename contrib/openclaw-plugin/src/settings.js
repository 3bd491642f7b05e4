// The plugin's settings (plugins.entries.memsift.config) and the memsift command line they make.
//
// One memsift process answers one agent: its workspace, its agent id (so memsift applies the
// agent's own `agents.entries.<id>.memory.search` keys), memsift's own config file if one is
// named, and OpenClaw's config file, whose `memory.search.*` keys memsift reads as OpenClaw does.

import { existsSync } from "node:fs";
import path from "node:path";

export const DEFAULTS = Object.freeze({
  command: ["memsift"],
  callTimeoutMs: 30_000,
  startupTimeoutMs: 120_000,
});

/** Normalised plugin settings; throws an Error naming the key for a value OpenClaw's schema let through. */
export function pluginSettings(raw) {
  const config = raw && typeof raw === "object" ? raw : {};
  const command = config.command === undefined ? DEFAULTS.command : [config.command].flat();
  if (!command.length || command.some((part) => typeof part !== "string" || !part.trim())) {
    throw new Error("plugins.entries.memsift.config.command: a command name or path, or a list of strings");
  }
  const optionalText = (key) => {
    const value = config[key];
    if (value === undefined) return undefined;
    if (typeof value !== "string" || !value.trim()) throw new Error(`plugins.entries.memsift.config.${key}: a non-empty string`);
    return value;
  };
  const budget = (key) => {
    const value = config[key] ?? DEFAULTS[key];
    if (!Number.isInteger(value) || value < 1000) throw new Error(`plugins.entries.memsift.config.${key}: milliseconds, at least 1000`);
    return value;
  };
  const openclawConfig = config.openclawConfig === false ? false : optionalText("openclawConfig");
  return Object.freeze({
    command,
    workspace: optionalText("workspace"),
    configPath: optionalText("configPath"),
    openclawConfig,
    backend: optionalText("backend"),
    callTimeoutMs: budget("callTimeoutMs"),
    startupTimeoutMs: budget("startupTimeoutMs"),
  });
}

/** The Gateway's own config file, when it can be found and the settings do not name another. */
export function openclawConfigPath(settings, resolveStateDir, env = process.env) {
  if (settings.openclawConfig === false) return undefined;
  if (settings.openclawConfig) return settings.openclawConfig;
  if (env.OPENCLAW_CONFIG_PATH) return env.OPENCLAW_CONFIG_PATH;
  let stateDir;
  try {
    stateDir = resolveStateDir?.();
  } catch {
    stateDir = undefined;
  }
  const candidate = path.join(stateDir || path.join(env.HOME || "", ".openclaw"), "openclaw.json");
  return existsSync(candidate) ? candidate : undefined;
}

/** `memsift [group options]` for one agent, before the subcommand. */
export function memsiftPrefix(settings, target) {
  const argv = [...settings.command, "-w", target.workspace];
  if (target.agentId) argv.push("-a", target.agentId);
  if (settings.configPath) argv.push("-c", settings.configPath);
  if (target.openclawConfig) argv.push("--openclaw-config", target.openclawConfig);
  if (settings.backend) argv.push("-b", settings.backend);
  return argv;
}

// One long-lived `memsift … mcp` child, spoken to over MCP (JSON-RPC, one message a line, stdio).
//
// Why a child and not a process per call: memsift keeps its index open and its model loaded, and
// keeps the index fresh while it runs, so a warm memory_search costs tens of milliseconds instead
// of a Python start, imports and a model load. The child answers `initialize` before it loads
// anything heavy; it may take a while on its first call (it builds the index on first use), which
// the startup budget covers. Every call has a budget; a child that dies is restarted on a later
// call, no sooner than a backoff allows; `stop()` ends it and its process group.

import { spawn } from "node:child_process";

import { versionProblem } from "./version.js";

export const PROTOCOL_VERSION = "2025-06-18";
const MAX_LINE_BYTES = 16 * 1024 * 1024;
const STDERR_TAIL_CHARS = 4000;
const STOP_GRACE_MS = 2000;
const BACKOFF_MS = [1000, 2000, 5000, 10_000, 30_000];
const TIMEOUTS_BEFORE_RESTART = 3;
export const MISSING_ACTION = "Install memsift where the Gateway runs (its wheel, or from git: see memsift's install guide) and put its " +
  "bin folder on the Gateway's PATH, or set plugins.entries.memsift.config.command to its path";

/** A failure the agent and the operator are told about (kind: missing, version, exited, timeout, refused, aborted). */
export class MemsiftCallError extends Error {
  constructor(message, { kind, action, cause } = {}) {
    super(message, cause ? { cause } : undefined);
    this.name = "MemsiftCallError";
    this.kind = kind ?? "failed";
    this.action = action;
  }
}

function lastLines(text) {
  return text.trim().split("\n").slice(-6).join("\n").slice(-1200);
}

class Connection {
  constructor({ argv, env, cwd, logger, clientVersion, onFailure }) {
    this.argv = argv;
    this.clientVersion = clientVersion;
    this.logger = logger;
    this.onFailure = onFailure;
    this.pending = new Map();
    this.nextId = 1;
    this.stderr = "";
    this.buffer = "";
    this.closed = false;
    this.exited = new Promise((resolve) => {
      this.resolveExited = resolve;
    });
    this.child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.child.on("error", (error) => {
      this.resolveExited();
      this.fail(this.spawnError(error));
    });
    this.child.on("exit", (code, signal) => {
      this.resolveExited();
      const why = signal ? `was stopped by ${signal}` : `exited with status ${code}`;
      const said = lastLines(this.stderr);
      this.fail(new MemsiftCallError(`memsift ${why}${said ? `: ${said}` : ""}`, {
        kind: "exited",
        action: "Check the memsift command, the workspace and memsift's config (openclaw memsift status)",
      }));
    });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk) => this.onData(chunk));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL_CHARS);
    });
    this.child.stdin.on("error", () => {}); // a child that died: its exit says why
    this.hello = this.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "openclaw-memsift", version: clientVersion ?? "0" },
    }).then((result) => {
      this.checkVersion(result?.serverInfo?.version);
      this.notify("notifications/initialized");
      return result;
    });
    this.hello.catch(() => {}); // told to the caller of the first call
  }

  /** A memsift of another release line is stopped before any call reaches it (version.js). */
  checkVersion(found) {
    if (!this.clientVersion) return;
    const problem = versionProblem(this.clientVersion, found, this.argv.join(" "));
    if (!problem) return;
    const error = new MemsiftCallError(problem[0], { kind: "version", action: problem[1] });
    this.fail(error);
    this.kill("SIGTERM");
    throw error;
  }

  spawnError(error) {
    if (error.code === "ENOENT") {
      return new MemsiftCallError(`memsift was not found (command: ${this.argv[0]})`, {
        kind: "missing",
        action: MISSING_ACTION,
        cause: error,
      });
    }
    return new MemsiftCallError(`memsift could not be started (${this.argv[0]}): ${error.message}`, { kind: "missing", cause: error });
  }

  onData(chunk) {
    this.buffer += chunk;
    if (this.buffer.length > MAX_LINE_BYTES && !this.buffer.includes("\n")) {
      this.fail(new MemsiftCallError("memsift sent an answer over 16 MB", { kind: "refused" }));
      this.kill("SIGKILL");
      return;
    }
    let newline;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, newline).trim();
      this.buffer = this.buffer.slice(newline + 1);
      if (!line) continue;
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        this.logger?.warn?.(`memsift: a line that is not JSON on its MCP output was ignored: ${line.slice(0, 120)}`);
        continue;
      }
      const waiting = this.pending.get(message.id);
      if (!waiting) continue; // an answer after its budget ran out
      this.pending.delete(message.id);
      if (message.error) waiting.reject(new MemsiftCallError(`memsift refused the request: ${message.error.message}`, { kind: "refused" }));
      else waiting.resolve(message.result);
    }
  }

  send(message) {
    if (this.closed || !this.child.stdin.writable) return false;
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
    return true;
  }

  notify(method, params) {
    this.send({ jsonrpc: "2.0", method, ...(params ? { params } : {}) });
  }

  request(method, params) {
    if (this.closed) return Promise.reject(this.failure ?? new MemsiftCallError("memsift is stopped", { kind: "exited" }));
    const id = this.nextId++;
    const answer = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.send({ jsonrpc: "2.0", id, method, params });
    return answer;
  }

  fail(error) {
    if (!this.failure) {
      this.failure = error;
      if (!this.stopping) this.onFailure?.(error);
    }
    this.closed = true;
    for (const waiting of this.pending.values()) waiting.reject(this.failure);
    this.pending.clear();
  }

  kill(signal) {
    try {
      process.kill(-this.child.pid, signal); // its process group: memsift and anything it started
    } catch {
      try {
        this.child.kill(signal);
      } catch {
        // already gone
      }
    }
  }

  async stop() {
    this.stopping = true;
    this.fail(new MemsiftCallError("memsift was stopped", { kind: "exited" }));
    if (this.child.exitCode !== null || this.child.signalCode !== null || !this.child.pid) return;
    this.child.stdin.end();
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
  }
}

/** A memsift MCP child for one agent, started on first use and restarted after a failure. */
export class MemsiftProcess {
  constructor({ argv, env = process.env, cwd, logger, startupTimeoutMs, callTimeoutMs, clientVersion }) {
    Object.assign(this, { argv, env, cwd, logger, startupTimeoutMs, callTimeoutMs, clientVersion });
    this.connection = undefined;
    this.warm = false; // a call has been answered since the child started
    this.failures = 0;
    this.lastFailure = undefined;
    this.retryAt = 0;
    this.timeouts = 0;
  }

  get running() {
    return Boolean(this.connection && !this.connection.closed);
  }

  connect() {
    if (this.running) return this.connection;
    if (this.lastFailure && Date.now() < this.retryAt) throw this.lastFailure;
    this.connection = new Connection({
      argv: this.argv, env: this.env, cwd: this.cwd, logger: this.logger, clientVersion: this.clientVersion,
      onFailure: (error) => this.noteFailure(error),
    });
    this.warm = false;
    this.timeouts = 0;
    return this.connection;
  }

  noteFailure(error) {
    this.lastFailure = error;
    this.failures += 1;
    this.retryAt = Date.now() + BACKOFF_MS[Math.min(this.failures - 1, BACKOFF_MS.length - 1)];
    this.logger?.warn?.(`memsift: ${error.message}`);
  }

  /** Call an MCP tool; returns its structured content. Throws MemsiftCallError. */
  async call(tool, args, { signal, timeoutMs } = {}) {
    if (signal?.aborted) throw new MemsiftCallError("the call was cancelled", { kind: "aborted" });
    const connection = this.connect();
    connection.inflight = (connection.inflight ?? 0) + 1;
    const budget = timeoutMs ?? (this.warm ? this.callTimeoutMs : Math.max(this.startupTimeoutMs, this.callTimeoutMs));
    const work = connection.hello.then(() => connection.request("tools/call", { name: tool, arguments: args }));
    let timer;
    let onAbort;
    const limits = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new MemsiftCallError(`memsift did not answer ${tool} within ${budget} ms`, {
        kind: "timeout",
        action: "Retry shortly; if it keeps happening, raise plugins.entries.memsift.config.callTimeoutMs or check openclaw memsift status",
      })), budget);
      onAbort = () => reject(new MemsiftCallError("the call was cancelled", { kind: "aborted" }));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const result = await Promise.race([work, limits]);
      this.warm = true;
      this.timeouts = 0;
      this.failures = 0;
      this.lastFailure = undefined;
      if (result?.isError) {
        const text = (result.content ?? []).map((c) => c.text ?? "").join(" ").trim();
        throw new MemsiftCallError(text || `memsift refused ${tool}`, { kind: "refused" });
      }
      return result?.structuredContent ?? {};
    } catch (error) {
      if (error.kind === "timeout" && ++this.timeouts >= TIMEOUTS_BEFORE_RESTART) {
        this.logger?.warn?.(`memsift: ${this.timeouts} calls in a row ran out of time; restarting it`);
        void connection.stop();
      }
      throw error instanceof MemsiftCallError ? error : new MemsiftCallError(String(error?.message ?? error), { cause: error });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      work.catch(() => {});
      connection.inflight -= 1;
      if (connection.retired && connection.inflight === 0) void connection.stop();
    }
  }

  /** The next call starts a new memsift (settings may have changed: a Gateway restarted in-process);
   * the running one ends once the calls it is answering are answered. */
  async retire() {
    const connection = this.connection;
    this.connection = undefined;
    if (!connection) return;
    connection.retired = true;
    if (!connection.inflight) await connection.stop();
  }

  async stop() {
    const connection = this.connection;
    this.connection = undefined;
    if (connection) await connection.stop();
  }
}

// memory_search and memory_get with OpenClaw's names, arguments and result shapes, answered by the
// agent's memsift process. The chat's session key travels with every call: memsift's scope rules
// decide whether this chat may use memory at all.

import { readResult, searchResult, unavailable } from "./answers.js";
import { MemsiftCallError } from "./memsift-process.js";

const SEARCH_SCHEMA = {
  type: "object",
  properties: {
    query: { type: "string", description: "What to recall: a question, a name, a date or a few keywords." },
    maxResults: { type: "integer", minimum: 1, maximum: 100, description: "Most hits to return (default memory.search.query.maxResults)." },
    minScore: { type: "number", minimum: 0, maximum: 1, description: "Lowest score to keep (default memory.search.query.minScore)." },
    corpus: { type: "string", enum: ["memory", "sessions", "all", "wiki"], description: "memory (default): memory files; sessions: indexed transcripts; all: both." },
  },
  required: ["query"],
  additionalProperties: false,
};

const GET_SCHEMA = {
  type: "object",
  properties: {
    path: { type: "string", description: "A memory file (or session transcript) as memory_search names it; a hit's citation (memory/2026-03-02.md#L5-L8) works too." },
    from: { type: "integer", minimum: 1, description: "First line, 1-based." },
    lines: { type: "integer", minimum: 1, description: "How many lines." },
    corpus: { type: "string", enum: ["memory", "sessions", "all", "wiki"] },
  },
  required: ["path"],
  additionalProperties: false,
};

const SEARCH_DESCRIPTION =
  "Mandatory recall step: search long-term memory (MEMORY.md and memory/*.md) before answering questions about " +
  "prior work, decisions, dates, people, preferences, or todos. Returns the best snippets with path, line range, " +
  "score and citation; questions that name a time (\"last week\", \"on March 3\") get that time's notes first. " +
  "If the response has disabled=true, tell the user memory was unavailable and include the warning/action guidance.";
const GET_DESCRIPTION =
  "Safe exact excerpt read from MEMORY.md and memory/*.md: a file memory_search named, or only a line range (from, " +
  "lines); a session transcript it cited (sessions/<name>.jsonl) reads as its messages. status=ok means the excerpt was read (truncated=true and nextFrom when there is more); status=not_found " +
  "means the file does not exist; status=error means the read failed or memory is not available in this chat.";

function inputError(message) {
  const error = new Error(message);
  error.name = "ToolInputError"; // OpenClaw answers it as the caller's mistake (400), not a tool failure
  error.status = 400;
  return error;
}

function jsonResult(payload) {
  return { content: [{ type: "text", text: JSON.stringify(payload, null, 2) }], details: payload };
}

function argsOf(params) {
  if (params === undefined || params === null) return {};
  if (typeof params !== "object" || Array.isArray(params)) throw inputError("the arguments must be an object");
  return params;
}

function positiveInteger(args, key) {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || value < 1) throw inputError(`${key} must be a positive integer`);
  return value;
}

function sessionKeyOf(ctx) {
  return typeof ctx?.sessionKey === "string" && ctx.sessionKey.trim() ? ctx.sessionKey : undefined;
}

/** memsift's arguments: the ones given (memsift's defaults apply to the rest). */
export function given(args) {
  return Object.fromEntries(Object.entries(args).filter(([, value]) => value !== undefined));
}

function failure(error, signal) {
  if (signal?.aborted) throw signal.reason ?? new Error("aborted");
  if (!(error instanceof MemsiftCallError)) throw error;
  return unavailable(error.message, { action: error.action, timedOut: error.kind === "timeout" });
}

/** The memory_search tool for one tool context (an agent's turn, or a /tools/invoke call). */
/** The memory_search tool for one tool context: memsift is asked for the corpus the agent wants (memory,
 * sessions or all), so it ranks and cuts to maxResults within that corpus. */
export function memorySearchTool(ctx, deps) {
  return {
    label: "Memory Search",
    name: "memory_search",
    description: SEARCH_DESCRIPTION,
    parameters: SEARCH_SCHEMA,
    async execute(_toolCallId, params, signal) {
      const started = Date.now();
      const args = argsOf(params);
      if (typeof args.query !== "string") throw inputError("query is required (text)");
      const maxResults = positiveInteger(args, "maxResults");
      const minScore = args.minScore;
      if (minScore !== undefined && (typeof minScore !== "number" || minScore < 0 || minScore > 1)) {
        throw inputError("minScore must be a number from 0 to 1");
      }
      const corpus = args.corpus ?? "memory";
      if (corpus === "wiki") {
        return jsonResult(unavailable("memsift has no compiled-wiki corpus", {
          warning: "The wiki corpus is not available with the memsift memory plugin.",
          action: "Search with corpus=memory.",
        }));
      }
      try {
        const child = deps.processFor(ctx);
        const answer = await child.call("memory_search",
          given({ query: args.query, maxResults, minScore, corpus, sessionKey: sessionKeyOf(ctx) }), { signal });
        return jsonResult(searchResult(answer, { corpus, toolMs: Date.now() - started }));
      } catch (error) {
        return jsonResult(failure(error, signal));
      }
    },
  };
}

/** The memory_get tool for one tool context. */
export function memoryGetTool(ctx, deps) {
  return {
    label: "Memory Get",
    name: "memory_get",
    description: GET_DESCRIPTION,
    parameters: GET_SCHEMA,
    async execute(_toolCallId, params, signal) {
      const args = argsOf(params);
      if (typeof args.path !== "string" || !args.path.trim()) throw inputError("path is required (text)");
      const from = positiveInteger(args, "from");
      const lines = positiveInteger(args, "lines");
      if (args.corpus === "wiki") {
        return jsonResult({ status: "error", path: args.path, text: "", code: "MEMORY_CORPUS_UNAVAILABLE", error: "memsift has no compiled-wiki corpus" });
      }
      try {
        const child = deps.processFor(ctx);
        const got = await child.call("memory_get",
          given({ path: args.path, from, lines, sessionKey: sessionKeyOf(ctx) }), { signal });
        return jsonResult(readResult(got, args.path));
      } catch (error) {
        const down = failure(error, signal);
        return jsonResult({ status: "error", path: args.path, text: "", code: "MEMORY_READ_FAILED", error: down.error, action: down.action });
      }
    },
  };
}


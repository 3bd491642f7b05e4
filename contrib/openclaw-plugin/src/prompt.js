// The system prompt's memory section: when to call memory_search and memory_get (as memory-core
// words it, so agents tuned on OpenClaw's own prompt behave the same), plus what memsift adds.

export function memoryPromptSection({ availableTools, citationsMode }) {
  const search = availableTools?.has?.("memory_search");
  const get = availableTools?.has?.("memory_get");
  if (!search && !get) return [];
  const guidance = search
    ? "Before answering anything about prior work, decisions, dates, people, preferences, or todos: run memory_search" +
      (get ? "; then use memory_get to pull only the lines you need" : "") +
      ". Keep the time the user names in the query (\"last week\", \"on March 3\"): that time's notes come first. " +
      "If low confidence after search, say you checked."
    : "Before answering anything about prior work, decisions, dates, people, preferences, or todos that point to a " +
      "specific memory file: run memory_get to pull only the needed lines. If low confidence after reading, say you checked.";
  const citations = citationsMode === "off"
    ? "Citations are disabled: do not mention file paths or line numbers in replies unless the user explicitly asks."
    : "Citations: include Source: <path#line> when it helps the user verify memory snippets.";
  return [
    "## Memory Recall",
    guidance,
    "Report unavailable or partial recall to the user (disabled=true comes with a warning and an action).",
    citations,
    "",
  ];
}

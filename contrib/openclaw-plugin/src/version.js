// Which memsift this plugin works with: the one it was released with. The plugin's version is
// memsift's (one release makes both); a memsift of another release line may answer with other
// shapes or lack a tool, so the plugin refuses it at start, saying which one it found and what to
// do, instead of failing later in ways that name neither.
//
// A release line is major.minor before 1.0 (0.2.x) and the major after (1.x); pre-release and
// local parts (0.2.0rc1, 0.2.0+g1234) belong to their line.

/** [major, minor] of a version string, or undefined when it is not one. */
export function releaseLine(version) {
  const match = /^v?(\d+)\.(\d+)/.exec(String(version ?? "").trim());
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}

/** The line's name as an operator reads it: "0.2" or "1". */
export function lineName(version) {
  const line = releaseLine(version);
  if (!line) return String(version);
  return line[0] === 0 ? `${line[0]}.${line[1]}` : `${line[0]}`;
}

/** Whether memsift `found` belongs to the release line of plugin version `plugin`. */
export function worksWith(plugin, found) {
  const mine = releaseLine(plugin);
  const theirs = releaseLine(found);
  if (!mine || !theirs) return false;
  return mine[0] === theirs[0] && (mine[0] !== 0 || mine[1] === theirs[1]);
}

/** Why memsift `found` cannot serve plugin version `plugin` (undefined when it can): [message, action]. */
export function versionProblem(plugin, found, command) {
  if (worksWith(plugin, found)) return undefined;
  const what = found ? `memsift ${found}` : "a memsift that did not say its version";
  return [
    `${what} was found (command: ${command}); this plugin (${plugin}) works with memsift ${lineName(plugin)}.x only`,
    `Install the memsift that matches the plugin (${lineName(plugin)}.x) where the Gateway runs, or install the plugin that came with ` +
      "your memsift (memsift openclaw install), then restart the Gateway",
  ];
}

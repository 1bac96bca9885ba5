// What a test file's tapes tell GitHub Actions, as `mcp-tape test` does for
// one run: a Markdown section for the job's summary (the file
// GITHUB_STEP_SUMMARY names) with each test's misses, drift (requests a
// match rule answered though they differed from the recording, recordings
// older than --max-age) and injected faults. Each miss fails its test, and
// vitest's own github-actions reporter (on under GITHUB_ACTIONS=true) makes
// that failure an annotation naming the test.
import { appendFileSync } from "node:fs";

/** What `mcp-tape test` reads to tell GitHub of a run; a tape's process is started without them. */
export const GITHUB_VARIABLES = ["GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"];

const caseOf = (c) => `${c.server} ${c.method}${c.subject ? ` ${c.subject}` : ""}`;
/** `POINTER (recorded A, requested B), ...`, as mcp-tape tells them. */
const told = (differences) =>
  differences
    .map((d) => {
      const side = (name) => (d[name] == null ? "absent" : JSON.stringify(d[name]));
      return `${d.pointer ?? ""} (recorded ${side("recorded")}, requested ${side("requested")})`;
    })
    .join(", ");

/** A case's first miss as its message says it (where the nearest recording differed included). */
const firstMiss = (c) => c.firstMiss?.message ?? "";

/** A run's rows from its report's cases: [kind, case, requests, what], misses first. */
export function rows(cases) {
  const found = cases.filter((c) => c.misses > 0).map((c) => ["miss", caseOf(c), c.misses, firstMiss(c)]);
  for (const c of cases) {
    for (const ruled of c.rules ?? []) {
      const differed = (ruled.nearestDifferences ?? []).filter((d) => d.length > 0).map(told).join("; ");
      if (differed) found.push(["drift", caseOf(c), ruled.answered, `rule ${ruled.rule} answered; the request differed at ${differed}`]);
    }
    if (c.stale > 0) found.push(["drift", caseOf(c), c.stale, "answered by recordings older than --max-age"]);
  }
  for (const c of cases) {
    for (const fault of c.faults ?? []) found.push(["fault", caseOf(c), fault.injected, `fault ${fault.fault}`]);
  }
  return found;
}

const ENTITIES = { "<": "&lt;", ">": "&gt;", "&": "&amp;" };

/** `text` for a Markdown table cell: one line, its pipes escaped, no markup of its own. */
export function cell(text) {
  return String(text).replace(/[|`*_[\]\\#<>&\r\n\t\p{Cc}\u202a-\u202e\u2066-\u2069]/gu, (c) => {
    if (c in ENTITIES) return ENTITIES[c];
    if ("\r\n\t".includes(c)) return " ";
    if ("|`*_[]\\#".includes(c)) return `\\${c}`;
    return `\\u{${c.codePointAt(0).toString(16)}}`;
  });
}

/** A file's section: `tests` is [[test name, rows]], one a test that had a tape. */
export function summary(file, tests) {
  const missed = tests.filter(([, found]) => found.some(([kind]) => kind === "miss")).length;
  const table = tests.flatMap(([test, found]) =>
    found.map(([kind, c, requests, what]) => `| ${cell(test)} | ${kind} | ${cell(c)} | ${requests} | ${cell(what)} |`),
  );
  return (
    `### mcp-tape: ${cell(file)}: ${tests.length} tests with a tape, ${missed} with misses\n\n` +
    "| test | | case | requests | what |\n|---|---|---|---:|---|\n" +
    `${table.join("\n")}\n\n`
  );
}

/** Appends a file's section to the step summary when GitHub asks for one and there is something to tell. */
export function tellFile(file, tests) {
  const path = process.env.GITHUB_STEP_SUMMARY;
  if (!path || tests.every(([, found]) => found.length === 0)) return;
  appendFileSync(path, summary(file, tests));
}

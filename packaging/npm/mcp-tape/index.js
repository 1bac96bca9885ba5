// mcp-tape for Node: where the binary is, and a tape for the length of one
// test. A tape wraps `mcp-tape test`, whose command is a tiny shell that
// prints the tape's URL and waits for the test's verdict on its standard
// input, so modes, match rules, reports and "a failing test never changes
// its cassette" are exactly those of `mcp-tape test`.
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";

export const MODES = ["replay", "missing", "all", "once"];

const WAIT_FOR_VERDICT = 'printf "%s\\n" "$MCP_TAPE_URL"; read verdict; exit "${verdict:-1}"';

/** The mcp-tape executable: $MCP_TAPE_BIN, else the one in this platform's package. */
export function binary() {
  if (process.env.MCP_TAPE_BIN) return process.env.MCP_TAPE_BIN;
  const name = `@mcp-tape/${process.platform}-${process.arch}`;
  try {
    return createRequire(import.meta.url).resolve(`${name}/bin/mcp-tape`);
  } catch {
    throw new Error(
      `no mcp-tape binary for ${process.platform}-${process.arch}: ${name} is not installed ` +
        "(it is an optional dependency of mcp-tape; reinstall without --no-optional, or set MCP_TAPE_BIN)",
    );
  }
}

/** A file-name-safe form of a test's name. */
export function fileName(text) {
  return text.replace(/[^\w.[\]=,+-]/g, "_");
}

/**
 * Starts a tape on a free loopback port, answering from (or recording into)
 * `cassette`; resolves once it serves, with its `url` and `stop(passed)`.
 */
export async function startTape({ cassette, mode, upstream, rules, html, bin } = {}) {
  if (!cassette) throw new Error("startTape: name the cassette file");
  const chosen = process.env.MCP_TAPE_MODE?.trim() || mode || "replay";
  if (!MODES.includes(chosen)) throw new Error(`mcp-tape mode ${chosen}: expected one of ${MODES.join(", ")}`);
  const scratch = mkdtempSync(join(tmpdir(), "mcp-tape-"));
  const report = join(scratch, "report.json");
  const log = join(scratch, "tape.log");
  mkdirSync(dirname(cassette), { recursive: true });
  // Replay of a cassette never recorded: every request misses, and the failure says which is absent.
  const replays = chosen === "replay" || (chosen === "once" && existsSync(cassette));
  const source = existsSync(cassette) || !replays ? cassette : scratch;
  const args = ["test", source, "--mode", chosen, "--report", report];
  if (upstream ?? process.env.MCP_TAPE_UPSTREAM) args.push("--upstream", upstream ?? process.env.MCP_TAPE_UPSTREAM);
  if (rules) args.push("--rules", rules);
  if (html) {
    mkdirSync(dirname(html), { recursive: true });
    args.push("--html", html);
  }
  args.push("--", "sh", "-c", WAIT_FOR_VERDICT);
  const logFd = openSync(log, "w");
  const child = spawn(bin ?? binary(), args, { stdio: ["pipe", "pipe", logFd] });
  closeSync(logFd);
  const exited = new Promise((resolve) => child.on("close", (code) => resolve(code)));
  const readLog = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
  const url = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => resolve(line.trim()));
    child.on("error", reject);
    exited.then((code) => reject(new Error(`mcp-tape exited (${code}) before it served:\n${readLog()}`)));
  });
  let stopped;
  return {
    url,
    cassette,
    /** Ends the run with the test's verdict; a failing test's recording is thrown away. */
    stop(passed) {
      stopped ??= (async () => {
        child.stdin.on("error", () => {});
        child.stdin.end(passed ? "0\n" : "1\n");
        const code = await exited;
        try {
          let parsed;
          try {
            parsed = JSON.parse(readFileSync(report, "utf8"));
          } catch (error) {
            throw new Error(`mcp-tape exited (${code}) with no report (${error.message}):\n${readLog()}`);
          }
          const misses = (parsed.cases ?? []).filter((c) => c.misses > 0);
          return { code, misses, text: describeMisses(misses, cassette, html) };
        } finally {
          rmSync(scratch, { recursive: true, force: true });
        }
      })();
      return stopped;
    },
  };
}

/** The misses as a person reads them: each case, its first miss and where the nearest recording differed. */
export function describeMisses(misses, cassette, html) {
  const total = misses.reduce((sum, c) => sum + c.misses, 0);
  const lines = [`mcp-tape: ${total} request(s) missed the recordings of ${cassette}`];
  if (!existsSync(cassette)) {
    lines.push("  (no cassette there yet: record it with MCP_TAPE_MODE=once and MCP_TAPE_UPSTREAM=URL)");
  }
  for (const c of misses) {
    lines.push(`  ${c.method}${c.subject ? ` ${c.subject}` : ""} on ${c.server} ×${c.misses}`);
    const first = c.firstMiss ?? {};
    if (first.message) lines.push(`    ${first.message}`);
    for (const d of first.data?.nearest?.[0]?.differences ?? []) {
      lines.push(`    at ${d.pointer}: recorded ${JSON.stringify(d.recorded ?? null)}, sent ${JSON.stringify(d.requested ?? null)}`);
    }
  }
  if (html) lines.push(`  HTML report: ${html}`);
  return lines.join("\n");
}

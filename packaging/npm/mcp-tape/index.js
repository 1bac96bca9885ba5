// mcp-tape for Node: where the binary is, and a tape for the length of one
// test. Tapes are served by `mcp-tape test --tapes-on-stdin`, which takes
// each tape's arguments and then its test's verdict on its standard input,
// so modes, match rules, reports and "a failing test never changes its
// cassette" are exactly those of `mcp-tape test`.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { createInterface } from "node:readline";
import { GITHUB_VARIABLES } from "./github.js";

const PACKAGE = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8"));
const VERSION = PACKAGE.version;

// mcp-tape's modes, then vcrpy's names for two of them (none: replay, new_episodes: missing).
export const MODES = ["replay", "missing", "all", "once", "none", "new_episodes"];

/** The mcp-tape executable: $MCP_TAPE_BIN, else the one in this platform's package. */
export function binary() {
  if (process.env.MCP_TAPE_BIN) return process.env.MCP_TAPE_BIN;
  const name = platformPackage();
  const file = process.platform === "win32" ? "mcp-tape.exe" : "mcp-tape";
  try {
    return createRequire(import.meta.url).resolve(`${name}/bin/${file}`);
  } catch {
    throw new Error(missingPlatformPackage(name));
  }
}

/**
 * The package that holds the binary for a machine (this one by default):
 * `@mcp-tape/<platform>-<arch>`, with `-musl` on a Linux whose C library is
 * not glibc (Alpine). `glibc` is the machine's glibc version, null for none.
 */
export function platformPackage({ platform = process.platform, arch = process.arch, glibc = glibcVersion() } = {}) {
  return `@mcp-tape/${platform}-${arch}${platform === "linux" && !glibc ? "-musl" : ""}`;
}

/** The version of glibc this process runs with; undefined on a musl Linux and off Linux. */
function glibcVersion() {
  if (process.platform !== "linux") return undefined;
  if (process.report && "excludeNetwork" in process.report) process.report.excludeNetwork = true;
  return process.report?.getReport().header.glibcVersionRuntime;
}

/** What to do when this platform's package is not installed, or there is none. */
export function missingPlatformPackage(name = platformPackage()) {
  const offered = Object.keys(PACKAGE.optionalDependencies ?? {});
  if (!offered.includes(name)) {
    return (
      `no mcp-tape binary for this machine: looked for ${name}, and mcp-tape ${VERSION} has no such package ` +
      `(it has ${offered.join(", ")}). Set MCP_TAPE_BIN to an mcp-tape binary built for it ` +
      "(cargo install --locked --path . in a checkout of mcp-tape)."
    );
  }
  return (
    `no mcp-tape binary for this machine: looked for ${name}, which is not installed. ` +
    `Install it beside mcp-tape (npm install --save-dev ${name}@${VERSION}); npm leaves it out when ` +
    "optional dependencies are omitted (--omit=optional, or a lockfile made on another platform). " +
    `From a checkout's dist/, give npm both tarballs in one command: npm install --save-dev ` +
    `./dist/mcp-tape-${name.slice("@mcp-tape/".length)}-${VERSION}.tgz ./dist/mcp-tape-${VERSION}.tgz. ` +
    "Or set MCP_TAPE_BIN to an mcp-tape binary."
  );
}

/** A fault rule as `--fault` takes it: a spec string as it is, an object (a `[[fault]]` table's keys) inline. */
export function faultSpec(fault) {
  if (typeof fault === "string") return fault;
  if (fault === null || typeof fault !== "object" || Array.isArray(fault)) {
    throw new Error(`fault ${JSON.stringify(fault)}: expected a spec string or an object of a [[fault]] table's keys`);
  }
  const toml = (value) => {
    if (Array.isArray(value)) return `[${value.map(toml).join(", ")}]`;
    if (value !== null && typeof value === "object") return `{${faultSpec(value)}}`;
    if (["string", "number", "boolean"].includes(typeof value)) return JSON.stringify(value);
    throw new Error(`fault: ${String(value)} is not a TOML value`);
  };
  return Object.entries(fault)
    .map(([key, value]) => `${JSON.stringify(key)} = ${toml(value)}`)
    .join(", ");
}

/**
 * The longest file name a test's name becomes as it is, in characters and
 * in UTF-8 bytes; a longer one is cut (on a character) and told apart by its
 * digest. 240 bytes leave room for `.sqlite-journal` in the 255 bytes file
 * systems hold.
 */
const LONGEST_NAME = 160;
const LONGEST_NAME_BYTES = 240;

const digest = (text) => createHash("sha256").update(text).digest("hex");

/**
 * A test's name as one file name of its own: a space as `_` (test names are
 * sentences), every other character a file name may not hold (a path
 * separator, a character Windows refuses, `%` itself) as `%XX` of its UTF-8
 * bytes, so that names differing in anything but a space against an `_`
 * never share one; a name of dots only (`.`, `..`) spelled out too, so it
 * never leaves its directory; a name with capitals ended with `~` and a
 * digest of the whole, so that two names differing only in case never
 * share a file where case does not count (macOS, Windows); a long one cut
 * and ended with a digest of the whole. With `toldByCase` false, the name
 * earlier versions gave. The pytest plugin names its cassettes the same way.
 */
export function fileName(text, toldByCase = true) {
  let name = text.replace(/[^\p{L}\p{N}_.[\]=,+-]/gu, (c) =>
    c === " " ? "_" : [...Buffer.from(c, "utf8")].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join(""),
  );
  if (/^\.*$/.test(name)) name = name.replaceAll(".", "%2E");
  if (toldByCase && text !== text.toLowerCase()) name = `${name}~${digest(text).slice(0, 8)}`;
  const chars = [...name];
  if (chars.length > LONGEST_NAME || Buffer.byteLength(name) > LONGEST_NAME_BYTES) {
    let cut = chars.slice(0, LONGEST_NAME - 17);
    while (Buffer.byteLength(cut.join("")) > LONGEST_NAME_BYTES - 17) cut.pop();
    name = `${cut.join("")}-${digest(text).slice(0, 16)}`;
  }
  return name;
}

/** The most of a tape server's log kept for an error's message (its end). */
const LOG_KEPT = 64 * 1024;

/** The variables a tape server reads (its mode, upstream, log filter, token, models), as they are now. */
function tapeVariables() {
  return JSON.stringify(Object.entries(process.env).filter(([name]) => name.startsWith("MCP_TAPE_")).sort());
}

/** Tape servers with no tape running, ready for the next. */
const idleServers = [];

/**
 * A tape server: one `mcp-tape test --tapes-on-stdin`, serving one tape at
 * a time on its own port, tape after tape, so that a test's tape costs no
 * process, no port and no new connections of its own. Each line written
 * to its stdin is answered by one line on its stdout, in order.
 */
function startServer(bin) {
  // What a tape would tell GitHub would go nowhere; the vitest helper tells it for each file.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !GITHUB_VARIABLES.includes(name)));
  const child = spawn(bin, ["test", "--tapes-on-stdin"], { stdio: ["pipe", "pipe", "pipe"], env });
  const answers = [];
  let log = "";
  let gone;
  const server = {
    bin,
    variables: tapeVariables(),
    /** Resolves with its URL, its first line (`{ gone }` if it ended first). */
    url: undefined,
    /** What it logged since the last line it was told (its end, at most LOG_KEPT). */
    log: () => log,
    /** Writes `line`; resolves with the answer, parsed (`{ gone }` if it ended first). */
    ask(line) {
      log = "";
      return new Promise((resolve) => {
        if (gone) return resolve({ gone });
        answers.push(resolve);
        child.stdin.write(`${line}\n`);
      });
    },
    /** Keeps this process running while it holds a tape (`true`), not while it is idle. */
    hold(held) {
      for (const handle of [child, child.stdin, child.stdout, child.stderr]) {
        if (held) handle.ref();
        else handle.unref();
      }
    },
    end() {
      child.stdin.end();
    },
    isGone: () => gone !== undefined,
  };
  server.url = new Promise((resolve) => answers.push(resolve));
  child.stdin.on("error", () => {});
  child.stderr.setEncoding("utf8").on("data", (text) => {
    log = (log + text).slice(-LOG_KEPT);
  });
  let said = 0;
  createInterface({ input: child.stdout }).on("line", (line) => {
    const answer = said++ === 0 ? line.trim() : JSON.parse(line);
    answers.shift()?.(answer);
  });
  const ended = (why) => {
    if (gone !== undefined) return;
    gone = why;
    const index = idleServers.indexOf(server);
    if (index >= 0) idleServers.splice(index, 1);
    for (const answer of answers.splice(0)) answer({ gone });
  };
  child.on("error", (error) => ended(`mcp-tape could not run: ${error.message}`));
  child.on("close", (code, signal) => ended(`mcp-tape exited (${code ?? signal})`));
  return server;
}

/** An idle tape server that runs `bin` with the variables as they are now, or a new one. */
function tapeServer(bin) {
  const variables = tapeVariables();
  for (const server of idleServers.filter((idle) => idle.bin !== bin || idle.variables !== variables)) {
    idleServers.splice(idleServers.indexOf(server), 1);
    server.end();
  }
  return idleServers.pop() ?? startServer(bin);
}

/**
 * `--model` values from `models`: an object of name to base URL, `NAME=URL` strings, or nothing
 * (the binary then reads MCP_TAPE_MODEL).
 */
export function modelSpecs(models) {
  if (!models) return [];
  const specs = typeof models === "string" ? models.split(/\s+/).filter(Boolean)
    : Array.isArray(models) ? models : Object.entries(models).map(([name, url]) => `${name}=${url}`);
  for (const spec of specs) {
    if (!/^[^=]+=.+$/.test(spec)) throw new Error(`model ${JSON.stringify(spec)}: expected NAME=URL, e.g. openai=https://api.openai.com/v1`);
  }
  return specs;
}

/** The base URL of the agent's model `name` on the tape at `tapeUrl`. */
export function modelUrl(tapeUrl, name) {
  return `${tapeUrl.replace(/\/+$/, "")}/model/${name}`;
}

/**
 * Starts a tape on a free loopback port, answering from (or recording into)
 * `cassette`, without waiting for it to serve: `take()` resolves with its
 * URL once it does. `stop(passed)` ends it, and writes its reports (`html`,
 * `report`).
 */
export function spawnTape({
  cassette, mode, upstream, rules, faults, onMiss, report, title, html, bin, models, pseudonymize,
} = {}) {
  if (!cassette) throw new Error("startTape: name the cassette file");
  // What the code says wins over the environment.
  const chosen = mode || process.env.MCP_TAPE_MODE?.trim() || "replay";
  if (!MODES.includes(chosen)) throw new Error(`mcp-tape mode ${chosen}: expected one of ${MODES.join(", ")}`);
  mkdirSync(dirname(cassette), { recursive: true });
  // A cassette that is not there is replayed as absent: each request misses, naming it.
  const args = [cassette, "--mode", chosen];
  if (upstream ?? process.env.MCP_TAPE_UPSTREAM) args.push("--upstream", upstream ?? process.env.MCP_TAPE_UPSTREAM);
  for (const model of modelSpecs(models)) args.push("--model", model);
  if (pseudonymize) args.push("--pseudonymize");
  if (rules) args.push("--rules", rules);
  for (const fault of [faults ?? []].flat()) args.push("--fault", faultSpec(fault));
  if (onMiss) args.push("--on-miss", onMiss);
  if (title) args.push("--title", title);
  for (const [flag, file] of [["--html", html], ["--report", report]]) {
    if (!file) continue;
    mkdirSync(dirname(file), { recursive: true });
    args.push(flag, file);
  }
  const server = tapeServer(bin ?? binary());
  server.hold(true);
  const ready = (async () => {
    const url = await server.url;
    const told = url.gone ? url : await server.ask(JSON.stringify(args));
    if (told.gone) throw new Error(`${told.gone} before it served:\n${server.log()}`);
    if (told.error !== undefined) throw new Error(`mcp-tape: ${told.error}`);
    return url;
  })();
  ready.catch(() => {}); // told when the tape is taken
  let stopped;
  /** Ends the run with the test's verdict; a failing test's recording is thrown away. */
  const stop = (passed) => {
    stopped ??= (async () => {
      try {
        await ready;
      } catch {
        release(server);
        return { code: 1, cases: [], misses: [], text: "" };
      }
      const told = await server.ask(passed ? "0" : "1");
      release(server);
      if (told.gone) throw new Error(`${told.gone} with no report:\n${server.log()}`);
      if (told.error !== undefined) throw new Error(`mcp-tape: ${told.error}`);
      const cases = told.report.cases ?? [];
      const misses = cases.filter((c) => c.misses > 0);
      if (passed && told.code !== 0 && misses.length === 0) {
        // The test passed, yet the run did not: its recording (an upstream that failed a
        // request, say) was not kept, or a recording it used is too old; the tape says which.
        throw new Error(
          `the test passed, but its tape ended with ${told.code}: its recording was not kept, or it failed the run ` +
            `for another reason:\n${told.said.join("\n")}`,
        );
      }
      return { code: told.code === 0 ? 0 : 1, cases, misses, text: describeMisses(misses, cassette, html) };
    })();
    return stopped;
  };
  return {
    cassette,
    /** Resolves with the tape's URL once it serves. A tape that could not start is stopped, and the reason thrown. */
    async take() {
      try {
        return await ready;
      } catch (error) {
        await stop(false).catch(() => {});
        throw error;
      }
    },
    stop,
  };
}

/** Ends the tape servers with no tape running (a test file's, once it is done). */
export function endIdleTapes() {
  for (const server of idleServers.splice(0)) server.end();
}

/** `server`'s tape has ended: it waits, idle, for the next. */
function release(server) {
  server.hold(false);
  if (!server.isGone()) idleServers.push(server);
}

/**
 * Starts a tape on a free loopback port, answering from (or recording into)
 * `cassette`; resolves once it serves, with its `url` and `stop(passed)`.
 */
export async function startTape(options = {}) {
  const tape = spawnTape(options);
  return { cassette: tape.cassette, stop: tape.stop, url: await tape.take() };
}

/** The misses as a person reads them: each case, its first miss and where the nearest recording differed. */
export function describeMisses(misses, cassette, html) {
  const total = misses.reduce((sum, c) => sum + c.misses, 0);
  const lines = existsSync(cassette)
    ? [`mcp-tape: ${total} request(s) missed the recordings of ${cassette}`]
    : [
        `mcp-tape: no cassette at ${cassette}: ${total} request(s) had nothing to answer them; ` +
          "record it with MCP_TAPE_MODE=once and MCP_TAPE_UPSTREAM=URL",
      ];
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

const escapeHtml = (text) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

/** `index.html` under `directory`: each test's page with its verdict, failed first. */
export function writeIndex(directory) {
  const pages = readdirSync(directory, { recursive: true })
    .filter((name) => name.endsWith(".html") && name !== "index.html")
    .sort()
    .map((name) => {
      const head = readFileSync(join(directory, name), "utf8").slice(0, 4096);
      const title = /<title>mcp-tape run report(?: of (.*?))?: (passed|failed)<\/title>/s.exec(head);
      const named = title?.[1] ?? name;
      const unescaped = named.replace(/&(amp|lt|gt|quot|#39);/g, (_, e) => ({ amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'" })[e]);
      return { name: unescaped, verdict: title?.[2] ?? "unknown", link: relative(directory, join(directory, name)) };
    });
  pages.sort((a, b) => (a.verdict === "failed") === (b.verdict === "failed") ? a.name.localeCompare(b.name) : a.verdict === "failed" ? -1 : 1);
  const failed = pages.filter((page) => page.verdict === "failed").length;
  const rows = pages
    .map((page) => `<li class="${page.verdict}"><a href="${escapeHtml(page.link)}">${escapeHtml(page.name)}</a>: ${page.verdict}</li>`)
    .join("\n");
  const heading = `mcp-tape: ${pages.length} tests, ${failed} failed`;
  const partial = join(directory, `index.html.partial-${process.pid}`);
  writeFileSync(
    partial,
    `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>${heading}</title></head><body>\n` +
      `<h1>${heading}</h1>\n<ul id="tests">\n${rows}\n</ul>\n</body></html>\n`,
  );
  renameSync(partial, join(directory, "index.html"));
}

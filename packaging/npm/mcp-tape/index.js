// mcp-tape for Node: where the binary is, and a tape for the length of one
// test. A tape is `mcp-tape test --verdict-on-stdin`, which prints the tape's
// URL and waits for the test's verdict on its standard input, so modes, match
// rules, reports and "a failing test never changes its cassette" are exactly
// those of `mcp-tape test`.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

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

/** The longest file name a test's name becomes as it is; a longer one is cut and told apart by its digest. */
const LONGEST_NAME = 160;

/**
 * A test's name as one file name of its own: a space as `_` (test names are
 * sentences), every other character a file name may not hold (a path
 * separator, a character Windows refuses, `%` itself) as `%XX` of its UTF-8
 * bytes, so that names differing in anything but a space against an `_`
 * never share one; a name of dots only (`.`, `..`) spelled out too, so it
 * never leaves its directory; a long one cut and ended with a digest of the
 * whole. The pytest plugin names its cassettes the same way.
 */
export function fileName(text) {
  let name = text.replace(/[^\p{L}\p{N}_.[\]=,+-]/gu, (c) =>
    c === " " ? "_" : [...Buffer.from(c, "utf8")].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join(""),
  );
  if (/^\.*$/.test(name)) name = name.replaceAll(".", "%2E");
  if (name.length > LONGEST_NAME) {
    name = `${name.slice(0, LONGEST_NAME - 17)}-${createHash("sha256").update(text).digest("hex").slice(0, 16)}`;
  }
  return name;
}

/** One directory for what every tape of this process writes before it is moved into place (its
 * reports) or read and dropped (its log); made once, removed at exit. */
let scratchDirectory;
let serial = 0;
function scratch() {
  if (!scratchDirectory) {
    scratchDirectory = mkdtempSync(join(tmpdir(), "mcp-tape-"));
    process.once("exit", () => rmSync(scratchDirectory, { recursive: true, force: true }));
  }
  return scratchDirectory;
}

/** `source` to `target` (made whole there: a reader never sees half a report), if it was written. */
function move(source, target) {
  if (!existsSync(source)) return;
  mkdirSync(dirname(target), { recursive: true });
  try {
    renameSync(source, target);
  } catch {
    copyFileSync(source, `${target}.partial-${process.pid}`);
    renameSync(`${target}.partial-${process.pid}`, target);
    rmSync(source, { force: true });
  }
}

/**
 * The process that starts this process's tapes (spawner.js), started with
 * the first: Node forks the whole process for a child, which costs a test
 * worker milliseconds a tape. It is kept from holding the event loop open
 * while no tape of ours runs.
 */
let spawner;
function helper() {
  if (spawner) return spawner;
  const child = spawn(process.execPath, [fileURLToPath(new URL("./spawner.js", import.meta.url))], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiting = new Map();
  let running = 0;
  const hold = (more) => {
    running += more;
    for (const handle of [child, child.stdin, child.stdout]) {
      if (running > 0) handle.ref();
      else handle.unref();
    }
  };
  const gone = (why) => {
    if (spawner?.child === child) spawner = undefined;
    for (const listener of waiting.values()) listener({ error: why });
    waiting.clear();
  };
  child.on("error", (error) => gone(`the tape starter could not run: ${error.message}`));
  child.on("exit", (code) => gone(`the tape starter exited (${code})`));
  child.stdin.on("error", () => {});
  createInterface({ input: child.stdout }).on("line", (line) => {
    const told = JSON.parse(line);
    waiting.get(told.id)?.(told);
  });
  let next = 0;
  spawner = {
    child,
    /** Starts `bin args` (stderr to `log`); `listen` hears of it until it has ended. */
    start(bin, args, log, listen) {
      const id = next++;
      hold(1);
      let ended = false;
      waiting.set(id, (told) => {
        if (!ended && (told.code !== undefined || told.error !== undefined)) {
          ended = true;
          waiting.delete(id);
          hold(-1);
        }
        listen(told);
      });
      child.stdin.write(`${JSON.stringify({ id, start: [bin, args, log] })}\n`);
      return (verdict) => child.stdin.write(`${JSON.stringify({ id, verdict })}\n`);
    },
  };
  hold(0);
  return spawner;
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
 * URL once it does. `stop(passed)` ends it. The reports are written to a
 * scratch directory and moved to `html` and `report` when the run ends, if
 * the tape was taken: one started ahead of a test and never used leaves
 * none.
 */
export function spawnTape({ cassette, mode, upstream, rules, faults, onMiss, report: kept, title, html, bin, models } = {}) {
  if (!cassette) throw new Error("startTape: name the cassette file");
  // What the code says wins over the environment.
  const chosen = mode || process.env.MCP_TAPE_MODE?.trim() || "replay";
  if (!MODES.includes(chosen)) throw new Error(`mcp-tape mode ${chosen}: expected one of ${MODES.join(", ")}`);
  const place = join(scratch(), `tape-${process.pid}-${serial++}`);
  const report = `${place}.json`;
  const page = `${place}.html`;
  const log = `${place}.log`;
  mkdirSync(dirname(cassette), { recursive: true });
  // A cassette that is not there is replayed as absent: each request misses, naming it.
  const args = ["test", cassette, "--mode", chosen, "--report", report];
  if (upstream ?? process.env.MCP_TAPE_UPSTREAM) args.push("--upstream", upstream ?? process.env.MCP_TAPE_UPSTREAM);
  for (const model of modelSpecs(models)) args.push("--model", model);
  if (rules) args.push("--rules", rules);
  for (const fault of [faults ?? []].flat()) args.push("--fault", faultSpec(fault));
  if (onMiss) args.push("--on-miss", onMiss);
  if (title) args.push("--title", title);
  if (html) args.push("--html", page);
  args.push("--verdict-on-stdin");
  const readLog = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
  let taken = false;
  let serve;
  let refuse;
  let end;
  const ready = new Promise((resolve, reject) => {
    serve = resolve;
    refuse = reject;
  });
  ready.catch(() => {}); // a tape started ahead may never be asked; its failure is told when it is
  const exited = new Promise((resolve) => {
    end = resolve;
  });
  // The tape has written its report (it let go of its stdout), or has ended.
  let reported;
  const said = new Promise((resolve) => {
    reported = resolve;
  });
  exited.then(reported);
  const tell = helper().start(bin ?? binary(), args, log, (told) => {
    if (told.url !== undefined) {
      serve(told.url);
    } else if (told.said) {
      reported();
    } else if (told.error !== undefined) {
      refuse(new Error(`mcp-tape: ${told.error}:\n${readLog()}`));
      end(null);
    } else {
      refuse(new Error(`mcp-tape exited (${told.code}) before it served:\n${readLog()}`));
      end(told.code);
    }
  });
  const drop = () => [report, page, log].forEach((file) => rmSync(file, { force: true }));
  let stopped;
  /** Ends the run with the test's verdict; a failing test's recording is thrown away. */
  const stop = (passed) => {
    stopped ??= (async () => {
      tell(passed ? "0\n" : "1\n");
      await said;
      try {
        let parsed;
        try {
          parsed = JSON.parse(readFileSync(report, "utf8"));
        } catch (error) {
          const code = await exited;
          throw new Error(`mcp-tape exited (${code}) with no report (${error.message}):\n${readLog()}`);
        }
        if (taken) {
          if (html) move(page, html);
          if (kept) move(report, kept);
        }
        const misses = (parsed.cases ?? []).filter((c) => c.misses > 0);
        if (passed && !parsed.passed && misses.length === 0) {
          // The test passed, yet the run did not: its recording (an upstream that failed a
          // request, say) was not kept, or a recording it used is too old; the log says which.
          const code = await exited;
          const tail = readLog().split("\n").slice(-13).join("\n");
          throw new Error(
            `the test passed, but mcp-tape exited ${code}: its recording was not kept, or it failed the run for another reason:\n${tail}`,
          );
        }
        const cases = parsed.cases ?? [];
        return { code: parsed.passed ? 0 : 1, cases, misses, text: describeMisses(misses, cassette, html) };
      } finally {
        exited.then(drop); // once the process has ended: it writes its log until then
      }
    })();
    return stopped;
  };
  return {
    cassette,
    /**
     * Resolves with the tape's URL once it serves: for a test that takes this tape (its reports are
     * kept). A tape that ended before it served is stopped, and the reason thrown.
     */
    async take() {
      taken = true;
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

// Per-test tapes for vitest, the VCR way: `const tape = useTape()` at the top
// of a test file gives each test a tape of its own on a free loopback port,
// answering from cassettes/<file>/<describe>/<test>.sqlite (the file's name
// without .test/.spec and its extension); `tape.url` is its URL while the
// test runs (also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT). A request the
// cassette does not hold fails that test, with the misses in the error; so
// does any request when the cassette is not there. Recording modes
// (MCP_TAPE_MODE, MCP_TAPE_UPSTREAM) keep a test's recording only when it
// passes. Under `mcp-tape test -- vitest run`, the one tape already running
// serves every test instead.
import { basename, join } from "node:path";
import { afterAll, afterEach, beforeEach } from "vitest";
import { fileName, startTape, writeIndex } from "./index.js";

const VARIABLES = ["MCP_TAPE_URL", "MCP_PLATFORM_ENDPOINT"];

/** The names from the file down to `task`: its describe blocks, then the test. */
function names(task) {
  const found = [];
  for (let t = task; t && t !== task.file; t = t.suite) {
    if (t.name) found.unshift(t.name);
  }
  return found;
}

/** `<file>/<describe>/.../<test>`: where a test's cassette, page and report go. */
export function testPath(file, task) {
  const stem = basename(file).replace(/\.[cm]?[jt]sx?$/, "").replace(/\.(test|spec)$/, "");
  return join(fileName(stem), ...names(task).map(fileName));
}

export function useTape(options = {}) {
  const outer = process.env.MCP_TAPE_URL;
  const state = { url: outer, cassette: undefined };
  if (outer) return state;
  const directory = options.cassettes ?? process.env.MCP_TAPE_CASSETTES ?? "cassettes";
  const htmlDirectory = options.html ?? process.env.MCP_TAPE_HTML;
  const reportDirectory = options.reports ?? process.env.MCP_TAPE_REPORTS;
  let tape;
  let saved;
  beforeEach(async (context) => {
    const place = testPath(context.task.file.name, context.task);
    const cassette = options.cassette ?? join(directory, `${place}.sqlite`);
    const html = htmlDirectory ? join(htmlDirectory, `${place}.html`) : undefined;
    const report = reportDirectory ? join(reportDirectory, `${place}.json`) : undefined;
    const title = `${context.task.file.name} > ${names(context.task).join(" > ")} (${cassette})`;
    tape = await startTape({ ...options, cassette, html, report, title });
    state.url = tape.url;
    state.cassette = cassette;
    saved = VARIABLES.map((v) => process.env[v]);
    for (const v of VARIABLES) process.env[v] = tape.url;
  });
  afterEach(async (context) => {
    VARIABLES.forEach((v, i) => {
      if (saved[i] === undefined) delete process.env[v];
      else process.env[v] = saved[i];
    });
    const passed = context.task.result?.state !== "fail";
    const { misses, text } = await tape.stop(passed);
    state.url = undefined;
    // Thrown when the test failed too: often its failure is the client's error for the miss.
    if (misses.length > 0) throw new Error(text);
  });
  // Each file, when done, lists every page there is so far: the last one lists the run's.
  if (htmlDirectory) afterAll(() => writeIndex(htmlDirectory));
  return state;
}

// Per-test tapes for vitest, the VCR way: `const tape = useTape()` at the top
// of a test file gives each test a tape of its own (the file's tests take
// turns on one loopback port, served by one mcp-tape process), answering from cassettes/<file>/<describe>/<test>.sqlite (the file's name
// without .test/.spec and its extension); `tape.url` is its URL while the
// test runs (also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT). A request the
// cassette does not hold fails that test, with the misses in the error; so
// does any request when the cassette is not there. Recording modes
// (MCP_TAPE_MODE, MCP_TAPE_UPSTREAM) keep a test's recording only when it
// passes. `useTape({ models: { openai: URL } })` records the agent's model
// too, and `tape.model("openai")` is its base URL on the tape. Under GitHub
// Actions each file appends its tests' misses, drift and faults to the
// job's summary (GITHUB_STEP_SUMMARY). Under `mcp-tape test -- vitest run`,
// the one tape already running serves every test instead.
import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import { afterAll, afterEach, beforeEach } from "vitest";
import { rows, tellFile } from "./github.js";
import { endIdleTapes, fileName, modelUrl, spawnTape, writeIndex } from "./index.js";

const VARIABLES = ["MCP_TAPE_URL", "MCP_PLATFORM_ENDPOINT"];

/** The names from the file down to `task`: its describe blocks, then the test. */
function names(task) {
  const found = [];
  for (let t = task; t && t !== task.file; t = t.suite) {
    if (t.name) found.unshift(t.name);
  }
  return found;
}

/**
 * `<file>/<describe>/.../<test>`: where a test's cassette, page and report
 * go (with `toldByCase` false, where earlier versions put them).
 */
export function testPath(file, task, toldByCase = true) {
  const stem = basename(file).replace(/\.[cm]?[jt]sx?$/, "").replace(/\.(test|spec)$/, "");
  return join(...[stem, ...names(task)].map((name) => fileName(name, toldByCase)));
}

export function useTape(options = {}) {
  const outer = process.env.MCP_TAPE_URL;
  const state = {
    url: outer,
    cassette: undefined,
    /** The base URL of the agent's model `name` on this test's tape. */
    model(name) {
      if (state.url === undefined) throw new Error("mcp-tape: the tape's model URL is there while a test runs");
      return modelUrl(state.url, name);
    },
  };
  if (outer) return state;
  // Where the test file called useTape: a miss's error points there (not into this package), so
  // vitest shows that line, and its github-actions reporter makes the miss an annotation there.
  const calledAt = (new Error().stack ?? "").split("\n").slice(2).join("\n");
  const directory = options.cassettes ?? process.env.MCP_TAPE_CASSETTES ?? "cassettes";
  const htmlDirectory = options.html ?? process.env.MCP_TAPE_HTML;
  const reportDirectory = options.reports ?? process.env.MCP_TAPE_REPORTS;
  /** What `task`'s tape is started with. */
  const settings = (task) => {
    const place = testPath(task.file.name, task);
    const named = join(directory, `${place}.sqlite`);
    const earlier = join(directory, `${testPath(task.file.name, task, false)}.sqlite`);
    // Recorded under the name earlier versions gave: still found.
    const cassette = options.cassette ?? (!existsSync(named) && existsSync(earlier) ? earlier : named);
    return {
      ...options,
      cassette,
      html: htmlDirectory ? join(htmlDirectory, `${place}.html`) : undefined,
      report: reportDirectory ? join(reportDirectory, `${place}.json`) : undefined,
      title: `${task.file.name} > ${names(task).join(" > ")} (${cassette})`,
    };
  };
  let tape;
  let saved;
  // What each test's tape tells GitHub: [[test, rows]], appended to the step summary when the file is done.
  const told = [];
  let testFile;
  beforeEach(async (context) => {
    tape = undefined;
    const wanted = settings(context.task);
    const started = spawnTape(wanted);
    const url = await started.take();
    tape = started;
    state.url = url;
    state.cassette = wanted.cassette;
    saved = VARIABLES.map((v) => process.env[v]);
    for (const v of VARIABLES) process.env[v] = url;
  });
  afterEach(async (context) => {
    if (tape === undefined) return; // its start failed, and the test with it
    VARIABLES.forEach((v, i) => {
      if (saved[i] === undefined) delete process.env[v];
      else process.env[v] = saved[i];
    });
    const passed = context.task.result?.state !== "fail";
    const { cases, misses, text } = await tape.stop(passed);
    state.url = undefined;
    told.push([names(context.task).join(" > "), rows(cases)]);
    testFile = context.task.file.name;
    // Thrown when the test failed too: often its failure is the client's error for the miss.
    if (misses.length > 0) {
      const miss = new Error(text);
      miss.stack = `Error: ${text}\n${calledAt}`;
      throw miss;
    }
  });
  afterAll(endIdleTapes);
  afterAll(() => tellFile(testFile, told));
  // Each file, when done, lists every page there is so far: the last one lists the run's.
  if (htmlDirectory) afterAll(() => writeIndex(htmlDirectory));
  return state;
}

// Starts tapes for the process that started it, which asks through this
// process's stdin and hears back on its stdout, one JSON message a line:
//
//   asked: {"id":N,"start":[BIN,ARGS,LOG]}  {"id":N,"verdict":"0\n"}
//   told:  {"id":N,"url":URL}  {"id":N,"said":true}  {"id":N,"code":CODE}  {"id":N,"error":TEXT}
//
// "said": the tape let go of its stdout, which it does once its report is
// written (before the process has ended: "code").
//
// Node starts a child by forking the whole process, at a cost that grows with
// its memory: a test worker of some hundred megabytes pays milliseconds a
// tape, this small process a fraction of that, and on another core. When the
// asker goes (its end of stdin closes), every tape still running is told
// its test failed, so each ends as a failing test's tape does; once all have
// ended, the directories their logs were in go too. The asker removes them
// itself when it exits, but a test runner may end a worker without its exit
// handlers (vitest's fork workers, each run).
import { spawn } from "node:child_process";
import { closeSync, openSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { GITHUB_VARIABLES } from "./github.js";

const tapes = new Map();
const scratch = new Set();
let askerGone = false;
const tidy = () => {
  if (!askerGone || tapes.size > 0) return;
  for (const directory of scratch) rmSync(directory, { recursive: true, force: true });
  scratch.clear();
};
const tell = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
// The asker may be gone before its tapes are (a worker that exits): nobody is left to tell.
process.stdout.on("error", () => {});
// What a tape would tell GitHub would go to a pipe; the vitest helper tells it for each file.
const environment = Object.fromEntries(Object.entries(process.env).filter(([name]) => !GITHUB_VARIABLES.includes(name)));

function start(id, [bin, args, log]) {
  scratch.add(dirname(log));
  let child;
  const fd = openSync(log, "w");
  try {
    child = spawn(bin, args, { stdio: ["pipe", "pipe", fd], env: environment });
  } catch (error) {
    tell({ id, error: error.message });
    return;
  } finally {
    closeSync(fd);
  }
  tapes.set(id, child);
  child.stdin.on("error", () => {});
  child.on("error", (error) => tell({ id, error: error.message }));
  createInterface({ input: child.stdout })
    .once("line", (url) => tell({ id, url: url.trim() }))
    .once("close", () => tell({ id, said: true }));
  child.on("close", (code) => {
    tapes.delete(id);
    tell({ id, code });
    tidy();
  });
}

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const asked = JSON.parse(line);
    if (asked.start) start(asked.id, asked.start);
    else if (asked.verdict !== undefined) tapes.get(asked.id)?.stdin.end(asked.verdict);
  })
  .on("close", () => {
    askerGone = true;
    for (const child of tapes.values()) child.stdin.end("1\n");
    tidy();
  });

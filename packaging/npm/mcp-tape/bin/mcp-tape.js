#!/usr/bin/env node
// The `mcp-tape` command of the npm package: runs the binary of this
// platform's package (@mcp-tape/<platform>-<arch>), passing its arguments,
// standard streams, signals and exit status through.
import { spawn } from "node:child_process";
import { binary } from "../index.js";

let executable;
try {
  executable = binary();
} catch (error) {
  console.error(`mcp-tape: ${error.message}`);
  process.exit(1);
}
const child = spawn(executable, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
  console.error(`mcp-tape: could not run ${executable}: ${error.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});

// Run when mcp-tape is installed: the binary comes in this platform's
// package (an optional dependency), which npm can leave out. Say so now, with
// the fix, rather than at the first test.
import { binary } from "./index.js";

try {
  binary();
} catch (error) {
  console.error(`mcp-tape: ${error.message}`);
  process.exit(1);
}

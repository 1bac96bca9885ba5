import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["./global-setup.mjs"],
    testTimeout: 30_000,
  },
});

import type { TapeOptions } from "./index.js";

export interface UseTapeOptions extends Omit<TapeOptions, "cassette" | "html" | "report" | "title"> {
  /** One cassette file for every test of the file, instead of cassettes/<file>/<describe>/<test>.sqlite. */
  cassette?: string;
  /** Where per-test cassettes live (default: MCP_TAPE_CASSETTES, else cassettes). */
  cassettes?: string;
  /** Write each test's HTML report under this directory (default: MCP_TAPE_HTML). */
  html?: string;
  /** Write each test's JSON usage report under this directory (default: MCP_TAPE_REPORTS). */
  reports?: string;
}

/** The tape of the test that is running: its URL (undefined between tests) and cassette. */
export interface TapeState {
  url: string | undefined;
  cassette: string | undefined;
  /** The base URL of the agent's model `name` on the running test's tape, for its client's base URL. */
  model(name: string): string;
}

/** Gives each test of the file a tape of its own; call it at the top of a test file. */
export declare function useTape(options?: UseTapeOptions): TapeState;

/** `<file>/<describe>/.../<test>` for a vitest task: where its cassette, page and report go. */
export declare function testPath(file: string, task: unknown, toldByCase?: boolean): string;


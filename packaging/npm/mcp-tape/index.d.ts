export declare const MODES: readonly ["replay", "missing", "all", "once"];
export type Mode = (typeof MODES)[number];

export interface TapeOptions {
  /** The cassette file (or, in replay mode, a directory of cassettes). */
  cassette: string;
  /** replay (default), missing, all or once; MCP_TAPE_MODE overrides it. */
  mode?: Mode;
  /** The MCP server the recording modes record from (default: MCP_TAPE_UPSTREAM). */
  upstream?: string;
  /** Match rules file (default: mcp-tape.toml in the working directory, if any). */
  rules?: string;
  /** Write the run's HTML report here. */
  html?: string;
  /** The mcp-tape executable (default: this platform's package, or MCP_TAPE_BIN). */
  bin?: string;
}

export interface Miss {
  server: string;
  method: string;
  subject: string | null;
  misses: number;
  firstMiss?: { message: string; data?: unknown };
}

export interface Stopped {
  code: number | null;
  misses: Miss[];
  text: string;
}

export interface Tape {
  url: string;
  cassette: string;
  stop(passed: boolean): Promise<Stopped>;
}

export declare function binary(): string;
export declare function fileName(text: string): string;
export declare function startTape(options: TapeOptions): Promise<Tape>;
export declare function describeMisses(misses: Miss[], cassette: string, html?: string): string;

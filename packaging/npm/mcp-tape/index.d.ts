export declare const MODES: readonly ["replay", "missing", "all", "once", "none", "new_episodes"];
export type Mode = (typeof MODES)[number];

export interface TapeOptions {
  /** The cassette file (or, in replay mode, a directory of cassettes). */
  cassette: string;
  /** replay (default; vcrpy's none), missing (new_episodes), all or once; default MCP_TAPE_MODE. */
  mode?: Mode;
  /** The MCP server the recording modes record from (default: MCP_TAPE_UPSTREAM). */
  upstream?: string;
  /** Match rules file (default: mcp-tape.toml in the working directory, if any). */
  rules?: string;
  /** Fault rules for this tape: `--fault` spec strings, or objects of a `[[fault]]` table's keys. */
  faults?: string | Record<string, unknown> | Array<string | Record<string, unknown>>;
  /** `--on-miss`: tool-result (default), error or mock. */
  onMiss?: "tool-result" | "error" | "mock";
  /** Keep the run's JSON usage report here. */
  report?: string;
  /** What the reports say the run was (a test's name and cassette). */
  title?: string;
  /** Write the run's HTML report here. */
  html?: string;
  /** The mcp-tape executable (default: this platform's package, or MCP_TAPE_BIN). */
  bin?: string;
  /**
   * The agent's models to record beside the MCP traffic: name to the base URL its client had
   * (`{ openai: "https://api.openai.com/v1" }`), or `NAME=URL` strings (default: MCP_TAPE_MODEL).
   */
  models?: Record<string, string> | string | string[];
  /**
   * Recording, store each person, address, GUID and phone number as a keyed pseudonym of the same
   * form (`--pseudonymize`; default MCP_TAPE_PSEUDONYMIZE; the key: MCP_TAPE_PSEUDONYM_KEY).
   */
  pseudonymize?: boolean;
}

/** The base URL of the agent's model `name` on the tape at `tapeUrl` (`tapeUrl/model/name`). */
export declare function modelUrl(tapeUrl: string, name: string): string;

export interface Miss {
  server: string;
  method: string;
  subject: string | null;
  misses: number;
  firstMiss?: { message: string; data?: unknown };
}

export interface Stopped {
  /** 0 when the tape's run passed (its report says so), else 1: known once the report is written. */
  code: number;
  /** Every case of the run's report (what answered each, the faults injected), those that missed among them. */
  cases: Miss[];
  misses: Miss[];
  text: string;
}

export interface Tape {
  url: string;
  cassette: string;
  stop(passed: boolean): Promise<Stopped>;
}

export declare function binary(): string;
export declare function fileName(text: string, toldByCase?: boolean): string;
export declare function faultSpec(fault: string | Record<string, unknown>): string;
export declare function missingPlatformPackage(name?: string): string;
/** The package holding the binary for a machine (this one by default): `@mcp-tape/<platform>-<arch>[-musl]`. */
export declare function platformPackage(machine?: { platform?: string; arch?: string; glibc?: string | null }): string;
export declare function startTape(options: TapeOptions): Promise<Tape>;
/** A tape started without waiting for it to serve (`spawnTape`). */
export interface SpawnedTape {
  cassette: string;
  /** Resolves with the URL once the tape serves (a tape that could not start is stopped, and the reason thrown). */
  take(): Promise<string>;
  stop(passed: boolean): Promise<Stopped>;
}
/** Starts a tape without waiting for it to serve. */
export declare function spawnTape(options: TapeOptions): SpawnedTape;
/** Ends the processes that serve tapes and have none running (the vitest helper calls it when a file is done). */
export declare function endIdleTapes(): void;
export declare function describeMisses(misses: Miss[], cassette: string, html?: string): string;
/** Writes `index.html` under `directory`: each test's HTML page (as `html` wrote it) with its verdict, failed first. */
export declare function writeIndex(directory: string): void;

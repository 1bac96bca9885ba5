/** A vitest globalSetup: one tape for the whole run, answering from MCP_TAPE_CASSETTES (default cassettes). */
export default function setup(project: {
  provide(key: string, value: unknown): void;
}): Promise<(() => Promise<void>) | undefined>;

/**
 * Flags of `kvrouter demo` and the two workload sizes (full and `--quick`). Everything the
 * demo's figures depend on is here, so a run is described by its options and seed alone.
 */

/** Shape of the generated workload (see `workload.ts`). */
export interface WorkloadShape {
  readonly systemPrompts: number;
  /** Token length range of a system prompt (inclusive). */
  readonly systemTokens: readonly [number, number];
  readonly conversations: number;
  /** Turns per conversation (inclusive range). */
  readonly turns: readonly [number, number];
  /** Tokens of one user message (inclusive range). */
  readonly userTokens: readonly [number, number];
  /** `max_tokens` of one reply (inclusive range). */
  readonly replyTokens: readonly [number, number];
  /** Conversations start uniformly within this window (ms from the phase start). */
  readonly arrivalWindowMs: number;
  /** Pause between a reply and the next turn (inclusive range, ms). */
  readonly thinkMs: readonly [number, number];
}

/** Flags of each simulated worker (`kvrouter sim-worker`). */
export interface SimTiming {
  readonly prefillTokensPerS: number;
  readonly decodeMsPerToken: number;
  readonly numGpuBlocks: number;
  readonly blockSize: number;
  readonly maxNumSeqs: number;
}

export interface DemoOptions {
  readonly workers: number;
  readonly seed: number;
  readonly json: boolean;
  readonly quick: boolean;
  /** Start the fleet and keep it running until SIGINT/SIGTERM; send no workload. */
  readonly stay: boolean;
  readonly workload: WorkloadShape;
  readonly sim: SimTiming;
}

export const DEMO_USAGE = `usage: kvrouter demo [options]

Starts the router and N simulated vLLM workers on loopback, sends a workload of shared
system prompts and multi-turn conversations routed by kvrouter, then the same workload
with round-robin routing on the same (reset) workers, and prints both side by side.

  --workers <n>          simulated workers (default 4)
  --conversations <n>    conversations in the workload (default 48; 12 with --quick)
  --seed <n>             workload seed, 0..2^32-1 (default 1)
  --json                 also print one JSON object with both policies' figures (last line)
  --quick                a smaller workload (for tests; ~10 s)
  --stay                 send no workload: start the router and the workers, print their
                         URLs, and keep them running until Ctrl-C (this is \`npm start\`)
  -h, --help             this text
`;

/** The full demo: visible differences, about 30-45 s end to end. */
export const FULL_WORKLOAD: WorkloadShape = {
  systemPrompts: 4,
  systemTokens: [1000, 2000],
  conversations: 48,
  turns: [3, 6],
  userTokens: [80, 320],
  replyTokens: [32, 80],
  arrivalWindowMs: 9000,
  thinkMs: [300, 1200],
};

/** `--quick`: the same shape, smaller and shorter. */
export const QUICK_WORKLOAD: WorkloadShape = {
  systemPrompts: 2,
  systemTokens: [800, 1200],
  conversations: 12,
  turns: [3, 4],
  userTokens: [80, 240],
  replyTokens: [16, 32],
  arrivalWindowMs: 1500,
  thinkMs: [100, 300],
};

/**
 * Worker timing; the prefill overhead is the simulator's default (10 ms). See docs/demo.md
 * for why these values.
 */
export const DEMO_SIM: SimTiming = {
  prefillTokensPerS: 4000,
  decodeMsPerToken: 10,
  numGpuBlocks: 1024,
  blockSize: 16,
  maxNumSeqs: 8,
};

/** A bad flag: the message names it. */
export class DemoUsageError extends Error {
  override readonly name = "DemoUsageError";
}

function intFlag(name: string, text: string | undefined, min: number, max: number): number {
  if (text === undefined) throw new DemoUsageError(`${name} needs a value`);
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new DemoUsageError(`${name} must be an integer in [${min}, ${max}], got '${text}'`);
  }
  return n;
}

/** Parse the demo's flags; "help" for -h/--help. Throws `DemoUsageError`. */
export function parseDemoArgs(argv: readonly string[]): DemoOptions | "help" {
  let workers = 4;
  let seed = 1;
  let json = false;
  let quick = false;
  let stay = false;
  let conversations: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith("--") && eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = () => inline ?? argv[++i];
    switch (name) {
      case "-h":
      case "--help":
        return "help";
      case "--workers":
        workers = intFlag(name, value(), 1, 32);
        break;
      case "--conversations":
        conversations = intFlag(name, value(), 1, 2000);
        break;
      case "--seed":
        seed = intFlag(name, value(), 0, 0xffff_ffff);
        break;
      case "--json":
        json = true;
        break;
      case "--quick":
        quick = true;
        break;
      case "--stay":
        stay = true;
        break;
      default:
        throw new DemoUsageError(`unknown option '${arg}'`);
    }
  }
  const base = quick ? QUICK_WORKLOAD : FULL_WORKLOAD;
  const workload = conversations === null ? base : { ...base, conversations };
  return { workers, seed, json, quick, stay, workload, sim: DEMO_SIM };
}

/**
 * Command-line options of `kvrouter sim-worker`, validated once with errors that name the
 * flag, then frozen. Defaults live here and nowhere else.
 */

import { randomInt } from "node:crypto";
import { parseArgs } from "node:util";

export interface SimWorkerConfig {
  readonly host: string;
  /** HTTP port of rank 0 (0 = any free port). Rank r listens on port + r. */
  readonly port: number;
  /** ZeroMQ PUB port of rank 0; null = no KV events. */
  readonly eventsPort: number | null;
  /** ZeroMQ ROUTER replay port of rank 0; null = no replay socket. */
  readonly replayPort: number | null;
  readonly topic: string;
  readonly numGpuBlocks: number;
  readonly blockSize: number;
  readonly model: string;
  readonly prefillTokensPerSec: number;
  /** Fixed time per prefill, ms (scheduling and the step that emits the first token). */
  readonly prefillOverheadMs: number;
  readonly decodeMsPerToken: number;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly dataParallelRank: number;
  readonly eventForm: "map" | "array";
  readonly hashForm: "uint64" | "int64";
  /** Hash seed (random per process unless given). */
  readonly seed: number;
  /** Model directory (tokenizer.json + tokenizer_config.json) for real tokenization; null = stand-in. */
  readonly tokenizerDir: string | null;
  /** LoRA adapters served (`--lora`); requests naming one are cached under its name. */
  readonly loras: readonly string[];
}

export const SIM_USAGE = `usage: kvrouter sim-worker [options]

A simulated vLLM engine (no GPU): paged prefix KV cache, OpenAI-compatible API,
vLLM metric names, and vLLM's ZeroMQ KV events.

  --host <addr>                 address for HTTP and ZeroMQ binds (default 127.0.0.1)
  --port <n>                    HTTP port of rank 0; 0 = any free port (default 8000)
  --events-port <n|off>         ZeroMQ PUB port of rank 0; 0 = any (default 5557)
  --replay-port <n|off>         ZeroMQ ROUTER replay port of rank 0; 0 = any (default 5558)
  --topic <s>                   KV event topic (default "")
  --num-gpu-blocks <n>          KV blocks, including vLLM's reserved null block (default 2048)
  --block-size <n>              tokens per block (default 16)
  --model <name>                served model name (default sim-model)
  --prefill-tokens-per-s <x>    prefill throughput for uncached tokens; one prompt at a
                                time, FIFO (default 20000)
  --prefill-overhead-ms <x>     fixed time added to each prefill (default 10)
  --decode-ms-per-token <x>     time per output token (default 20)
  --max-num-seqs <n>            most running sequences (default 256)
  --max-model-len <n>           longest prompt + output (default: all usable blocks)
  --data-parallel-rank <n>      rank r: every port above is offset by r (default 0)
  --event-encoding <map|array>  event form: map (vLLM >= 0.24) or tagged arrays (default map)
  --hash-encoding <uint64|int64> hash ints as unsigned (vLLM >= 0.10.2) or signed (default uint64)
  --seed <n>                    block hash seed, 0..2^32-1 (default: random per process)
  --tokenizer <dir>             real tokenizer: a model directory with tokenizer.json and
                                tokenizer_config.json (default: the stand-in tokenizer)
  --lora <name[,name…]>         LoRA adapters served: listed in /v1/models with the model
                                as parent; a request naming one is cached under its name
  -h, --help                    this text
`;

/** A bad flag: the message names it. */
export class SimConfigError extends Error {
  override readonly name = "SimConfigError";
}

const OPTIONS = {
  host: { type: "string" },
  port: { type: "string" },
  "events-port": { type: "string" },
  "replay-port": { type: "string" },
  topic: { type: "string" },
  "num-gpu-blocks": { type: "string" },
  "block-size": { type: "string" },
  model: { type: "string" },
  "prefill-tokens-per-s": { type: "string" },
  "prefill-overhead-ms": { type: "string" },
  "decode-ms-per-token": { type: "string" },
  "max-num-seqs": { type: "string" },
  "max-model-len": { type: "string" },
  "data-parallel-rank": { type: "string" },
  "event-encoding": { type: "string" },
  "hash-encoding": { type: "string" },
  seed: { type: "string" },
  tokenizer: { type: "string" },
  lora: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function int(
  flag: string,
  raw: string | undefined,
  dflt: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(v) || v < min || v > max) {
    throw new SimConfigError(`--${flag} must be an integer in [${min}, ${max}], got '${raw}'`);
  }
  return v;
}

function positive(flag: string, raw: string | undefined, dflt: number): number {
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(v) || v <= 0) {
    throw new SimConfigError(`--${flag} must be a positive number, got '${raw}'`);
  }
  return v;
}

function nonNegative(flag: string, raw: string | undefined, dflt: number): number {
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(v) || v < 0) {
    throw new SimConfigError(`--${flag} must be a number ≥ 0, got '${raw}'`);
  }
  return v;
}

function optionalPort(flag: string, raw: string | undefined, dflt: number): number | null {
  if (raw === "off" || raw === "none") return null;
  return int(flag, raw, dflt, 0, 65535);
}

function oneOf<T extends string>(
  flag: string,
  raw: string | undefined,
  values: readonly T[],
  dflt: T,
): T {
  if (raw === undefined) return dflt;
  if (!(values as readonly string[]).includes(raw)) {
    throw new SimConfigError(`--${flag} must be one of ${values.join(", ")}, got '${raw}'`);
  }
  return raw as T;
}

function lorasOf(raw: string | undefined, model: string): readonly string[] {
  if (raw === undefined) return [];
  const names = raw.split(",").map((n) => n.trim());
  for (const n of names) {
    if (n === "") throw new SimConfigError("--lora: an adapter name is empty");
    if (n === model) throw new SimConfigError(`--lora: ${n} is the model's own name`);
  }
  return Object.freeze([...new Set(names)]);
}

function tokenizerDirOf(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  if (raw.trim() === "") throw new SimConfigError("--tokenizer must name a model directory");
  return raw;
}

/** Parse argv; returns "help" when help was asked for. Throws `SimConfigError`. */
export function parseSimArgs(argv: readonly string[]): SimWorkerConfig | "help" {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true }>>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: OPTIONS,
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new SimConfigError((err as Error).message);
  }
  const v = parsed.values;
  if (v.help === true) return "help";
  const host = v.host ?? "127.0.0.1";
  if (host.trim() === "") throw new SimConfigError("--host must not be empty");
  const numGpuBlocks = int("num-gpu-blocks", v["num-gpu-blocks"], 2048, 2, 100_000_000);
  const blockSize = int("block-size", v["block-size"], 16, 1, 4096);
  const usableTokens = (numGpuBlocks - 1) * blockSize;
  const maxModelLen = int(
    "max-model-len",
    v["max-model-len"],
    usableTokens,
    2,
    Number.MAX_SAFE_INTEGER,
  );
  if (maxModelLen > usableTokens) {
    throw new SimConfigError(
      `--max-model-len ${maxModelLen} exceeds the KV capacity of ${usableTokens} tokens ((--num-gpu-blocks − 1) × --block-size)`,
    );
  }
  const model = v.model ?? "sim-model";
  if (model === "") throw new SimConfigError("--model must not be empty");
  const rank = int("data-parallel-rank", v["data-parallel-rank"], 0, 0, 1023);
  const port = int("port", v.port, 8000, 0, 65535);
  const eventsPort = optionalPort("events-port", v["events-port"], 5557);
  const replayPort = optionalPort("replay-port", v["replay-port"], 5558);
  for (const [flag, p] of [
    ["port", port],
    ["events-port", eventsPort],
    ["replay-port", replayPort],
  ] as const) {
    if (p !== null && p !== 0 && p + rank > 65535) {
      throw new SimConfigError(`--${flag} ${p} + --data-parallel-rank ${rank} is above 65535`);
    }
  }
  if (replayPort !== null && eventsPort === null) {
    throw new SimConfigError("--replay-port needs --events-port (set --replay-port off)");
  }
  return Object.freeze({
    host,
    port,
    eventsPort,
    replayPort,
    topic: v.topic ?? "",
    numGpuBlocks,
    blockSize,
    model,
    prefillTokensPerSec: positive("prefill-tokens-per-s", v["prefill-tokens-per-s"], 20_000),
    prefillOverheadMs: nonNegative("prefill-overhead-ms", v["prefill-overhead-ms"], 10),
    decodeMsPerToken: positive("decode-ms-per-token", v["decode-ms-per-token"], 20),
    maxNumSeqs: int("max-num-seqs", v["max-num-seqs"], 256, 1, 1_000_000),
    maxModelLen,
    dataParallelRank: rank,
    eventForm: oneOf("event-encoding", v["event-encoding"], ["map", "array"] as const, "map"),
    hashForm: oneOf("hash-encoding", v["hash-encoding"], ["uint64", "int64"] as const, "uint64"),
    seed: int("seed", v.seed, randomInt(0, 2 ** 32 - 1), 0, 2 ** 32 - 1),
    tokenizerDir: tokenizerDirOf(v.tokenizer),
    loras: lorasOf(v.lora, model),
  });
}

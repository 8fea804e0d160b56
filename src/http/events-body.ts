/**
 * `POST /v1/workers/:id/events`: the JSON batch an engine pushes when it cannot speak
 * ZeroMQ, its schema, and its translation into the vLLM wire batch the ZeroMQ path
 * decodes. Fields are vLLM's event fields (`block_hashes`, `parent_block_hash`,
 * `token_ids`, `block_size`, `lora_name`, `medium`, …) in snake case, tags are vLLM's
 * (`BlockStored`, `BlockRemoved`, `AllBlocksCleared`). Hashes are 64-bit ints, signed or
 * unsigned: a JSON number only while it is a safe integer (JSON parsers lose the low
 * bits past 2^53), a decimal string otherwise. Every rule the schema cannot say is
 * checked here and reported as a 400 naming the field (`body/events/2/block_hashes/0`).
 */

import type { WireBatch, WireEvent } from "../protocol/event-encoder.js";
import { ApiError } from "./errors.js";

const hash = {
  anyOf: [{ type: "integer" }, { type: "string", pattern: "^-?[0-9]{1,20}$" }],
} as const;
const optName = { type: ["string", "null"], maxLength: 256 } as const;

/** Shapes only; the per-type rules are `toWireBatch`'s. */
export const pushEventsBodySchema = {
  type: "object",
  required: ["event_id", "events"],
  additionalProperties: false,
  properties: {
    event_id: { type: "integer", minimum: 0 },
    dp_rank: { type: "integer", minimum: 0 },
    ts: { type: "number", minimum: 0 },
    events: {
      type: "array",
      maxItems: 10_000,
      items: {
        type: "object",
        required: ["type"],
        additionalProperties: false,
        properties: {
          type: { enum: ["BlockStored", "BlockRemoved", "AllBlocksCleared"] },
          block_hashes: { type: "array", minItems: 1, maxItems: 100_000, items: hash },
          parent_block_hash: { anyOf: [hash, { type: "null" }] },
          token_ids: {
            type: "array",
            maxItems: 10_000_000,
            items: { type: "integer", minimum: 0, maximum: 4294967295 },
          },
          block_size: { type: "integer", minimum: 1, maximum: 65536 },
          lora_id: { type: ["integer", "null"] },
          lora_name: optName,
          medium: optName,
        },
      },
    },
  },
} as const;

type JsonHash = number | string;

export interface PushEventsBody {
  readonly event_id: number;
  readonly dp_rank?: number;
  readonly ts?: number;
  readonly events: readonly {
    readonly type: "BlockStored" | "BlockRemoved" | "AllBlocksCleared";
    readonly block_hashes?: readonly JsonHash[];
    readonly parent_block_hash?: JsonHash | null;
    readonly token_ids?: readonly number[];
    readonly block_size?: number;
    readonly lora_id?: number | null;
    readonly lora_name?: string | null;
    readonly medium?: string | null;
  }[];
}

const MIN = -(1n << 63n);
const END = 1n << 64n;

function bad(path: string, message: string): never {
  throw new ApiError("invalid_request", `${path} ${message}`, [{ path, message }]);
}

function toHash(v: JsonHash, path: string): bigint {
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) {
      bad(path, "is not a safe integer: send 64-bit hashes as decimal strings");
    }
    return BigInt(v);
  }
  const h = BigInt(v);
  if (h < MIN || h >= END) bad(path, "does not fit 64 bits (signed or unsigned)");
  return h;
}

function required<T>(v: T | undefined, path: string, type: string): T {
  if (v === undefined) bad(path, `is required in a ${type} event`);
  return v;
}

/** The vLLM wire batch of a pushed body (its `dp_rank` already checked by the caller). */
export function toWireBatch(body: PushEventsBody, dpRank: number, nowS: number): WireBatch {
  return { ts: body.ts ?? nowS, events: body.events.map(toWireEvent), dpRank };
}

function toWireEvent(e: PushEventsBody["events"][number], i: number): WireEvent {
  const at = `body/events/${i}`;
  switch (e.type) {
    case "BlockStored": {
      const hashes = required(e.block_hashes, `${at}/block_hashes`, e.type);
      const parent = required(e.parent_block_hash, `${at}/parent_block_hash`, e.type);
      const tokenIds = required(e.token_ids, `${at}/token_ids`, e.type);
      const blockSize = required(e.block_size, `${at}/block_size`, e.type);
      if (tokenIds.length !== hashes.length * blockSize) {
        bad(
          `${at}/token_ids`,
          `has ${tokenIds.length} tokens but ${hashes.length} blocks × block_size ${blockSize} = ${hashes.length * blockSize}`,
        );
      }
      return {
        type: "BlockStored",
        blockHashes: hashes.map((h, j) => toHash(h, `${at}/block_hashes/${j}`)),
        parentHash: parent === null ? null : toHash(parent, `${at}/parent_block_hash`),
        tokenIds,
        blockSize,
        loraId: e.lora_id ?? null,
        medium: e.medium ?? null,
        loraName: e.lora_name ?? null,
      };
    }
    case "BlockRemoved": {
      const extra = (
        ["parent_block_hash", "token_ids", "block_size", "lora_id", "lora_name"] as const
      ).find((k) => e[k] !== undefined);
      if (extra !== undefined) bad(`${at}/${extra}`, "is not a field of a BlockRemoved event");
      const hashes = required(e.block_hashes, `${at}/block_hashes`, e.type);
      return {
        type: "BlockRemoved",
        blockHashes: hashes.map((h, j) => toHash(h, `${at}/block_hashes/${j}`)),
        medium: e.medium ?? null,
      };
    }
    default: {
      // AllBlocksCleared (the schema allows no other tag).
      const extra = Object.keys(e).find((k) => k !== "type");
      if (extra !== undefined) bad(`${at}/${extra}`, "is not a field of an AllBlocksCleared event");
      return { type: "AllBlocksCleared" };
    }
  }
}

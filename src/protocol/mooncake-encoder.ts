/**
 * Encoder for Mooncake store event batches, the way Mooncake's C++ publisher writes
 * them (positional arrays, every field present, unset strings `""`, smallest int
 * widths). For tests and simulated stores; the router itself only decodes.
 */

import { MsgpackWriter } from "./msgpack-writer.js";

export type MooncakeWireReplica = readonly [type: string, location: string];

export type MooncakeWireEvent =
  | {
      readonly type: "BlockStoreEvent";
      readonly key: string;
      readonly replicas: readonly MooncakeWireReplica[];
      readonly modelName?: string;
      readonly blockSize?: number;
      /** `""` or absent = unset. */
      readonly blockHash?: string;
      readonly parentBlockHash?: string;
      readonly tokenIds?: ArrayLike<number>;
    }
  | {
      readonly type: "BlockUpdateEvent";
      readonly key: string;
      readonly replicas: readonly MooncakeWireReplica[];
    }
  | { readonly type: "RemoveAllEvent" };

export interface MooncakeWireBatch {
  /** Seconds since the epoch. */
  readonly ts: number;
  readonly events: readonly MooncakeWireEvent[];
}

export interface MooncakeEncodeOptions {
  /** `seconds`: float64 (seed 001); `millis`: int64 milliseconds (Mooncake main). */
  readonly tsForm: "seconds" | "millis";
}

/** Encode one Mooncake batch payload. */
export function encodeMooncakeBatch(
  batch: MooncakeWireBatch,
  options?: Partial<MooncakeEncodeOptions>,
): Uint8Array {
  const w = new MsgpackWriter();
  w.arrayHeader(2);
  if ((options?.tsForm ?? "millis") === "millis") w.int(Math.round(batch.ts * 1000));
  else w.float64(batch.ts);
  w.arrayHeader(batch.events.length);
  for (const e of batch.events) {
    switch (e.type) {
      case "BlockStoreEvent": {
        w.arrayHeader(8);
        w.str(e.type);
        w.str(e.key);
        writeReplicas(w, e.replicas);
        w.str(e.modelName ?? "");
        w.int(e.blockSize ?? 0);
        w.str(e.blockHash ?? "");
        w.str(e.parentBlockHash ?? "");
        const tokens = e.tokenIds ?? [];
        w.arrayHeader(tokens.length);
        for (let i = 0; i < tokens.length; i++) w.int(tokens[i]!);
        break;
      }
      case "BlockUpdateEvent":
        w.arrayHeader(3);
        w.str(e.type);
        w.str(e.key);
        writeReplicas(w, e.replicas);
        break;
      case "RemoveAllEvent":
        w.arrayHeader(1);
        w.str(e.type);
        break;
    }
  }
  return w.finish();
}

function writeReplicas(w: MsgpackWriter, replicas: readonly MooncakeWireReplica[]): void {
  w.arrayHeader(replicas.length);
  for (const [type, location] of replicas) {
    w.arrayHeader(2);
    w.str(type);
    w.str(location);
  }
}

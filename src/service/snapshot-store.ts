/**
 * The snapshot file of warm restart (docs/index.md, "Warm restart"): loads and checks it
 * at start, writes it every `snapshot.intervalMs` and on graceful shutdown.
 *
 * A write takes the snapshot at one instant (a copy of the index's tables and every
 * stream's last applied batch, taken in steps ordered with the event applies:
 * `capture-in-steps.ts`), then encodes and writes it chunk by
 * chunk, each chunk in its own event-loop turn, so routing and ingest go on meanwhile. The
 * file is replaced atomically: written to `<path>.tmp`, fsynced, renamed over `<path>`,
 * and the directory fsynced. A refused file (damaged, cut short, another version or block
 * size) is logged and left alone; the router then starts cold.
 *
 * The same capture is served to a peer replica (`GET /v1/snapshot`, `export`), which
 * checks it exactly as a file (`check`). Writes and exports take turns (they share the
 * copy buffers); `status` feeds the `kvrouter_snapshot_*` metrics.
 */

import { readFileSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";
import type { SnapshotAccess } from "../index/snapshot-access.js";
import {
  captureSnapshot,
  type DecodedSnapshot,
  decodeSnapshot,
  encodeSnapshot,
  type SavedStream,
  type SnapshotCapture,
} from "../index/snapshot-codec.js";
import type { LogSink } from "../util/log-sink.js";
import { captureInSteps, type StepRunner } from "./capture-in-steps.js";
import { syncDir } from "./sync-dir.js";

/** Most encoding work per event-loop turn, ms (the chunk ends at the next poll after it). */
const SLICE_MS = 3;
export interface SnapshotStoreOptions {
  /** null: no file (no periodic writes, nothing loaded); exports still work. */
  readonly path: string | null;
  readonly intervalMs: number;
  readonly blockSize: number;
  readonly logger: LogSink;
  readonly nowMs?: () => number;
  /**
   * Copy the index in 1 MB steps through the event appliers' queue (the service passes
   * its `applySlicer`): the events wait, routing does not, and no single pause copies the
   * whole ~50 MB. Without it the copy is one synchronous step.
   */
  readonly steps?: StepRunner;
}

export interface SnapshotSource {
  readonly access: SnapshotAccess;
  /** Every stream's record, at the same instant as the index copy. */
  readonly streams: () => SavedStream[];
}

/** Where the start-up index came from, and why not when it is cold. */
export interface SnapshotLoadResult {
  /** `warm`: restored; `cold`: nothing to restore; `refused`: a snapshot failed its checks. */
  readonly result: "warm" | "cold" | "refused";
  readonly source: "file" | "peer" | "none";
  /**
   * warm: `file` | `peer`; cold: `off` | `missing` | `unreadable` | `peer_unreachable`;
   * refused: a `SnapshotRefusal` code (`checksum`, `truncated`, `version`, …).
   */
  readonly reason: string;
}

/** What the metrics read (`telemetry/snapshot-metrics.ts`). */
export interface SnapshotStatus {
  readonly load: SnapshotLoadResult | null;
  readonly writes: number;
  readonly failures: number;
  readonly exports: number;
  /** Copies in steps spoiled by a change outside the event queue (then taken again). */
  readonly spoiledCaptures: number;
  readonly last: SnapshotWrite | null;
  /** Wall-clock ms of the last successful write (null = none yet). */
  readonly lastOkMs: number | null;
}

/** One finished write. */
export interface SnapshotWrite {
  readonly bytes: number;
  /** From the capture to the rename, wall clock. */
  readonly totalMs: number;
  /** The capture (copy of the tables): its longest single step, the longest pause it causes. */
  readonly captureMs: number;
  /** The longest synchronous stretch while encoding one chunk. */
  readonly maxChunkMs: number;
}

export class SnapshotStore {
  readonly #o: SnapshotStoreOptions;
  readonly #source: SnapshotSource;
  #timer: NodeJS.Timeout | null = null;
  #writing: Promise<SnapshotWrite | null> | null = null;
  /** The write or export using the copy buffers now (they take turns). */
  #busy: Promise<unknown> = Promise.resolve();
  #stopped = false;
  /** The last write's figures, for logs and benches. */
  last: SnapshotWrite | null = null;
  #writes = 0;
  #failures = 0;
  #exports = 0;
  #spoiled = 0;
  #lastOkMs: number | null = null;
  #load: SnapshotLoadResult | null = null;

  constructor(options: SnapshotStoreOptions, source: SnapshotSource) {
    this.#o = options;
    this.#source = source;
  }

  /** The snapshot on disk, checked; null (logged, `loadResult` says why) when missing or refused. */
  load(): DecodedSnapshot | null {
    const { path, logger } = this.#o;
    if (path === null) return this.#loaded(null, "none", "off");
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        logger.info({ path }, "no index snapshot yet, starting cold");
        return this.#loaded(null, "none", "missing");
      }
      logger.error({ path, err: String(err) }, "index snapshot unreadable, starting cold");
      return this.#loaded(null, "file", "unreadable");
    }
    return this.check(bytes, "file", path);
  }

  /**
   * Checks a snapshot's bytes (a file's or a peer's) exactly as a file; null (logged) when
   * refused. Records the start-up result.
   */
  check(bytes: Uint8Array, source: "file" | "peer", from: string): DecodedSnapshot | null {
    const d = decodeSnapshot(bytes, this.#o.blockSize);
    if (!d.ok) {
      this.#o.logger.error(
        { source, from, reason: d.reason, detail: d.message },
        `index snapshot ${source === "peer" ? "from peer " : ""}refused, starting cold`,
      );
      this.#load = { result: "refused", source, reason: d.reason };
      return null;
    }
    return this.#loaded(d.snapshot, source, source);
  }

  /** Records a cold start that had nothing to check (`source` tried, `reason`). */
  cold(source: "file" | "peer" | "none", reason: string): void {
    this.#load = { result: "cold", source, reason };
  }

  #loaded(
    snap: DecodedSnapshot | null,
    source: "file" | "peer" | "none",
    reason: string,
  ): DecodedSnapshot | null {
    this.#load = { result: snap === null ? "cold" : "warm", source, reason };
    return snap;
  }

  get loadResult(): SnapshotLoadResult | null {
    return this.#load;
  }

  status(): SnapshotStatus {
    return {
      load: this.#load,
      writes: this.#writes,
      failures: this.#failures,
      exports: this.#exports,
      spoiledCaptures: this.#spoiled,
      last: this.last,
      lastOkMs: this.#lastOkMs,
    };
  }

  /** Writes every `intervalMs` from now on. */
  start(): void {
    if (this.#timer !== null || this.#stopped || this.#o.path === null) return;
    this.#timer = setInterval(() => void this.write(), this.#o.intervalMs);
    this.#timer.unref();
  }

  /** Takes a snapshot now (synchronously); write it with `write(capture)`. */
  capture(): SnapshotCapture {
    const now = this.#o.nowMs ?? Date.now;
    return captureSnapshot(this.#source.access, this.#source.streams(), now());
  }

  /** A snapshot in steps through `steps` (`capture-in-steps.ts`), or at once without it. */
  async #captureInSteps(): Promise<{ readonly cap: SnapshotCapture; readonly longestMs: number }> {
    const runner = this.#o.steps;
    if (runner === undefined) {
      const t0 = performance.now();
      const cap = this.capture();
      return { cap, longestMs: performance.now() - t0 };
    }
    const now = this.#o.nowMs ?? Date.now;
    const r = await captureInSteps(runner, this.#source.access, this.#source.streams, now);
    this.#spoiled += r.spoiled;
    return r;
  }

  /**
   * Takes (or uses `capture`) and writes a snapshot; resolves when the file is in place,
   * null when it failed (logged) or a write is already running.
   */
  write(capture?: SnapshotCapture): Promise<SnapshotWrite | null> {
    const path = this.#o.path;
    if (this.#writing !== null || path === null) return Promise.resolve(null);
    const run = this.#busy
      .then(() => this.#write(path, capture))
      .catch((err: unknown) => {
        // The prefault or the capture threw (the file steps log their own failures).
        this.#o.logger.error({ path, err: String(err) }, "index snapshot write failed");
        this.#failures++;
        return null;
      });
    this.#busy = run; // never rejects: the writes and exports queued after it still run
    this.#writing = run.finally(() => {
      this.#writing = null;
    });
    return this.#writing;
  }

  /** Whether this store writes a file (`snapshot.path` set). */
  get writesFile(): boolean {
    return this.#o.path !== null;
  }

  /**
   * A snapshot taken now, as the file's bytes (same format and checksum), for a peer
   * (`GET /v1/snapshot`). Waits for a write in progress; the next write waits for it.
   * Each chunk is a fresh buffer (the HTTP stream may queue several).
   */
  async *export(): AsyncGenerator<Uint8Array> {
    let release = () => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const before = this.#busy; // never rejects
    this.#busy = before.then(() => mine);
    await before;
    try {
      await this.#prefault();
      let sliceStart = 0;
      const { cap } = await this.#captureInSteps();
      const chunks = encodeSnapshot(cap, {
        sliceOver: () => performance.now() - sliceStart > SLICE_MS,
      });
      for (;;) {
        sliceStart = performance.now();
        const next = chunks.next();
        if (next.done) break;
        yield next.value;
        await new Promise((resolve) => setImmediate(resolve)); // a chunk per turn
      }
      this.#exports++;
    } finally {
      release();
    }
  }

  /** No more periodic writes; waits for a write or export in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    await this.#writing;
    // An export in progress still reads the copy buffers: a capture now would overwrite them.
    await this.#busy;
  }

  /** Maps the capture buffers' pages, 1 MB per event-loop turn. */
  async #prefault(): Promise<void> {
    const STEP = 1 << 18; // words: 1 MB of page faults per turn
    for (const buf of this.#source.access.prepare()) {
      for (let at = 0; at < buf.length; at += STEP) {
        buf.fill(0, at, Math.min(buf.length, at + STEP));
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  async #write(path: string, given?: SnapshotCapture): Promise<SnapshotWrite | null> {
    const { logger } = this.#o;
    const t0 = performance.now();
    let cap = given;
    let captureMs = 0;
    if (cap === undefined) {
      await this.#prefault();
      const taken = await this.#captureInSteps();
      cap = taken.cap;
      captureMs = taken.longestMs;
    }
    const tmp = `${path}.tmp`;
    let bytes = 0;
    let maxChunkMs = 0;
    try {
      const fh = await open(tmp, "w");
      try {
        let sliceStart = 0;
        const chunks = encodeSnapshot(cap, {
          reuse: true, // each chunk is written before the next is made
          sliceOver: () => performance.now() - sliceStart > SLICE_MS,
        });
        for (;;) {
          const c0 = performance.now();
          sliceStart = c0;
          const next = chunks.next();
          maxChunkMs = Math.max(maxChunkMs, performance.now() - c0);
          if (next.done) break;
          await fh.write(next.value);
          bytes += next.value.length;
        }
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, path);
      syncDir(dirname(path));
    } catch (err) {
      logger.error({ path, err: String(err) }, "index snapshot write failed");
      this.#failures++;
      return null;
    }
    const w = { bytes, totalMs: performance.now() - t0, captureMs, maxChunkMs };
    this.last = w;
    this.#writes++;
    this.#lastOkMs = (this.#o.nowMs ?? Date.now)();
    logger.info(
      {
        path,
        bytes,
        streams: cap.streams.length,
        ms: Math.round(w.totalMs),
        captureMs: Math.round(captureMs * 10) / 10,
      },
      "index snapshot written",
    );
    return w;
  }
}

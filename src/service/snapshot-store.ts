/**
 * The snapshot file of warm restart (docs/index.md, "Warm restart"): loads and checks it
 * at start, writes it every `snapshot.intervalMs` and on graceful shutdown.
 *
 * A write takes the snapshot at one instant (a copy of the index's tables and every
 * stream's last applied batch: `captureSnapshot`), then encodes and writes it chunk by
 * chunk, each chunk in its own event-loop turn, so routing and ingest go on meanwhile. The
 * file is replaced atomically: written to `<path>.tmp`, fsynced, renamed over `<path>`,
 * and the directory fsynced. A refused file (damaged, cut short, another version or block
 * size) is logged and left alone; the router then starts cold.
 */

import { closeSync, fsyncSync, openSync, readFileSync } from "node:fs";
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

export interface SnapshotStoreOptions {
  readonly path: string;
  readonly intervalMs: number;
  readonly blockSize: number;
  readonly logger: LogSink;
  readonly nowMs?: () => number;
}

export interface SnapshotSource {
  readonly access: SnapshotAccess;
  /** Every stream's record, at the same instant as the index copy. */
  readonly streams: () => SavedStream[];
}

/** One finished write. */
export interface SnapshotWrite {
  readonly bytes: number;
  /** From the capture to the rename, wall clock. */
  readonly totalMs: number;
  /** The synchronous capture (copy of the tables): the longest single pause it causes. */
  readonly captureMs: number;
  /** The longest synchronous stretch while encoding one chunk. */
  readonly maxChunkMs: number;
}

export class SnapshotStore {
  readonly #o: SnapshotStoreOptions;
  readonly #source: SnapshotSource;
  #timer: NodeJS.Timeout | null = null;
  #writing: Promise<SnapshotWrite | null> | null = null;
  #stopped = false;
  /** The last write's figures, for logs and benches. */
  last: SnapshotWrite | null = null;

  constructor(options: SnapshotStoreOptions, source: SnapshotSource) {
    this.#o = options;
    this.#source = source;
  }

  /** The snapshot on disk, checked; null (logged) when missing or refused. */
  load(): DecodedSnapshot | null {
    const { path, logger } = this.#o;
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") logger.info({ path }, "no index snapshot yet, starting cold");
      else logger.error({ path, err: String(err) }, "index snapshot unreadable, starting cold");
      return null;
    }
    const d = decodeSnapshot(bytes, this.#o.blockSize);
    if (!d.ok) {
      logger.error(
        { path, reason: d.reason, detail: d.message },
        "index snapshot refused, starting cold",
      );
      return null;
    }
    return d.snapshot;
  }

  /** Writes every `intervalMs` from now on. */
  start(): void {
    if (this.#timer !== null || this.#stopped) return;
    this.#timer = setInterval(() => void this.write(), this.#o.intervalMs);
    this.#timer.unref();
  }

  /** Takes a snapshot now (synchronously); write it with `write(capture)`. */
  capture(): SnapshotCapture {
    const now = this.#o.nowMs ?? Date.now;
    return captureSnapshot(this.#source.access, this.#source.streams(), now());
  }

  /**
   * Takes (or uses `capture`) and writes a snapshot; resolves when the file is in place,
   * null when it failed (logged) or a write is already running.
   */
  write(capture?: SnapshotCapture): Promise<SnapshotWrite | null> {
    if (this.#writing !== null) return Promise.resolve(null);
    this.#writing = this.#write(capture).finally(() => {
      this.#writing = null;
    });
    return this.#writing;
  }

  /** No more periodic writes; waits for one in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    await this.#writing;
  }

  /** Maps the capture buffers' pages, 4 MB per event-loop turn. */
  async #prefault(): Promise<void> {
    const STEP = 1 << 20; // words
    for (const buf of this.#source.access.prepare()) {
      for (let at = 0; at < buf.length; at += STEP) {
        buf.fill(0, at, Math.min(buf.length, at + STEP));
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  async #write(given?: SnapshotCapture): Promise<SnapshotWrite | null> {
    const { path, logger } = this.#o;
    const t0 = performance.now();
    if (given === undefined) await this.#prefault();
    const c0 = performance.now();
    const cap = given ?? this.capture();
    const captureMs = performance.now() - c0;
    const tmp = `${path}.tmp`;
    let bytes = 0;
    let maxChunkMs = 0;
    try {
      const fh = await open(tmp, "w");
      try {
        const chunks = encodeSnapshot(cap);
        for (;;) {
          const c0 = performance.now();
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
      return null;
    }
    const w = { bytes, totalMs: performance.now() - t0, captureMs, maxChunkMs };
    this.last = w;
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

/** The rename is durable once the directory is synced (best effort: not on every FS). */
function syncDir(dir: string): void {
  try {
    const fd = openSync(dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename itself is atomic.
  }
}

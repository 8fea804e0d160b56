/**
 * A small pool of worker threads that encode large texts off the event loop. Workers are
 * started on first use and load the model themselves (~0.5 s for Qwen3); until a worker is
 * ready, `tryEncode` answers null and the caller encodes on its own thread. `close()`
 * terminates the workers and fails the jobs still waiting.
 */

import type { Worker } from "node:worker_threads";
import { siblingModule, startWorkerThread } from "../worker-thread.js";
import type { EncodeReply } from "./encode-worker.js";
import { TokenizeError } from "./types.js";

const WORKER_URL = siblingModule(import.meta.url, "encode-worker");

export interface PoolState {
  readonly started: number;
  readonly ready: number;
  readonly jobs: number;
}

interface Slot {
  readonly worker: Worker;
  ready: boolean;
  busy: number;
}

interface Pending {
  resolve(ids: Int32Array[]): void;
  reject(err: Error): void;
}

export class EncodePool {
  readonly #dir: string;
  readonly #size: number;
  readonly #slots: Slot[] = [];
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #jobs = 0;
  #closed = false;

  constructor(dir: string, size: number) {
    this.#dir = dir;
    this.#size = size;
  }

  /** Starts the workers if they are not yet started (they load in the background). */
  warm(): void {
    if (this.#closed) return;
    while (this.#slots.length < this.#size) {
      const worker = startWorkerThread(WORKER_URL, { workerData: { dir: this.#dir } });
      const slot: Slot = { worker, ready: false, busy: 0 };
      worker.on("message", (m: EncodeReply | { ready: true }) => {
        if ("ready" in m) {
          slot.ready = true;
          return;
        }
        slot.busy--;
        const p = this.#pending.get(m.id);
        this.#pending.delete(m.id);
        if ("error" in m) p?.reject(new TokenizeError("bad_request", m.error));
        else p?.resolve(m.ids);
      });
      worker.on("error", (err: unknown) => this.#failAll(err as Error));
      worker.unref();
      this.#slots.push(slot);
    }
  }

  /** Ids of each text from the least busy ready worker, or null when none is ready yet. */
  tryEncode(texts: readonly string[]): Promise<Int32Array[]> | null {
    if (this.#closed) return Promise.reject(new TokenizeError("closed", "tokenizer is closed"));
    this.warm();
    let best: Slot | null = null;
    for (const s of this.#slots) if (s.ready && (best === null || s.busy < best.busy)) best = s;
    if (best === null) return null;
    const slot = best;
    const id = this.#nextId++;
    this.#jobs++;
    slot.busy++;
    slot.worker.ref();
    return new Promise<Int32Array[]>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      slot.worker.postMessage({ id, texts });
    }).finally(() => {
      if (slot.busy === 0) slot.worker.unref();
    });
  }

  #failAll(err: Error): void {
    for (const p of this.#pending.values()) p.reject(new TokenizeError("closed", err.message));
    this.#pending.clear();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#failAll(new Error("tokenizer closed"));
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
    this.#slots.length = 0;
  }

  /** Workers started, how many are ready, and jobs sent to them so far. */
  state(): PoolState {
    return {
      started: this.#slots.length,
      ready: this.#slots.filter((s) => s.ready).length,
      jobs: this.#jobs,
    };
  }
}

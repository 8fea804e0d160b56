/**
 * A small pool of worker threads that tokenize off the event loop: large texts (`tryEncode`)
 * or whole requests (`tryRun`: template, segment cache and encoding all on the worker, so
 * the gateway's event loop keeps only HTTP, routing and ingest). Workers are started on
 * first use (or `warm()`) and load the model themselves (~0.5 s for Qwen3); until a worker
 * is ready, both answer null and the caller tokenizes on its own thread. A request goes to
 * the worker its affinity key names (each worker has its own segment cache, so a
 * conversation's turns should meet the same one). `close()` terminates the workers and
 * fails the jobs still waiting.
 */

import type { Worker } from "node:worker_threads";
import { siblingModule, startWorkerThread } from "../worker-thread.js";
import type { EncodeJob, EncodeReply, EncodeWorkerData, RequestJob } from "./encode-worker.js";
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
  resolve(reply: { ids: Int32Array[]; cached: number }): void;
  reject(err: Error): void;
}

/** A whole request's ids from a worker. */
export interface RunResult {
  readonly ids: Int32Array;
  readonly cached: number;
}

export class EncodePool {
  readonly #data: EncodeWorkerData;
  readonly #size: number;
  readonly #workerUrl: URL;
  readonly #slots: Slot[] = [];
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #jobs = 0;
  #closed = false;

  /** `workerUrl`: the thread's module (default `encode-worker`; tests give a failing one). */
  constructor(data: EncodeWorkerData, size: number, workerUrl: URL = WORKER_URL) {
    this.#data = data;
    this.#size = size;
    this.#workerUrl = workerUrl;
  }

  /** Starts the workers if they are not yet started (they load in the background). */
  warm(): void {
    if (this.#closed) return;
    while (this.#slots.length < this.#size) {
      const worker = startWorkerThread(this.#workerUrl, { workerData: this.#data });
      const slot: Slot = { worker, ready: false, busy: 0 };
      worker.on("message", (m: EncodeReply | { ready: true }) => {
        if ("ready" in m) {
          slot.ready = true;
          return;
        }
        if (--slot.busy === 0) worker.unref();
        const p = this.#pending.get(m.id);
        this.#pending.delete(m.id);
        if ("error" in m) p?.reject(new TokenizeError(m.code ?? "bad_request", m.error));
        else p?.resolve({ ids: m.ids, cached: m.cached ?? 0 });
      });
      // A worker that dies takes its jobs with it (they fail as `closed`: the caller routes
      // them on load alone) and leaves the pool: the next call starts another, and the
      // calls until it is ready tokenize on their own thread instead of waiting forever.
      const lost = (err: Error) => {
        const i = this.#slots.indexOf(slot);
        if (i < 0) return;
        this.#slots.splice(i, 1);
        this.#failAll(err);
      };
      worker.on("error", (err: unknown) => lost(err as Error));
      worker.on("exit", (code) => lost(new Error(`tokenizer thread exited (${code})`)));
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
    return this.#send(best, (id) => ({ id, texts })).then((r) => r.ids);
  }

  /**
   * A whole request tokenized on the worker `affinity` names (the next ready one while it
   * loads), or null when none is ready yet.
   */
  tryRun(request: RequestJob, affinity: number): Promise<RunResult> | null {
    if (this.#closed) return Promise.reject(new TokenizeError("closed", "tokenizer is closed"));
    this.warm();
    const n = this.#slots.length;
    const home = affinity % n;
    let slot: Slot | null = null;
    for (let k = 0; k < n && slot === null; k++) {
      const s = this.#slots[(home + k) % n]!;
      if (s.ready) slot = s;
    }
    if (slot === null) return null;
    return this.#send(slot, (id) => ({ id, request })).then((r) => ({
      ids: r.ids[0]!,
      cached: r.cached,
    }));
  }

  #send(
    slot: Slot,
    job: (id: number) => EncodeJob,
  ): Promise<{ ids: Int32Array[]; cached: number }> {
    const id = this.#nextId++;
    this.#jobs++;
    if (slot.busy++ === 0) slot.worker.ref();
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      slot.worker.postMessage(job(id));
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

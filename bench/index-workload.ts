/**
 * A synthetic but vLLM-shaped KV event stream for the index benchmark: many workers,
 * shared system prompts, multi-turn conversations that branch (forks re-routed to other
 * workers store the shared history there too), and a two-tier cache per worker (GPU, then
 * CPU offload, then eviction) that produces offload placeholders, per-hash removals and
 * re-stores of offloaded blocks. Deterministic for a given seed.
 */

import { type EngineBlockHash, engineHashFromU32Pair } from "../src/protocol/engine-hash.js";
import { type KvEvent, tierOfMedium } from "../src/protocol/events.js";
import { type WorkerKey, workerKey } from "../src/protocol/worker.js";
import { seededRng as rng } from "../src/util/rng.js";

export interface WorkloadOptions {
  readonly workers: number;
  readonly blockSize: number;
  readonly gpuBlocks: number;
  readonly hostBlocks: number;
  readonly systemPrompts: number;
  readonly seed: number;
}

export interface WorkloadEvent {
  readonly worker: WorkerKey;
  readonly event: KvEvent;
}

interface Conversation {
  readonly id: number;
  readonly system: number;
  tokens: Uint32Array;
  length: number;
  /** Engine hash ids of this conversation's blocks after the system prompt, on its worker. */
  readonly blocks: number[];
  tier: "gpu" | "host" | "gone";
  turnsLeft: number;
}

interface Engine {
  readonly key: WorkerKey;
  readonly salt: number;
  /** Hash ids of each system prompt's blocks on this worker, once stored. */
  readonly system: Map<number, number[]>;
  readonly gpuLru: Map<number, Conversation>;
  readonly hostLru: Map<number, Conversation>;
  gpuUsed: number;
  hostUsed: number;
}

const MEDIUM_GPU = "GPU";
const MEDIUM_CPU = "CPU";

export class Workload {
  readonly #o: WorkloadOptions;
  readonly #rand: () => number;
  readonly #engines: Engine[];
  readonly #systemTokens: Uint32Array[];
  readonly #active: { conv: Conversation; engine: Engine }[] = [];
  #nextHash = 1;
  #nextConv = 1;
  /** Blocks carried by stored events with tokens (new or re-stored). */
  storedBlocks = 0;

  constructor(options: WorkloadOptions) {
    this.#o = options;
    this.#rand = rng(options.seed);
    this.#engines = Array.from({ length: options.workers }, (_, i) => ({
      key: workloadWorker(i),
      salt: Math.imul(i + 1, 0x9e3779b1) >>> 0,
      system: new Map(),
      gpuLru: new Map(),
      hostLru: new Map(),
      gpuUsed: 0,
      hostUsed: 0,
    }));
    this.#systemTokens = Array.from({ length: options.systemPrompts }, () =>
      this.#randomTokens(options.blockSize * (16 + Math.floor(this.#rand() * 240))),
    );
  }

  /** Appends the events of about `requests` requests to `out`. */
  generate(requests: number, out: WorkloadEvent[]): void {
    for (let r = 0; r < requests; r++) {
      const cont = this.#active.length > 0 && this.#rand() < 0.6;
      if (cont) this.#continueConversation(out);
      else this.#newConversation(out);
    }
  }

  /** A realistic 8,192-token prompt: a cached conversation's history, then new text. */
  lookupPrompt(tokens: number): Uint32Array {
    const prompt = this.#randomTokens(tokens);
    if (this.#active.length > 0 && this.#rand() < 0.9) {
      const { conv } = this.#active[Math.floor(this.#rand() * this.#active.length)]!;
      const sys = this.#systemTokens[conv.system]!;
      const head = Math.min(tokens, sys.length + conv.length);
      prompt.set(sys.subarray(0, Math.min(head, sys.length)));
      if (head > sys.length) prompt.set(conv.tokens.subarray(0, head - sys.length), sys.length);
    }
    return prompt;
  }

  #newConversation(out: WorkloadEvent[]): void {
    const o = this.#o;
    const n = this.#engines.length;
    const parent = this.#active.length > 0 && this.#rand() < 0.15 ? this.#pickActive() : null;
    // Zipf-like popularity of system prompts; a fork keeps its parent's.
    const system = parent?.conv.system ?? Math.floor(o.systemPrompts * this.#rand() ** 2.5);
    let tokens = new Uint32Array(2048);
    let length = 0;
    let engine = this.#engines[Math.floor(this.#rand() * n)]!;
    if (parent !== null) {
      // A fork (edit / regenerate) of an existing conversation, served by another worker
      // (the same worker would reuse its cached blocks rather than store them again).
      const keep = o.blockSize * Math.floor((parent.conv.length * this.#rand()) / o.blockSize);
      tokens = new Uint32Array(Math.max(2048, keep * 2));
      tokens.set(parent.conv.tokens.subarray(0, keep));
      length = keep;
      const at = this.#engines.indexOf(parent.engine);
      engine = this.#engines[(at + 1 + Math.floor(this.#rand() * (n - 1))) % n]!;
    }
    const conv: Conversation = {
      id: this.#nextConv++,
      system,
      tokens,
      length,
      blocks: [],
      tier: "gpu",
      turnsLeft: 2 + Math.floor(this.#rand() * 8),
    };
    this.#append(conv, 100 + Math.floor(this.#rand() * 1400));
    this.#active.push({ conv, engine });
    this.#serve(engine, conv, out);
  }

  #continueConversation(out: WorkloadEvent[]): void {
    const i = Math.floor(this.#rand() * this.#active.length);
    const { conv, engine } = this.#active[i]!;
    this.#append(conv, 50 + Math.floor(this.#rand() * 750)); // the previous answer
    this.#append(conv, 20 + Math.floor(this.#rand() * 480)); // the next question
    this.#serve(engine, conv, out);
    if (--conv.turnsLeft <= 0 || conv.length > 16_000) {
      // Finished: its blocks stay cached until evicted, its text is no longer needed.
      this.#active[i] = this.#active[this.#active.length - 1]!;
      this.#active.pop();
      conv.tokens = new Uint32Array(0);
    }
  }

  #pickActive(): { conv: Conversation; engine: Engine } {
    return this.#active[Math.floor(this.#rand() * this.#active.length)]!;
  }

  /** The engine runs the conversation's prompt: stores what it does not hold on GPU. */
  #serve(e: Engine, conv: Conversation, out: WorkloadEvent[]): void {
    const bs = this.#o.blockSize;
    let sys = e.system.get(conv.system);
    const sysTokens = this.#systemTokens[conv.system]!;
    if (sys === undefined) {
      sys = Array.from({ length: sysTokens.length / bs }, () => this.#nextHash++);
      e.system.set(conv.system, sys);
      this.#emitStored(out, e, sys, null, sysTokens, MEDIUM_GPU);
    }
    const lastSys = this.#hash(e, sys[sys.length - 1]!);
    // Blocks offloaded to CPU or evicted come back to GPU: same hashes, stored again.
    const reload = conv.tier === "gpu" ? 0 : conv.blocks.length;
    const full = Math.floor(conv.length / bs);
    const fresh = full - conv.blocks.length;
    this.#makeRoom(e, conv, reload + fresh, out);
    if (conv.tier === "host") {
      e.hostLru.delete(conv.id);
      e.hostUsed -= conv.blocks.length;
      this.#removeEach(out, e, conv.blocks, MEDIUM_CPU);
    }
    if (reload > 0) {
      const toks = conv.tokens.subarray(0, reload * bs);
      if (toks.length === reload * bs)
        this.#emitStored(out, e, conv.blocks, lastSys, toks, MEDIUM_GPU);
      else conv.blocks.length = 0; // finished and forgotten: nothing to reload
      e.gpuUsed += conv.blocks.length;
    }
    conv.tier = "gpu";
    const start = conv.blocks.length;
    for (let b = start; b < full; b++) conv.blocks.push(this.#nextHash++);
    if (full > start) {
      const parent = start === 0 ? lastSys : this.#hash(e, conv.blocks[start - 1]!);
      const toks = conv.tokens.subarray(start * bs, full * bs);
      this.#emitStored(out, e, conv.blocks.slice(start), parent, toks, MEDIUM_GPU);
      e.gpuUsed += full - start;
    }
    e.gpuLru.delete(conv.id);
    e.gpuLru.set(conv.id, conv);
  }

  /** Offloads least recently used conversations to CPU, evicting CPU ones as needed. */
  #makeRoom(e: Engine, keep: Conversation, need: number, out: WorkloadEvent[]): void {
    const o = this.#o;
    for (const victim of e.gpuLru.values()) {
      if (e.gpuUsed + need <= o.gpuBlocks) break;
      if (victim === keep) continue;
      e.gpuLru.delete(victim.id);
      const n = victim.blocks.length;
      if (n === 0) continue;
      for (const old of e.hostLru.values()) {
        if (e.hostUsed + n <= o.hostBlocks) break;
        e.hostLru.delete(old.id);
        e.hostUsed -= old.blocks.length;
        this.#removeEach(out, e, old.blocks.slice().reverse(), MEDIUM_CPU);
        old.tier = "gone";
      }
      out.push({ worker: e.key, event: placeholder(victim.blocks.map((h) => this.#hash(e, h))) });
      this.#removeEach(out, e, victim.blocks.slice().reverse(), MEDIUM_GPU);
      e.gpuUsed -= n;
      e.hostUsed += n;
      victim.tier = "host";
      e.hostLru.set(victim.id, victim);
    }
  }

  #emitStored(
    out: WorkloadEvent[],
    e: Engine,
    ids: readonly number[],
    parent: EngineBlockHash | null,
    tokenIds: Uint32Array,
    medium: string,
  ): void {
    this.storedBlocks += ids.length;
    out.push({
      worker: e.key,
      event: {
        type: "stored",
        blockHashes: ids.map((h) => this.#hash(e, h)),
        parentHash: parent,
        tokenIds,
        blockSize: this.#o.blockSize,
        loraId: null,
        loraName: null,
        medium,
        tier: tierOfMedium(medium),
      },
    });
  }

  /** vLLM sends one hash per removal event. */
  #removeEach(out: WorkloadEvent[], e: Engine, ids: readonly number[], medium: string): void {
    for (const h of ids) {
      out.push({
        worker: e.key,
        event: {
          type: "removed",
          blockHashes: [this.#hash(e, h)],
          medium,
          tier: tierOfMedium(medium),
        },
      });
    }
  }

  /** An engine hash as vLLM would send it: 64 well-mixed bits, distinct per worker. */
  #hash(e: Engine, id: number): EngineBlockHash {
    return engineHashFromU32Pair(mix(id ^ e.salt), mix(id));
  }

  #append(conv: Conversation, n: number): void {
    if (conv.length + n > conv.tokens.length) {
      const grown = new Uint32Array(Math.max(conv.tokens.length * 2, conv.length + n));
      grown.set(conv.tokens.subarray(0, conv.length));
      conv.tokens = grown;
    }
    for (let i = 0; i < n; i++) conv.tokens[conv.length + i] = Math.floor(this.#rand() * 128_000);
    conv.length += n;
  }

  #randomTokens(n: number): Uint32Array {
    const t = new Uint32Array(n);
    for (let i = 0; i < n; i++) t[i] = Math.floor(this.#rand() * 128_000);
    return t;
  }
}

function placeholder(hashes: EngineBlockHash[]): KvEvent {
  return {
    type: "stored",
    blockHashes: hashes,
    parentHash: null,
    tokenIds: [],
    blockSize: 0,
    loraId: null,
    loraName: null,
    medium: MEDIUM_CPU,
    tier: "host",
  };
}

function mix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** The key of the workload's worker `i`. */
export function workloadWorker(i: number): WorkerKey {
  return workerKey(`vllm-${String(i).padStart(2, "0")}`);
}

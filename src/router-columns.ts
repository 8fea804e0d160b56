/**
 * The router's decision over a large fleet without an object or a lookup by key per
 * worker: each routable worker's load and overlap are written as numbers into columns
 * (`scheduler/schedule-columns.ts`) and scored in loops; only the candidates the answer
 * explains are built as `CandidateInput` objects, exactly as the full path builds them
 * (`Router`'s reference path, kept: small fleets, `RouterDeps.fullScoring`, fallback).
 *
 * Per routable list (the registry's cached array, one per model) it keeps each worker's
 * `LoadTracker` and `InFlightTracker` handles, valid while the trackers'
 * `entriesVersion` / `removals` are unchanged, and a key → position map used only for
 * the prompt's holders and predicted holders: per worker a decision reads the handles,
 * applies the combining rule into one reused load (`effectiveLoadInto`) and writes six
 * numbers. The per-worker work is the same rules, so the same numbers: the decisions are
 * identical to full scoring (`router-columns.test.ts`).
 */

import type { BlockKeySeq, WorkerMatch } from "./index/types.js";
import {
  effectiveLoad,
  effectiveLoadInto,
  emptyLoad,
  samePrefixPending,
} from "./load/effective-load.js";
import type { InFlightHandle } from "./load/in-flight.js";
import type { LoadHandle } from "./load/load-tracker.js";
import { addTotals } from "./load/predicted-load-source.js";
import type { InFlightTotals, LoadSnapshot, WorkerInfo } from "./load/types.js";
import type { WorkerKey } from "./protocol/worker.js";
import type { OverlapSource, RouterDeps } from "./router-types.js";
import { CandidateColumns, scheduleColumns } from "./scheduler/schedule-columns.js";
import type {
  CandidateInput,
  ScheduleResult,
  SchedulerConfig,
  TierOverlap,
} from "./scheduler/types.js";

/** Handles of one routable list's workers, by position. */
interface FleetHandles {
  readonly loadsVersion: number;
  readonly removals: number;
  readonly load: (LoadHandle | undefined)[];
  readonly flight: InFlightHandle[];
  readonly position: Map<WorkerKey, number>;
}

export interface ColumnRequest {
  readonly routable: readonly WorkerInfo[];
  readonly exclude: ReadonlySet<WorkerKey> | undefined;
  readonly keys: BlockKeySeq;
  readonly matches: readonly WorkerMatch[];
  readonly store: number;
  readonly predicted: ReadonlyMap<WorkerKey, number> | undefined;
  /** Filled like the full path fills it (predicted holders' reported/predicted blocks). */
  readonly sources: Map<WorkerKey, OverlapSource>;
  readonly nowMs: number;
  readonly promptTokens: number;
  readonly promptBlocks: number;
  readonly blockSize: number;
  readonly breakdownLimit: number;
  readonly config: SchedulerConfig;
}

export interface ColumnDecision {
  readonly result: Extract<ScheduleResult, { ok: true }>;
  readonly chosen: WorkerInfo;
}

export class ColumnScorer {
  readonly #d: RouterDeps;
  readonly #handles = new WeakMap<readonly WorkerInfo[], FleetHandles>();
  readonly #cols = new CandidateColumns();
  /** Column → position in the routable list. */
  #at = new Int32Array(0);
  /** Position in the routable list → column (−1 = excluded). */
  #col = new Int32Array(0);
  readonly #load = emptyLoad();

  constructor(deps: RouterDeps) {
    this.#d = deps;
  }

  /** Decisions whose chosen candidate's twin total disagreed after the choice was made. */
  get lateMismatches(): number {
    return this.#cols.lateMismatches;
  }

  /**
   * The decision over `routable` minus `exclude` (at least one left), or null when the
   * column totals disagree with `candidateCost` (nothing drawn from the rng: score in
   * full). Side effects as the full path's: predictions the index confirmed are dropped.
   */
  decide(q: ColumnRequest): ColumnDecision | null {
    const d = this.#d;
    const h = this.#handlesOf(q.routable);
    const routable = q.routable;
    const total = routable.length;
    if (this.#col.length < total) {
      this.#col = new Int32Array(Math.max(total, this.#col.length * 2));
      this.#at = new Int32Array(this.#col.length);
    }
    const col = this.#col;
    const at = this.#at;
    let n = 0;
    const exclude = q.exclude;
    for (let r = 0; r < total; r++) {
      if (exclude !== undefined && exclude.size > 0 && exclude.has(routable[r]!.key)) {
        col[r] = -1;
        continue;
      }
      col[r] = n;
      at[n++] = r;
    }
    const c = this.#cols;
    c.reserve(n);
    const { gpu, host, disk } = c;
    gpu.fill(0, 0, n);
    host.fill(0, 0, n);
    disk.fill(0, 0, n);
    for (const m of q.matches) {
      const r = h.position.get(m.worker);
      if (r === undefined || col[r]! < 0) continue;
      const j = col[r]!;
      gpu[j] = m.gpu;
      host[j] = m.host;
      disk[j] = m.disk;
    }
    // Predicted blocks count as GPU-held (as Router's full path: max with the index).
    if (q.predicted !== undefined) {
      for (const [key, p] of q.predicted) {
        const r = h.position.get(key);
        if (p === 0 || r === undefined || col[r]! < 0) continue;
        const j = col[r]!;
        const reported = gpu[j]!;
        q.sources.set(key, { reportedBlocks: reported, predictedBlocks: p });
        if (reported >= p) d.predicted!.confirm(key, q.keys, p);
        const g = p > reported ? p : reported;
        gpu[j] = g;
        host[j] = Math.max(host[j]!, g);
        disk[j] = Math.max(disk[j]!, g);
      }
    }
    const load = this.#load;
    const loads = d.loads;
    const extra = d.extraLoad;
    const nowMs = q.nowMs;
    for (let j = 0; j < n; j++) {
      const r = at[j]!;
      const w = routable[r]!;
      const lh = h.load[r];
      const stale = loads.isStaleHandle(lh, nowMs);
      const snapshot = stale || lh === undefined ? null : lh.snapshot;
      const fh = h.flight[r]!;
      let all: InFlightTotals = fh.all;
      // Nothing in flight: every total is zero, `since` too (an emptied state is reset).
      let newer = snapshot === null || all.activeRequests === 0 ? all : fh.since(snapshot.atMs);
      if (extra !== undefined) {
        all = addTotals(all, extra.totals(w.key));
        newer = snapshot === null ? all : addTotals(newer, extra.totalsSince(w.key, snapshot.atMs));
      }
      effectiveLoadInto(load, snapshot, all, newer, w.numGpuBlocks);
      c.stale[j] = stale ? 1 : 0;
      c.pending[j] = load.pendingPrefillTokens;
      c.activeBlocks[j] = load.activeBlocks;
      c.waiting[j] = load.waiting;
      const x = load.confirmedKvLoad === undefined ? load.kvLoad : load.confirmedKvLoad;
      c.exclusionLoad[j] = x === null ? Number.NaN : x;
      const held = disk[j]!;
      const same =
        held === 0 ? undefined : samePrefixPending(d.inFlight, w.key, q.keys, held, load, all);
      c.samePrefix[j] = same === undefined ? Number.NaN : same;
    }
    const result = scheduleColumns(
      {
        promptTokens: q.promptTokens,
        promptBlocks: q.promptBlocks,
        blockSize: q.blockSize,
        store: q.store,
        columns: c,
        breakdownLimit: q.breakdownLimit,
        materialise: (j) => this.#materialise(q, h, at[j]!, j),
      },
      q.config,
      d.rng,
    );
    if (result === null) return null;
    return { result, chosen: routable[at[result.chosenIndex]!]! };
  }

  /** Column j (routable position r) as the full path's `CandidateInput`. */
  #materialise(q: ColumnRequest, h: FleetHandles, r: number, j: number): CandidateInput {
    const d = this.#d;
    const w = q.routable[r]!;
    const lh = h.load[r];
    const stale = d.loads.isStaleHandle(lh, q.nowMs);
    const snapshot: LoadSnapshot | null = stale || lh === undefined ? null : lh.snapshot;
    const fh = h.flight[r]!;
    let all: InFlightTotals = fh.all;
    let newer = snapshot === null ? all : fh.since(snapshot.atMs);
    const extra = d.extraLoad;
    if (extra !== undefined) {
      all = addTotals(all, extra.totals(w.key));
      newer = snapshot === null ? all : addTotals(newer, extra.totalsSince(w.key, snapshot.atMs));
    }
    const c = this.#cols;
    const overlap: TierOverlap = {
      gpu: c.gpu[j]!,
      host: c.host[j]!,
      disk: c.disk[j]!,
      store: q.store,
    };
    const load = effectiveLoad(snapshot, all, newer, w.numGpuBlocks);
    const same = samePrefixPending(d.inFlight, w.key, q.keys, overlap.disk, load, all);
    if (same === undefined) return { worker: w.key, overlap, load, stale };
    return { worker: w.key, overlap, load, stale, samePrefixPendingTokens: same };
  }

  #handlesOf(routable: readonly WorkerInfo[]): FleetHandles {
    const d = this.#d;
    const loadsVersion = d.loads.entriesVersion;
    const removals = d.inFlight.removals;
    const cached = this.#handles.get(routable);
    if (
      cached !== undefined &&
      cached.loadsVersion === loadsVersion &&
      cached.removals === removals
    )
      return cached;
    const n = routable.length;
    const load: (LoadHandle | undefined)[] = new Array(n);
    const flight: InFlightHandle[] = new Array(n);
    const position = new Map<WorkerKey, number>();
    for (let r = 0; r < n; r++) {
      const key = routable[r]!.key;
      load[r] = d.loads.handle(key);
      flight[r] = d.inFlight.handle(key);
      position.set(key, r);
    }
    const fresh: FleetHandles = { loadsVersion, removals, load, flight, position };
    this.#handles.set(routable, fresh);
    return fresh;
  }
}

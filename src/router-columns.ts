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
 *
 * Long file: the per-worker cache, the two shapes of the lookup's answer and the building
 * of explained candidates each mirror a piece of the full path (`Router.#candidate`);
 * they are read and changed together with it.
 */

import type { MatchBuffer } from "./index/match-buffer.js";
import type { BlockKeySeq, WorkerMatch } from "./index/types.js";
import {
  effectiveLoadInto,
  emptyLoad,
  type MutableLoad,
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

/**
 * Handles of one routable list's workers, by position, and each one's load numbers as
 * last computed: valid until the trackers report a change of that worker (`watch`) or
 * its staleness by time flips (`staleSince`, checked on every decision).
 */
interface FleetHandles {
  readonly routable: readonly WorkerInfo[];
  readonly loadsVersion: number;
  readonly removals: number;
  readonly load: (LoadHandle | undefined)[];
  readonly flight: InFlightHandle[];
  readonly position: Map<WorkerKey, number>;
  /** Index slot → the key it named when last seen and its position (−1: not routable). */
  readonly slotKeys: (WorkerKey | undefined)[];
  readonly slotPositions: number[];
  /** 1 = the numbers below are current for the worker's tracker state. */
  readonly valid: Uint8Array;
  /** Stale whatever the time (unreachable, or failed before any success). */
  readonly staleAlways: Uint8Array;
  /** Stale once `nowMs - staleSince >= staleAfterMs` (+Infinity: never). */
  readonly staleSince: Float64Array;
  /** The staleness the numbers were computed with. */
  readonly staleUsed: Uint8Array;
  readonly pending: Float64Array;
  readonly activeBlocks: Float64Array;
  readonly waiting: Float64Array;
  readonly exclusionLoad: Float64Array;
}

/** Routable lists whose cached numbers are kept current (more are rebuilt when used). */
const LIVE_LISTS = 8;

export interface ColumnRequest {
  readonly routable: readonly WorkerInfo[];
  readonly exclude: ReadonlySet<WorkerKey> | undefined;
  readonly keys: BlockKeySeq;
  /** The lookup as objects, or (exactly one of the two) in the index's typed arrays. */
  readonly matches: readonly WorkerMatch[] | null;
  readonly buffer: {
    readonly answer: MatchBuffer;
    /** Worker key of a slot in `answer` (`RadixTreeIndex.slotKey`). */
    readonly slotKey: (slot: number) => WorkerKey;
  } | null;
  readonly store: number;
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
  /** Reported GPU depth of the lookup's holders without a column (this decision's). */
  readonly #outside = new Map<WorkerKey, number>();
  /** Workers the trackers reported changed since the last decision (`watch`). */
  readonly #changed = new Set<WorkerKey>();
  #watching = false;
  /** The lists whose cached numbers `#applyChanges` keeps current. */
  #live: FleetHandles[] = [];
  #decisions = 0;
  #auditRepairs = 0;

  constructor(deps: RouterDeps) {
    this.#d = deps;
  }

  /** Decisions whose chosen candidate's twin total disagreed after the choice was made. */
  get lateMismatches(): number {
    return this.#cols.lateMismatches;
  }

  /**
   * Cached load rows found out of date by the periodic audit (every `AUDIT_EVERY`-th
   * decision recomputes every row): a change some tracker did not report. Should be 0;
   * the audit repairs what it finds, so a missed notification costs at most that many
   * decisions.
   */
  get auditRepairs(): number {
    return this.#auditRepairs;
  }

  /**
   * The decision over `routable` minus `exclude` (at least one left), or null when the
   * column totals disagree with `candidateCost` (nothing drawn from the rng: score in
   * full). Side effects as the full path's: predictions the index confirmed are dropped.
   */
  decide(q: ColumnRequest): ColumnDecision | null {
    const d = this.#d;
    if (!this.#watching) {
      d.loads.watch(this.#changed);
      d.inFlight.watch(this.#changed);
      d.extraLoad?.watch?.(this.#changed);
      this.#watching = true;
    }
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
    // Holders without a column (excluded, or not routable for this model): their reported
    // depth still bounds what `matchBeyond` confirms there, as on the full path.
    const outside = this.#outside;
    outside.clear();
    if (q.matches !== null) {
      for (const m of q.matches) {
        const r = h.position.get(m.worker);
        if (r === undefined || col[r]! < 0) {
          outside.set(m.worker, m.gpu);
          continue;
        }
        const j = col[r]!;
        gpu[j] = m.gpu;
        host[j] = m.host;
        disk[j] = m.disk;
      }
    }
    if (q.buffer !== null) {
      // Read as `findMatches` reads it (match-buffer.ts): every first-block holder matches
      // one block, in the tiers its word's bits say; the deep entries say more.
      const b = q.buffer.answer;
      const slotKey = q.buffer.slotKey;
      const first = b.first;
      const at = b.firstAt;
      for (let k = 0; k < b.count; k++) {
        const x = first[at + k]!;
        const r = positionOfSlot(h, x >>> 4, slotKey);
        if (r < 0 || col[r]! < 0) {
          outside.set(slotKey(x >>> 4), x & 1);
          continue;
        }
        const j = col[r]!;
        disk[j] = 1;
        host[j] = (x & 3) !== 0 ? 1 : 0;
        gpu[j] = x & 1;
      }
      for (let k = 0; k < b.deepCount; k++) {
        const r = positionOfSlot(h, b.deepSlot[k]!, slotKey);
        if (r < 0 || col[r]! < 0) {
          outside.set(slotKey(b.deepSlot[k]!), b.deepGpu[k]!);
          continue;
        }
        const j = col[r]!;
        disk[j] = b.deepDisk[k]!;
        host[j] = b.deepHost[k]!;
        gpu[j] = b.deepGpu[k]!;
      }
    }
    // Predicted blocks count as GPU-held, continuing what the index reported (as Router's
    // full path: `matchBeyond`).
    if (d.predicted !== undefined) {
      const predicted = d.predicted.matchBeyond(q.keys, q.nowMs, (key) => {
        const r = h.position.get(key);
        return r === undefined || col[r]! < 0 ? (outside.get(key) ?? 0) : gpu[col[r]!]!;
      });
      for (const [key, p] of predicted) {
        const r = h.position.get(key);
        if (p === 0 || r === undefined || col[r]! < 0) continue;
        const j = col[r]!;
        const reported = gpu[j]!;
        q.sources.set(key, { reportedBlocks: reported, predictedBlocks: p });
        const g = p > reported ? p : reported;
        gpu[j] = g;
        host[j] = Math.max(host[j]!, g);
        disk[j] = Math.max(disk[j]!, g);
      }
    }
    this.#applyChanges();
    const loads = d.loads;
    const staleAfter = loads.staleAfterMs;
    // Other replicas' load from a source that does not report its changes: recomputed on
    // every decision (`RemoteLoadBook` reports them).
    const always = d.extraLoad !== undefined && d.extraLoad.watch === undefined;
    // The cache trusts every change to be reported; now and then, check that it was.
    const audit = !always && ++this.#decisions % AUDIT_EVERY === 0;
    const nowMs = q.nowMs;
    for (let j = 0; j < n; j++) {
      const r = at[j]!;
      const checking = audit && h.valid[r] === 1;
      if (checking) saveRow(h, r);
      const changed = always || audit || h.valid[r] === 0;
      if (changed) {
        const rule = loads.staleRule(h.load[r]);
        h.staleAlways[r] = rule.always ? 1 : 0;
        h.staleSince[r] = rule.since;
      }
      const stale = h.staleAlways[r] === 1 || nowMs - h.staleSince[r]! >= staleAfter;
      const s = stale ? 1 : 0;
      if (changed || h.staleUsed[r] !== s) {
        const load = this.#load;
        this.#loadOf(q, h, r, stale, load);
        h.staleUsed[r] = s;
        h.pending[r] = load.pendingPrefillTokens;
        h.activeBlocks[r] = load.activeBlocks;
        h.waiting[r] = load.waiting;
        const x = load.confirmedKvLoad === undefined ? load.kvLoad : load.confirmedKvLoad;
        h.exclusionLoad[r] = x === null ? Number.NaN : x;
        h.valid[r] = 1;
      }
      if (checking && !sameRow(h, r)) this.#auditRepairs++;
      c.stale[j] = s;
      c.pending[j] = h.pending[r]!;
      c.activeBlocks[j] = h.activeBlocks[r]!;
      c.waiting[j] = h.waiting[r]!;
      c.exclusionLoad[j] = h.exclusionLoad[r]!;
      const held = disk[j]!;
      // Nothing held or nothing queued: no same-prefix share (`samePrefixPending` says
      // undefined for both without looking).
      if (held === 0 || h.pending[r] === 0) c.samePrefix[j] = Number.NaN;
      else {
        // A holder (few per prompt): the queue of its prefix's own requests.
        const load = this.#load;
        const all = this.#loadOf(q, h, r, stale, load);
        const same = samePrefixPending(
          d.inFlight,
          routable[r]!.key,
          q.keys,
          held,
          load,
          all,
          d.extraLoad,
        );
        c.samePrefix[j] = same === undefined ? Number.NaN : same;
      }
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

  /**
   * Worker r's load at `stale` into `out` by the combining rule, as the full path computes
   * it; returns the in-flight totals it used (`all`).
   */
  #loadOf(
    q: ColumnRequest,
    h: FleetHandles,
    r: number,
    stale: boolean,
    out: MutableLoad,
  ): InFlightTotals {
    const d = this.#d;
    const w = q.routable[r]!;
    const lh = h.load[r];
    const snapshot: LoadSnapshot | null = stale || lh === undefined ? null : lh.snapshot;
    const fh = h.flight[r]!;
    let all: InFlightTotals = fh.all;
    // Nothing in flight: every total is zero, `since` too (an emptied state is reset).
    let newer = snapshot === null || all.activeRequests === 0 ? all : fh.since(snapshot.atMs);
    const extra = d.extraLoad;
    if (extra !== undefined) {
      all = addTotals(all, extra.totals(w.key));
      newer = snapshot === null ? all : addTotals(newer, extra.totalsSince(w.key, snapshot.atMs));
    }
    effectiveLoadInto(out, snapshot, all, newer, w.numGpuBlocks);
    return all;
  }

  /** Column j (routable position r) as the full path's `CandidateInput`. */
  #materialise(q: ColumnRequest, h: FleetHandles, r: number, j: number): CandidateInput {
    const d = this.#d;
    const w = q.routable[r]!;
    const stale = d.loads.isStaleHandle(h.load[r], q.nowMs);
    const load = emptyLoad();
    const all = this.#loadOf(q, h, r, stale, load);
    const c = this.#cols;
    const overlap: TierOverlap = {
      gpu: c.gpu[j]!,
      host: c.host[j]!,
      disk: c.disk[j]!,
      store: q.store,
    };
    const same = samePrefixPending(d.inFlight, w.key, q.keys, overlap.disk, load, all, d.extraLoad);
    if (same === undefined) return { worker: w.key, overlap, load, stale };
    return { worker: w.key, overlap, load, stale, samePrefixPendingTokens: same };
  }

  /** Marks the workers the trackers reported changed as to be recomputed. */
  #applyChanges(): void {
    const changed = this.#changed;
    if (changed.size === 0) return;
    for (const h of this.#live) {
      for (const key of changed) {
        const r = h.position.get(key);
        if (r !== undefined) h.valid[r] = 0;
      }
    }
    changed.clear();
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
    const fresh: FleetHandles = {
      routable,
      loadsVersion,
      removals,
      load,
      flight,
      position,
      slotKeys: [],
      slotPositions: [],
      valid: new Uint8Array(n),
      staleAlways: new Uint8Array(n),
      staleSince: new Float64Array(n),
      staleUsed: new Uint8Array(n),
      pending: new Float64Array(n),
      activeBlocks: new Float64Array(n),
      waiting: new Float64Array(n),
      exclusionLoad: new Float64Array(n),
    };
    this.#handles.set(routable, fresh);
    if (cached !== undefined) this.#live = this.#live.filter((x) => x !== cached);
    if (this.#live.length === LIVE_LISTS) {
      // Dropped from the live lists: its numbers would miss changes, so it goes.
      const old = this.#live.shift()!;
      if (this.#handles.get(old.routable) === old) this.#handles.delete(old.routable);
    }
    this.#live.push(fresh);
    return fresh;
  }
}

/**
 * Position in the routable list of the worker in index slot `slot` (−1: not routable).
 * Remembered per slot with the key it named: a slot reused for another worker (the index
 * reuses a cleared worker's slot) is looked up again.
 */
function positionOfSlot(
  h: FleetHandles,
  slot: number,
  slotKey: (slot: number) => WorkerKey,
): number {
  const key = slotKey(slot);
  if (h.slotKeys[slot] === key) return h.slotPositions[slot]!;
  const r = h.position.get(key) ?? -1;
  h.slotKeys[slot] = key;
  h.slotPositions[slot] = r;
  return r;
}

/** Decisions between two audits of the cached load rows. */
const AUDIT_EVERY = 1024;

/** A cached row's numbers, copied for the audit's comparison. */
const ROW = new Float64Array(6);

function saveRow(h: FleetHandles, r: number): void {
  ROW[0] = h.pending[r]!;
  ROW[1] = h.activeBlocks[r]!;
  ROW[2] = h.waiting[r]!;
  ROW[3] = h.exclusionLoad[r]!;
  ROW[4] = h.staleAlways[r]!;
  ROW[5] = h.staleSince[r]!;
}

/** Whether the row still holds the numbers `saveRow` copied (NaN equals NaN). */
function sameRow(h: FleetHandles, r: number): boolean {
  return (
    eq(ROW[0]!, h.pending[r]!) &&
    eq(ROW[1]!, h.activeBlocks[r]!) &&
    eq(ROW[2]!, h.waiting[r]!) &&
    eq(ROW[3]!, h.exclusionLoad[r]!) &&
    eq(ROW[4]!, h.staleAlways[r]!) &&
    eq(ROW[5]!, h.staleSince[r]!)
  );
}

const eq = (a: number, b: number) => a === b || (Number.isNaN(a) && Number.isNaN(b));

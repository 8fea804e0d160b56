/**
 * The gateway: one OpenAI request in, one worker's answer out. Parse the fields it needs,
 * resolve the model (a LoRA adapter: its base model and the workers listing it),
 * tokenize, wait for admission when every candidate is busy, route through the same
 * `Router` as `/v1/route` (open circuits and the last failed worker excluded), forward the
 * client's bytes to the chosen worker and data-parallel rank, and retry on the next best
 * worker until the first body byte arrives. The caller then relays the answer; the
 * request's in-flight record is ended on every path (first byte → first token; end,
 * failure or abort → done), so nothing leaves phantom load.
 *
 * Framework-free: `src/http/gateway-routes.ts` adapts it to fastify.
 *
 * Long file: the stages share one request's state (target model and adapter, request
 * id, last worker, decision, the gateway's own time) and the owners (breakers, queue,
 * metrics); the stages that stand alone already live beside it (`worker-gates`,
 * `prompt-tokens`, `upstream`, `relay`, `usage-scan`, `models`).
 */

import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import { ExponentialBackoff, handleWhen, type IBackoff, type RetryPolicy, retry } from "cockatiel";
import type { Registry } from "prom-client";
import type { GatewayConfig } from "../config/types.js";
import type { InFlightTracker } from "../load/in-flight.js";
import type { LoadTracker } from "../load/load-tracker.js";
import type { WorkerRegistry } from "../load/worker-registry.js";
import type { WorkerKey } from "../protocol/worker.js";
import type { RouteDecision, Router } from "../router.js";
import type { PromptTokenizer } from "../tokenize/types.js";
import type { LogSink } from "../util/log-sink.js";
import { AdmissionQueue } from "./admission.js";
import { type CircuitView, WorkerBreakers } from "./breakers.js";
import { ClientGoneError, GatewayError } from "./errors.js";
import { GatewayMetrics } from "./gateway-metrics.js";
import { ModelCatalog } from "./models.js";
import { PredictionCheck } from "./prediction-check.js";
import { type PromptTokens, tokenizePrompt } from "./prompt-tokens.js";
import { relay, responseHeaders } from "./relay.js";
import { type GatewayKind, type GatewayRequest, parseGatewayRequest } from "./request-body.js";
import { UsageChunkFilter, withIncludeUsage } from "./stream-usage.js";
import { REFUSED_CODES, type UpstreamAnswer, UpstreamClient, UpstreamFailure } from "./upstream.js";
import { UsageScanner } from "./usage-scan.js";
import { WorkerGates } from "./worker-gates.js";

export interface GatewayDeps {
  readonly config: GatewayConfig;
  readonly router: Router;
  readonly registry: WorkerRegistry;
  readonly loads: LoadTracker;
  readonly inFlight: InFlightTracker;
  /** The tokenizer for a model ("" when the request names none); see `GatewayTokenizers`. */
  readonly tokenizerFor: (model: string) => PromptTokenizer;
  /** A worker refused the connection: take it out of the candidates now (`FleetControl`). */
  readonly markUnreachable?: (key: WorkerKey, reason: string) => void;
  readonly logger: LogSink;
  readonly metricsRegistry: Registry;
  readonly nowMs: () => number;
  /** Shared HTTP client (its pooled agent also serves `/v1/models`); made when absent. */
  readonly upstream?: UpstreamClient;
}

/** One client request, as the HTTP layer hands it over. */
export interface GatewayCall {
  readonly kind: GatewayKind;
  /** The parsed JSON body. */
  readonly body: unknown;
  /** The body's bytes, forwarded unchanged. */
  readonly raw: Buffer;
  /** The client's `Authorization` header. */
  readonly authorization: string | undefined;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** `performance.now()` when the body had arrived (before parsing); default: `handle`'s start. */
  readonly receivedAt?: number;
}

/** A committed answer: the worker's first byte is here; `relay` streams the rest. */
export interface GatewayAnswer {
  readonly requestId: string;
  readonly worker: WorkerKey;
  relay(res: ServerResponse): Promise<void>;
}

/** An attempt the worker answered: its first byte is here. */
interface Sent {
  readonly decision: RouteDecision;
  readonly answer: UpstreamAnswer;
  readonly stripUsage: boolean;
  /** `performance.now()` once the request was handed to the HTTP client. */
  readonly sentAt: number;
}

/** Where a request goes: the model to route and tokenize as, and its LoRA adapter. */
interface Target {
  readonly model: string | null;
  /** The adapter the request names (its blocks are keyed under it); null: the base model. */
  readonly lora: string | null;
  /** Only workers at these URLs serve it (those listing the adapter); null: every one. */
  readonly urls: ReadonlySet<string> | null;
}

const PATHS: Record<GatewayKind, string> = {
  completion: "/v1/completions",
  chat: "/v1/chat/completions",
};
const ROUTE_LABEL: Record<GatewayKind, string> = { completion: "completions", chat: "chat" };

export class Gateway {
  readonly #d: GatewayDeps;
  readonly #c: GatewayConfig;
  readonly upstream: UpstreamClient;
  readonly #ownsUpstream: boolean;
  readonly breakers: WorkerBreakers;
  readonly admission: AdmissionQueue;
  readonly metrics: GatewayMetrics;
  readonly #prediction: PredictionCheck;
  readonly #models: ModelCatalog;
  readonly #retry: RetryPolicy;
  readonly #backoff: ExponentialBackoff<unknown>;
  readonly #gates: WorkerGates;
  #relaying = 0;

  constructor(deps: GatewayDeps) {
    this.#d = deps;
    const c = deps.config;
    this.#c = c;
    this.#ownsUpstream = deps.upstream === undefined;
    this.upstream = deps.upstream ?? new UpstreamClient({ connectTimeoutMs: c.connectTimeoutMs });
    this.breakers = new WorkerBreakers({
      failures: c.breakerFailures,
      halfOpenAfterMs: c.breakerHalfOpenAfterMs,
      onChange: (worker, state) => {
        const msg = `circuit of worker ${worker} is ${state.replace("_", "-")}`;
        if (state === "closed") deps.logger.info({ worker, circuit: state }, msg);
        else deps.logger.warn({ worker, circuit: state }, msg);
      },
    });
    this.#gates = new WorkerGates({ ...deps, config: c, breakers: this.breakers });
    this.admission = new AdmissionQueue({ maxSize: c.queueSize, timeoutMs: c.queueTimeoutMs });
    this.metrics = new GatewayMetrics(deps.metricsRegistry, {
      queueDepth: () => this.admission.depth,
      relaying: () => this.#relaying,
      circuits: () => this.breakers.entries(),
    });
    this.#prediction = new PredictionCheck(
      { warnRatio: c.predictionWarnRatio, warnIntervalMs: c.predictionWarnIntervalMs },
      {
        observe: (w, e, o) => this.metrics.observePrediction(w, e, o),
        warned: (w) => this.metrics.predictionWarnings.inc({ worker: w }),
      },
      deps.logger,
    );
    this.#models = new ModelCatalog(this.upstream.agent);
    // Attempts after the first, with decorrelated jitter (cockatiel's default generator).
    // The backoff is waited out in `#attempts`, where a client leaving cuts it short
    // (cockatiel's own delay cannot be aborted).
    this.#retry = retry(
      handleWhen((e) => e instanceof UpstreamFailure),
      {
        maxAttempts: c.maxAttempts - 1,
      },
    );
    this.#backoff = new ExponentialBackoff({
      initialDelay: c.retryBackoffMs,
      maxDelay: Math.max(1, c.retryBackoffMs * 40),
    });
  }

  /** Circuit of a worker (by id), for `/v1/workers`. */
  circuit(workerId: string): CircuitView {
    return this.breakers.view(workerId);
  }

  /** `Authorization` sent to workers: the configured key, else the client's own header. */
  workerAuthorization(clientHeader: string | undefined): string | null {
    if (this.#c.workerApiKey !== null) return `Bearer ${this.#c.workerApiKey}`;
    if (this.#c.authToken === null && clientHeader !== undefined) return clientHeader;
    return null;
  }

  /** `GET /v1/models`. */
  models(authorization: string | undefined) {
    const seen = new Set<string>();
    const sources = this.#d.registry.list().filter((w) => {
      if (w.kind === "mooncake-store" || seen.has(w.workerId)) return false;
      seen.add(w.workerId);
      return true;
    });
    return this.#models.list(sources, this.workerAuthorization(authorization));
  }

  /**
   * Take a request up to the worker's first byte. Throws `GatewayError` (answer it) or
   * `ClientGoneError` (answer nothing).
   */
  async handle(call: GatewayCall): Promise<GatewayAnswer> {
    const t0 = call.receivedAt ?? performance.now();
    /** Time not the gateway's own: tokenization, queueing, failed attempts (ms). */
    const away = { ms: 0 };
    const label = ROUTE_LABEL[call.kind];
    const outcome = (o: string) => this.metrics.requests.inc({ route: label, outcome: o });
    let req: GatewayRequest;
    let target: Target;
    try {
      req = parseGatewayRequest(call.kind, call.body);
      const t = this.#target(req.model, call.authorization);
      target = t instanceof Promise ? await t : t;
    } catch (err) {
      // No worker for the model, or none registered at all: not the client's body.
      const noWorker =
        err instanceof GatewayError &&
        (err.code === "model_not_found" || err.code === "no_worker_available");
      outcome(noWorker ? "no_worker" : "invalid");
      throw err;
    }
    try {
      // Token ids need no tokenizer: no await, nothing measured before the request is sent.
      let tokens: PromptTokens;
      if (req.prompt?.kind === "tokens") tokens = { ids: req.prompt.tokens, real: true };
      else {
        const ta = performance.now();
        const { tokenizerFor, logger } = this.#d;
        tokens = await tokenizePrompt(
          req,
          target.model,
          tokenizerFor,
          this.metrics,
          logger,
          call.raw,
        );
        away.ms += performance.now() - ta;
      }
      if (call.signal.aborted) throw new ClientGoneError("client gone");
      if (!this.#admitNow(target)) {
        const qa = performance.now();
        await this.#admit(target, call.signal);
        away.ms += performance.now() - qa;
      }
      const sent = await this.#attempts(call, req, target, tokens, away);
      const ownBeforeMs = sent.sentAt - t0 - away.ms;
      return this.#commit(label, tokens.real, sent, t0, ownBeforeMs, req.prompt?.kind);
    } catch (err) {
      if (err instanceof ClientGoneError || call.signal.aborted) {
        outcome("aborted");
        throw err instanceof ClientGoneError ? err : new ClientGoneError("client gone");
      }
      if (err instanceof GatewayError) {
        outcome(
          err.code === "rate_limited" || err.code === "shutting_down"
            ? "rejected"
            : err.code === "no_worker_available"
              ? "no_worker"
              : "upstream_error",
        );
      }
      throw err;
    }
  }

  /**
   * What the request's `model` names: a model some worker serves (declared with it, or
   * declared without a model: synchronous, as before), else a LoRA adapter some workers
   * list in their `/v1/models` — routed to those only, tokenized as its base model and
   * keyed under the adapter's chain, as the engine keys its blocks. Adapters are found
   * only when the workers are declared with their model: a worker declared without one
   * takes any name as its own.
   */
  #target(model: string | null, authorization: string | undefined): Target | Promise<Target> {
    if (model === null || this.#d.registry.routable(model).length > 0) {
      return { model, lora: null, urls: null };
    }
    return this.#adapterTarget(model, authorization);
  }

  async #adapterTarget(model: string, authorization: string | undefined): Promise<Target> {
    const reg = this.#d.registry;
    const urls = reg.routable(null).map((w) => w.url);
    if (urls.length === 0) {
      throw new GatewayError("no_worker_available", "no routable worker is registered");
    }
    const a = await this.#models.adapter(model, urls, this.workerAuthorization(authorization));
    if (a !== null) return { model: a.parent, lora: model, urls: a.urls };
    throw new GatewayError(
      "model_not_found",
      `the model '${model}' does not exist: no registered worker serves it or lists it as a LoRA adapter (GET /v1/models lists them)`,
      "model",
    );
  }

  /**
   * Admitted without waiting: no busy threshold set, or nobody queued for the model, no
   * waiter of another key able to go now, and one of its candidates free.
   */
  #admitNow(target: Target): boolean {
    if (!this.#gates.enabled) return true;
    return (
      this.admission.mayPass(queueKey(target)) && !this.#gates.allBusy(target.model, target.urls)
    );
  }

  async #admit(target: Target, signal: AbortSignal): Promise<void> {
    const c = this.#c;
    const r = await this.admission.admit(
      () => this.#gates.allBusy(target.model, target.urls),
      signal,
      queueKey(target),
    );
    if (r.ok) {
      if (r.waitedMs > 0) this.metrics.queueWait.observe(r.waitedMs / 1000);
      return;
    }
    if (r.reason === "aborted") throw new ClientGoneError("client gone while queued");
    if (r.reason === "closed") {
      throw new GatewayError(
        "shutting_down",
        "the router is shutting down; retry on another instance",
      );
    }
    this.metrics.queueRejections.inc({ reason: r.reason });
    const retryAfterS = Math.max(1, Math.ceil(Math.min(c.queueTimeoutMs, 10_000) / 1000));
    throw new GatewayError(
      "rate_limited",
      r.reason === "full"
        ? `every worker is busy and ${this.admission.depth} requests are already queued (gateway.queueSize); retry later`
        : `every worker stayed busy for ${c.queueTimeoutMs} ms (gateway.queueTimeoutMs); retry later`,
      null,
      retryAfterS,
    );
  }

  async #attempts(
    call: GatewayCall,
    req: GatewayRequest,
    target: Target,
    tokens: PromptTokens,
    away: { ms: number },
  ): Promise<Sent> {
    const d = this.#d;
    const requestId = `gw-${randomUUID()}`;
    const forward = this.#forwardBody(call, req);
    let lastWorker: string | null = null;
    const tried = new Set<string>();
    let lastFailure: UpstreamFailure | null = null;
    let attempt = 0;
    let attemptAt = performance.now();
    let backoff: IBackoff<unknown> | null = null;
    const once = async (): Promise<Sent> => {
      if (attempt > 0 && !call.signal.aborted) {
        const next: IBackoff<unknown> =
          backoff === null ? this.#backoff.next() : backoff.next(undefined);
        backoff = next;
        await abortableDelay(next.duration, call.signal);
      }
      if (call.signal.aborted) throw new ClientGoneError("client gone");
      // Failed attempts and backoff are the workers' time, not the gateway's.
      if (attempt > 0) away.ms += performance.now() - attemptAt;
      attemptAt = performance.now();
      attempt++;
      const nowMs = d.nowMs();
      // Workers this request already failed on are avoided while others remain; the
      // last one never gets it twice in a row.
      const route = (avoid: (workerId: string) => boolean) => {
        const exclude = new Set<WorkerKey>();
        const only = target.urls;
        for (const w of d.registry.routable(target.model)) {
          if (
            avoid(w.workerId) ||
            this.#gates.down(w, nowMs) ||
            (only !== null && !only.has(w.url))
          ) {
            exclude.add(w.key);
          }
        }
        return d.router.route(
          {
            tokenIds: tokens.ids,
            requestId,
            exclude,
            ...(target.model === null ? {} : { model: target.model }),
            ...(target.lora === null ? {} : { loraName: target.lora }),
            ...(req.cacheSalt === null ? {} : { cacheSalt: req.cacheSalt }),
          },
          nowMs,
        );
      };
      let routed = route((id) => tried.has(id));
      if (!routed.ok && routed.error.code === "all_excluded" && tried.size > 1) {
        routed = route((id) => id === lastWorker);
      }
      if (!routed.ok) {
        if (lastFailure !== null) throw this.#exhausted(lastFailure, attempt - 1);
        throw new GatewayError("no_worker_available", routed.error.message);
      }
      // Counted once there is a worker to send it to.
      if (attempt > 1) this.metrics.retries.inc();
      const decision = routed.decision;
      lastWorker = decision.workerId;
      tried.add(decision.workerId);
      const url = `${decision.url.replace(/\/$/, "")}${PATHS[req.kind]}`;
      const headers = this.#forwardHeaders(call, decision);
      let sentAt = 0;
      try {
        // Same synchronous step as the decision: a trial request half-opens the circuit
        // before anyone else can be routed to the worker.
        const answer = await this.breakers.execute(decision.workerId, () => {
          const posting = this.upstream.post(
            url,
            headers,
            forward.body,
            { firstByteMs: this.#c.firstByteTimeoutMs, idleMs: this.#c.idleTimeoutMs },
            call.signal,
          );
          sentAt = performance.now();
          return posting;
        });
        // The "ok" attempt is counted once the first byte is on its way (`#commit`).
        return { decision, answer, stripUsage: forward.stripUsage, sentAt };
      } catch (err) {
        // The engine did not take it (refused, 5xx/429, no first byte in time): what
        // predict-on-route recorded for it there is taken back (docs/prediction.md).
        if (err instanceof UpstreamFailure) d.router.withdrawPrediction(requestId);
        d.inFlight.done(requestId, d.nowMs());
        this.admission.notify();
        if (err instanceof UpstreamFailure) {
          lastFailure = err;
          if (err.kind === "connect" && REFUSED_CODES.has(err.code)) {
            this.#unreachable(decision.workerId, err.message);
          }
          const result =
            err.kind === "status" ? (err.status === 429 ? "status_429" : "status_5xx") : err.kind;
          this.metrics.attempts.inc({ worker: decision.worker, result });
          d.logger.warn(
            { requestId, worker: decision.worker, attempt, failure: err.kind, status: err.status },
            `attempt ${attempt} failed: ${err.message}`,
          );
        }
        throw err;
      }
    };
    try {
      return await this.#retry.execute(once);
    } catch (err) {
      if (err instanceof UpstreamFailure) throw this.#exhausted(err, attempt);
      throw err;
    }
  }

  /** Nothing listens at the worker's URL: every rank of it leaves the candidates now. */
  #unreachable(workerId: string, reason: string): void {
    const mark = this.#d.markUnreachable;
    if (mark === undefined) return;
    for (const w of this.#d.registry.list()) {
      if (w.workerId === workerId) mark(w.key, `gateway: ${reason}`);
    }
  }

  #exhausted(last: UpstreamFailure, attempts: number): GatewayError {
    return new GatewayError(
      last.kind === "timeout" ? "upstream_timeout" : "upstream_error",
      `no worker answered after ${attempts} attempt(s); last: ${last.message}`,
    );
  }

  /**
   * The client's bytes, plus `stream_options.include_usage` on a stream that did not ask
   * for usage (`gateway.streamUsage`): the prediction check needs the final usage chunk,
   * which the relay then removes from the client's stream.
   */
  #forwardBody(call: GatewayCall, req: GatewayRequest): { body: Buffer; stripUsage: boolean } {
    if (!this.#c.streamUsage || !req.stream || req.includeUsage) {
      return { body: call.raw, stripUsage: false };
    }
    const added = withIncludeUsage(call.raw, call.body as Record<string, unknown>);
    return added === null
      ? { body: call.raw, stripUsage: false }
      : { body: added, stripUsage: true };
  }

  #forwardHeaders(call: GatewayCall, d: RouteDecision): Record<string, string> {
    const h: Record<string, string> = {
      "content-type": "application/json",
      "x-data-parallel-rank": String(d.dpRank),
      "x-request-id": d.requestId,
    };
    const auth = this.workerAuthorization(call.authorization);
    if (auth !== null) h.authorization = auth;
    return h;
  }

  #commit(
    label: string,
    /** Whether the ids routed on were the real prompt (else the prediction check is moot). */
    realTokens: boolean,
    sent: Sent,
    t0: number,
    ownBeforeMs: number,
    promptKind: string | undefined,
  ): GatewayAnswer {
    const { decision, answer, stripUsage } = sent;
    const d = this.#d;
    const id = decision.requestId;
    this.#relaying++;
    const ct = answer.headers["content-type"];
    const sse = typeof ct === "string" && ct.includes("text/event-stream");
    const filtered = stripUsage && sse && answer.status === 200;
    const upstreamHeaders = filtered
      ? { ...answer.headers, "content-length": undefined }
      : answer.headers;
    const headers = responseHeaders(upstreamHeaders, {
      "x-kvrouter-worker": decision.worker,
      "x-kvrouter-cached-tokens": String(decision.cachedTokens),
      "x-kvrouter-request-id": id,
    });
    const scanner =
      answer.status === 200 ? new UsageScanner(typeof ct === "string" ? ct : undefined) : null;
    // An error the client gets as it is (a 4xx: the engine refused the request) cached
    // nothing there: the prediction made for it is taken back.
    if (answer.status >= 400) d.router.withdrawPrediction(id);
    let relayed = false;
    return {
      requestId: id,
      worker: decision.worker,
      relay: async (res) => {
        if (relayed) throw new Error("relay called twice");
        relayed = true;
        // The filtered body is shorter than the worker's: its content-length was dropped.
        const filter = filtered ? new UsageChunkFilter() : null;
        const ownMs = ownBeforeMs + (performance.now() - answer.firstAt);
        // W3C Server-Timing, after the worker's own entries if it sent any.
        const timing = `kvrouter;dur=${ownMs.toFixed(3)}`;
        const theirs = headers["server-timing"];
        headers["server-timing"] = theirs === undefined ? timing : `${String(theirs)}, ${timing}`;
        // `relay` writes the head and the first chunk before it returns: the bookkeeping
        // of the first byte comes after it, off the path the client waits on.
        const ending = relay(res, answer, headers, scanner, filter);
        this.metrics.firstByte.observe((performance.now() - t0) / 1000);
        this.metrics.own.observe(ownMs / 1000);
        d.inFlight.firstToken(id, d.nowMs());
        this.admission.notify();
        this.metrics.attempts.inc({ worker: decision.worker, result: "ok" });
        if (promptKind === "tokens") this.metrics.tokenize.observe({ mode: "tokens" }, 0);
        const end = await ending;
        d.inFlight.done(id, d.nowMs());
        this.admission.notify();
        this.#relaying--;
        const outcome =
          end.kind === "client_gone"
            ? "aborted"
            : end.kind === "upstream_error"
              ? "upstream_error"
              : answer.status >= 400
                ? "client_error"
                : "ok";
        this.metrics.requests.inc({ route: label, outcome });
        if (end.kind === "client_gone") this.metrics.upstreamAborts.inc({ reason: "client_gone" });
        if (end.kind === "upstream_error") {
          this.metrics.upstreamAborts.inc({ reason: "upstream_error" });
          d.logger.warn(
            { requestId: id, worker: decision.worker, err: end.error.message },
            "worker's answer failed after the first byte",
          );
        }
        if (end.kind !== "complete" || scanner === null || !realTokens) return;
        const usage = scanner.result();
        // The engine counted a different prompt: the ids the router keyed are not the
        // engine's (tokenizer, chat template, special tokens), so no block can match.
        if (usage?.promptTokens != null && usage.promptTokens !== decision.promptTokens) {
          this.metrics.promptLengthMismatches.inc({ worker: decision.worker });
        }
        if (usage?.cachedTokens == null) return;
        this.#prediction.record({
          worker: decision.worker,
          // What the engines' events said (not predict-on-route's guesses): the check is
          // about whether the index tracks the engines (docs/prediction.md).
          predicted: reportedCachedTokens(decision),
          actual: usage.cachedTokens,
          promptTokens: usage.promptTokens ?? decision.promptTokens,
          blockSize: decision.blockSize,
        });
      },
    };
  }

  /**
   * The shutdown drain has started: refuse what waits in the admission queue, and what
   * would queue from now on (503 `shutting_down`), so no connection stays open on it.
   */
  drain(): void {
    this.admission.close();
  }

  /** Refuse queued requests and close idle upstream connections. */
  async close(): Promise<void> {
    this.admission.close();
    if (this.#ownsUpstream) await this.upstream.close();
  }
}

/** A request's admission-queue key: its candidates (a model, or an adapter's workers). */
function queueKey(t: Target): string | null {
  return t.lora === null ? t.model : `${t.model ?? ""}\u0000${t.lora}`;
}

/** The chosen worker's overlap as its engine reported it (the index), in tokens. */
function reportedCachedTokens(d: RouteDecision): number {
  const i = d.candidates.findIndex((c) => c.worker === d.worker);
  const reported = i < 0 ? undefined : d.overlapSources?.[i]?.reportedBlocks;
  return reported === undefined ? d.cachedTokens : Math.min(d.cachedTokens, reported * d.blockSize);
}

/** Wait `ms`, or less if `signal` aborts first (the caller checks which). */
function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

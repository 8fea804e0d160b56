/**
 * The gateway's Prometheus instruments (`kvrouter_gateway_*`), on the app's registry.
 * Queue depth, circuit states and requests being relayed are read at scrape time from
 * their owners; the rest is recorded as requests go.
 */

import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { CircuitName, CircuitView } from "./breakers.js";
import type { PredictionOutcome } from "./prediction-check.js";

const SECONDS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
/** Signed: engine's cached tokens minus the router's prediction. */
const ERROR_TOKENS = [-8192, -2048, -512, -128, -32, -16, 0, 16, 32, 128, 512, 2048, 8192];
const CIRCUIT_VALUE: Record<CircuitName, number> = { closed: 0, open: 1, half_open: 2 };

export interface GatewayGaugeSources {
  readonly queueDepth: () => number;
  readonly relaying: () => number;
  readonly circuits: () => Iterable<readonly [string, CircuitView]>;
}

export class GatewayMetrics {
  readonly requests: Counter<"route" | "outcome">;
  readonly attempts: Counter<"worker" | "result">;
  readonly retries: Counter;
  readonly firstByte: Histogram;
  readonly own: Histogram;
  readonly tokenize: Histogram<"mode">;
  readonly tokenizeFailures: Counter<"reason">;
  readonly tokenizeOnEventLoop: Counter;
  readonly queueWait: Histogram;
  readonly queueRejections: Counter<"reason">;
  readonly predictionError: Histogram;
  readonly predictionChecks: Counter<"worker" | "outcome">;
  readonly predictionWarnings: Counter<"worker">;
  readonly upstreamAborts: Counter<"reason">;
  readonly promptLengthMismatches: Counter<"worker">;

  constructor(registry: Registry, sources: GatewayGaugeSources) {
    const registers = [registry];
    this.requests = new Counter({
      name: "kvrouter_gateway_requests_total",
      help: "OpenAI requests by route and outcome (ok, client_error, upstream_error, rejected, aborted, invalid, no_worker)",
      labelNames: ["route", "outcome"],
      registers,
    });
    this.attempts = new Counter({
      name: "kvrouter_gateway_attempts_total",
      help: "Attempts to reach a worker before the first byte, by result (ok, connect, timeout, status_5xx, status_429)",
      labelNames: ["worker", "result"],
      registers,
    });
    this.retries = new Counter({
      name: "kvrouter_gateway_retries_total",
      help: "Attempts after the first one (a failed worker was replaced by the next best)",
      registers,
    });
    this.firstByte = new Histogram({
      name: "kvrouter_gateway_first_byte_seconds",
      help: "From the request's arrival to the worker's first body byte (queueing, tokenization, retries included)",
      buckets: SECONDS,
      registers,
    });
    this.own = new Histogram({
      name: "kvrouter_gateway_own_seconds",
      help: "The gateway's own time on a request's path to its first byte: parsing, routing and sending before the worker, handing its first byte on after it (tokenization, queueing and failed attempts excluded; the server-timing header's value)",
      buckets: [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025],
      registers,
    });
    this.tokenize = new Histogram({
      name: "kvrouter_gateway_tokenize_seconds",
      help: "Tokenization time per request, by mode (local = model files in-process, remote = a worker's /tokenize, tokens = ids given by the client)",
      labelNames: ["mode"],
      buckets: SECONDS,
      registers,
    });
    this.tokenizeOnEventLoop = new Counter({
      name: "kvrouter_gateway_tokenize_event_loop_total",
      help: "Requests a local tokenizer tokenized on the event loop instead of its worker thread: the thread had more queued than its budget, had not loaded yet, or gateway.tokenizerThreads is 0",
      registers,
    });
    this.tokenizeFailures = new Counter({
      name: "kvrouter_gateway_tokenize_failures_total",
      help: "Requests routed on load alone, by reason (batch_prompt, or the tokenizer's error code: timeout, unreachable, http_status, bad_response, bad_request, closed)",
      labelNames: ["reason"],
      registers,
    });
    this.queueWait = new Histogram({
      name: "kvrouter_gateway_queue_wait_seconds",
      help: "Time admitted requests waited in the admission queue",
      buckets: SECONDS,
      registers,
    });
    this.queueRejections = new Counter({
      name: "kvrouter_gateway_queue_rejections_total",
      help: "Requests refused with 429 because every candidate was busy (reason: full, timeout)",
      labelNames: ["reason"],
      registers,
    });
    this.predictionError = new Histogram({
      name: "kvrouter_gateway_prediction_error_tokens",
      help: "Engine-reported cached prompt tokens minus the router's prediction (negative: over-predicted)",
      buckets: ERROR_TOKENS,
      registers,
    });
    this.predictionChecks = new Counter({
      name: "kvrouter_gateway_prediction_checks_total",
      help: "Prediction checks per worker: match (within one block), over (router predicted more), under",
      labelNames: ["worker", "outcome"],
      registers,
    });
    this.predictionWarnings = new Counter({
      name: "kvrouter_gateway_prediction_warnings_total",
      help: "Warnings logged because a worker's predictions were consistently wrong",
      labelNames: ["worker"],
      registers,
    });
    this.promptLengthMismatches = new Counter({
      name: "kvrouter_gateway_prompt_length_mismatches_total",
      help: "Answers whose usage.prompt_tokens differs from the token count the router keyed (tokenizer or chat template not the engine's)",
      labelNames: ["worker"],
      registers,
    });
    this.upstreamAborts = new Counter({
      name: "kvrouter_gateway_upstream_aborts_total",
      help: "Answers cut after the first byte (reason: client_gone, upstream_error, idle_timeout)",
      labelNames: ["reason"],
      registers,
    });
    new Gauge({
      name: "kvrouter_gateway_queue_depth",
      help: "Requests waiting in the admission queue",
      registers,
      collect() {
        this.set(sources.queueDepth());
      },
    });
    new Gauge({
      name: "kvrouter_gateway_relaying",
      help: "Requests being forwarded or relayed right now",
      registers,
      collect() {
        this.set(sources.relaying());
      },
    });
    new Gauge({
      name: "kvrouter_gateway_circuit_state",
      help: "Per-worker circuit: 0 closed, 1 open, 2 half-open",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const [id, v] of sources.circuits()) this.set({ worker: id }, CIRCUIT_VALUE[v.state]);
      },
    });
    new Gauge({
      name: "kvrouter_gateway_circuit_opens",
      help: "Times each worker's circuit opened",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const [id, v] of sources.circuits()) this.set({ worker: id }, v.opens);
      },
    });
  }

  observePrediction(worker: string, errorTokens: number, outcome: PredictionOutcome): void {
    this.predictionError.observe(errorTokens);
    this.predictionChecks.inc({ worker, outcome });
  }
}

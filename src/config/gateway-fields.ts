/**
 * The `gateway` section's settings (the OpenAI-compatible endpoint, `docs/gateway.md`):
 * timeouts, retries, circuit breaker, admission queue, prediction check. Kept beside
 * `fields.ts`, which includes it, so the gateway's dozen keys do not crowd the table.
 */

const DAY_MS = 86_400_000;

export const GATEWAY_FIELDS = {
  enabled: {
    kind: "bool",
    default: true,
    doc: "serve /v1/completions, /v1/chat/completions and /v1/models (forward to the chosen worker)",
  },
  authToken: {
    kind: "optional-string",
    default: null,
    doc: "bearer token clients must send on the OpenAI routes (unset = open)",
  },
  workerApiKey: {
    kind: "optional-string",
    default: null,
    doc: "sent to workers as `Authorization: Bearer <key>` (vLLM's --api-key); unset = the client's header passes through when gateway.authToken is unset",
  },
  connectTimeoutMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 2000,
    doc: "give up connecting to a worker after this long (retried elsewhere)",
  },
  firstByteTimeoutMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 120_000,
    doc: "give up on a worker that sent no body byte after this long (retried elsewhere); covers queueing and prefill",
  },
  idleTimeoutMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 60_000,
    doc: "abort an answer with no bytes for this long after the first one",
  },
  maxAttempts: {
    kind: "int",
    min: 1,
    max: 10,
    default: 3,
    doc: "workers tried per request before the first byte (1 = no retry)",
  },
  retryBackoffMs: {
    kind: "int",
    min: 0,
    max: 60_000,
    default: 25,
    doc: "initial backoff between attempts (decorrelated jitter, doubling, capped at 40×)",
  },
  breakerFailures: {
    kind: "int",
    min: 1,
    max: 1000,
    default: 5,
    doc: "consecutive failures (connect, timeout, 5xx) that open a worker's circuit",
  },
  breakerHalfOpenAfterMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 5000,
    doc: "an open circuit lets one trial request through after this long",
  },
  busyWaiting: {
    kind: "int",
    min: 0,
    max: 1_000_000,
    default: 64,
    doc: "a worker with this many waiting requests (scraped + predicted) is busy; 0 = rule off",
  },
  busyKvUsage: {
    kind: "number",
    min: 0,
    max: 10,
    default: 0.98,
    doc: "a worker whose KV load (0..1, predicted blocks included) reaches this is busy; 0 = rule off",
  },
  busyPrefillTokens: {
    kind: "int",
    min: 0,
    max: 1_000_000_000,
    default: 0,
    doc: "a worker with this many predicted uncached prefill tokens pending is busy; 0 = rule off",
  },
  queueSize: {
    kind: "int",
    min: 0,
    max: 1_000_000,
    default: 1024,
    doc: "requests held while every candidate is busy; beyond it 429 (0 = reject at once)",
  },
  queueTimeoutMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 30_000,
    doc: "a queued request not admitted within this long gets 429",
  },
  tokenizers: {
    kind: "optional-string",
    default: null,
    doc: "local tokenizers, `MODEL=DIR` pairs separated by commas (a bare `DIR` serves every other model); DIR holds the model's tokenizer.json + tokenizer_config.json, as given to vLLM's --tokenizer. Models without one tokenize through a worker's /tokenize",
  },
  tokenizerThreads: {
    kind: "int",
    min: 0,
    max: 64,
    default: 1,
    doc: "worker threads per local tokenizer: each request is tokenized whole (chat template, segment cache, encoding) on one of them, off the event loop, a conversation's turns always on the same one; 0 = on the event loop",
  },
  tokenizeTimeoutMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 2000,
    doc: "timeout of a worker /tokenize call (models without a local tokenizer); on failure the request is routed on load alone",
  },
  streamUsage: {
    kind: "bool",
    default: true,
    doc: "ask workers for the final usage chunk of streams whose client did not (for the prediction check) and remove it from what the client receives",
  },
  predictionWarnRatio: {
    kind: "number",
    min: 0,
    max: 1,
    default: 0.5,
    doc: "warn when this fraction of a worker's recent prediction checks is off by more than one block",
  },
  predictionWarnIntervalMs: {
    kind: "int",
    min: 1,
    max: DAY_MS,
    default: 60_000,
    doc: "at most one prediction warning per worker per this interval",
  },
} as const;

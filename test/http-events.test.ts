/**
 * `POST /v1/workers/:id/events` on real HTTP (port 0): pushed batches reach the index
 * (checked with `/v1/match`), a skipped event id clears the worker (counted), a lower one
 * is a restart, a retried batch is a duplicate, and bad bodies get a 4xx naming the field.
 */

import { describe, expect, it } from "vitest";
import { startsClosedAfterEach, type TestService, tokens, workers } from "./http-harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON read in assertions only
type Json = any;

const start = startsClosedAfterEach();
const TOKEN = "t0ken";
const BS = 4;

interface Svc {
  readonly s: TestService;
  readonly base: string;
}

async function service(extraWorkers: Record<string, unknown>[] = []): Promise<Svc> {
  const s = await start({
    index: { blockSize: BS },
    workers: [...workers(2, { dpSize: 2 }), ...extraWorkers],
    server: { authToken: TOKEN },
  });
  await s.app.listen({ host: "127.0.0.1", port: 0 });
  const a = s.app.server.address();
  if (a === null || typeof a === "string") throw new Error("not listening");
  return { s, base: `http://127.0.0.1:${a.port}` };
}

async function call(svc: Svc, path: string, body: unknown, auth = true, method = "POST") {
  const res = await fetch(`${svc.base}${path}`, {
    method,
    headers: {
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...(auth ? { authorization: `Bearer ${TOKEN}` } : {}),
    },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, Json> };
}

const push = (svc: Svc, worker: string, body: unknown, auth = true) =>
  call(svc, `/v1/workers/${worker}/events`, body, auth);

/** A stored event of the blocks of `toks` from the root, hashes `first`, `first+1`, … */
function stored(toks: number[], first: number, parent: number | string | null = null) {
  const blocks = toks.length / BS;
  return {
    type: "BlockStored",
    block_hashes: Array.from({ length: blocks }, (_, i) => first + i),
    parent_block_hash: parent,
    token_ids: toks,
    block_size: BS,
    lora_name: null,
    medium: "GPU",
  };
}

/** Blocks of `toks` that worker `id` rank 0 holds on GPU, as `/v1/match` reports them. */
async function held(svc: Svc, id: string, toks: number[], rank = 0): Promise<number> {
  const res = await call(svc, "/v1/match", { token_ids: toks });
  expect(res.status).toBe(200);
  const w = res.body.workers.find((x: { worker: string }) => x.worker === `${id}#${rank}`);
  return w === undefined ? 0 : w.overlap_blocks.gpu;
}

async function stream(svc: Svc, id: string, rank = 0) {
  const res = await fetch(`${svc.base}/v1/workers/${id}`);
  return ((await res.json()) as Json).ranks[rank].stream;
}

const A = tokens(8, 0);
const B = tokens(8, 100);

describe("POST /v1/workers/:id/events", () => {
  it("applies batches in order: stored, removed, cleared, per DP rank", async () => {
    const svc = await service();
    const r0 = await push(svc, "w0", { event_id: 0, dp_rank: 0, events: [stored(A, 1)] });
    expect(r0).toEqual({
      status: 200,
      body: {
        worker: "w0#0",
        event_id: 0,
        outcome: "applied",
        reset: null,
        gap: null,
        last_event_id: 0,
      },
    });
    expect(await held(svc, "w0", A)).toBe(2);
    // 64-bit hashes as decimal strings, signed or not; a child chained on block 2.
    const child = stored(tokens(4, 8), 0);
    child.block_hashes = ["-9223372036854775808" as unknown as number];
    child.parent_block_hash = 2;
    const r1 = await push(svc, "w0", { event_id: 1, events: [child] });
    expect(r1.body.outcome).toBe("applied");
    expect(await held(svc, "w0", tokens(12, 0))).toBe(3);
    await push(svc, "w0", {
      event_id: 2,
      events: [{ type: "BlockRemoved", block_hashes: [2], medium: "GPU" }],
    });
    expect(await held(svc, "w0", A)).toBe(1);
    // Rank 1 is its own stream, with its own event ids.
    await push(svc, "w0", { event_id: 0, dp_rank: 1, events: [stored(B, 50)] });
    expect(await held(svc, "w0", B, 1)).toBe(2);
    await push(svc, "w0", { event_id: 3, events: [{ type: "AllBlocksCleared" }] });
    expect(await held(svc, "w0", A)).toBe(0);
    expect(await held(svc, "w0", B, 1)).toBe(2);
    expect(await stream(svc, "w0")).toMatchObject({
      endpoint: "http",
      connected: true,
      current: true,
      last_seq: "3",
      batches: 4,
      gaps: 0,
      events: { "stored/applied": 2, "removed/applied": 1, "cleared/applied": 1 },
    });
  });

  it("a skipped event id clears the worker (counted), then applies the batch", async () => {
    const svc = await service();
    await push(svc, "w0", { event_id: 0, events: [stored(A, 1)] });
    const r = await push(svc, "w0", { event_id: 3, events: [stored(B, 10)] });
    expect(r.body).toMatchObject({
      outcome: "applied",
      reset: "unfilled_gap",
      gap: { from: 1, to: 2 },
      last_event_id: 3,
    });
    expect(await held(svc, "w0", A)).toBe(0); // what batches 1..2 did is unknown: cleared
    expect(await held(svc, "w0", B)).toBe(2);
    const st = await stream(svc, "w0");
    expect(st.gaps).toBe(1);
    expect(st.resets.unfilled_gap).toBe(1);
    const metrics = await (await fetch(`${svc.base}/metrics`)).text();
    expect(metrics).toMatch(
      /reason="unfilled_gap"[^\n]*worker="w0#0"[^\n]* 1|worker="w0#0"[^\n]*reason="unfilled_gap"[^\n]* 1/,
    );
  });

  it("a lower event id is an engine restart: the worker is cleared first", async () => {
    const svc = await service();
    await push(svc, "w0", { event_id: 0, events: [stored(A, 1)] });
    await push(svc, "w0", { event_id: 1, events: [stored(tokens(4, 8), 3, 2)] });
    const r = await push(svc, "w0", { event_id: 0, events: [stored(B, 10)] });
    expect(r.body).toMatchObject({ outcome: "applied", reset: "restart", last_event_id: 0 });
    expect(await held(svc, "w0", A)).toBe(0);
    expect(await held(svc, "w0", B)).toBe(2);
    expect((await stream(svc, "w0")).resets.restart).toBe(1);
  });

  it("a restarted engine repeating its predecessor's batch 0 is a restart, not a retry", async () => {
    // An engine whose first batch after a restart is the same as before (a deterministic
    // warm-up request, deterministic block hashes): B came from the old process only.
    const svc = await service();
    await push(svc, "w0", { event_id: 0, events: [stored(A, 1)] });
    await push(svc, "w0", { event_id: 1, events: [stored(B, 10)] });
    const r = await push(svc, "w0", { event_id: 0, events: [stored(A, 1)] });
    expect(r.body).toMatchObject({ outcome: "applied", reset: "restart", last_event_id: 0 });
    expect(await held(svc, "w0", B)).toBe(0);
    expect(await held(svc, "w0", A)).toBe(2);
  });

  it("a batch sent again (a retry) is a duplicate: dropped, nothing cleared", async () => {
    const svc = await service();
    const first = { event_id: 0, events: [stored(A, 1)] };
    const second = { event_id: 1, events: [stored(B, 10)] };
    await push(svc, "w0", first);
    await push(svc, "w0", second);
    for (const again of [second, second]) {
      const r = await push(svc, "w0", again);
      expect(r.body).toMatchObject({ outcome: "duplicate", reset: null, last_event_id: 1 });
    }
    expect(await held(svc, "w0", A)).toBe(2);
    expect(await held(svc, "w0", B)).toBe(2);
    const st = await stream(svc, "w0");
    expect(st).toMatchObject({ duplicates: 2, batches: 2 });
    expect(st.resets.restart).toBe(0);
  });

  it("a worker removed and added again starts a fresh stream", async () => {
    const svc = await service();
    await push(svc, "w1", { event_id: 0, events: [stored(A, 1)] });
    await push(svc, "w1", { event_id: 1, events: [stored(B, 10)] });
    expect((await call(svc, "/v1/workers/w1", undefined, true, "DELETE")).status).toBe(200);
    const add = await call(svc, "/v1/workers", {
      id: "w1",
      url: "http://127.0.0.1:9101",
      metrics_url: null,
    });
    expect(add.status).toBe(201);
    const r = await push(svc, "w1", { event_id: 0, events: [stored(B, 10)] });
    expect(r.body).toMatchObject({ outcome: "applied", reset: null, last_event_id: 0 });
    expect(await held(svc, "w1", A)).toBe(0);
    expect(await held(svc, "w1", B)).toBe(2);
  });

  it("refuses bad bodies with a 4xx naming the field, and applies nothing", async () => {
    const svc = await service([
      {
        id: "z",
        url: "http://127.0.0.1:9300",
        metricsUrl: null,
        eventsEndpoint: "tcp://127.0.0.1:1",
      },
    ]);
    const ok = { event_id: 0, events: [stored(A, 1)] };
    const cases: [unknown, number, string, RegExp][] = [
      [{ events: [] }, 400, "invalid_request", /body.*event_id/],
      [{ ...ok, event_id: -1 }, 400, "invalid_request", /body\/event_id/],
      [
        { ...ok, events: [{ ...stored(A, 1), token_ids: [1, 2, 3] }] },
        400,
        "invalid_request",
        /body\/events\/0\/token_ids has 3 tokens/,
      ],
      [
        { ...ok, events: [{ ...stored(A, 1), block_hashes: [2 ** 60, 1] }] },
        400,
        "invalid_request",
        /body\/events\/0\/block_hashes\/0 is not a safe integer/,
      ],
      [
        { ...ok, events: [{ ...stored(A, 1), block_hashes: ["18446744073709551616", "1"] }] },
        400,
        "invalid_request",
        /block_hashes\/0 does not fit 64 bits/,
      ],
      [
        { ...ok, events: [{ ...stored(A, 1), parent_block_hash: undefined }] },
        400,
        "invalid_request",
        /body\/events\/0\/parent_block_hash is required/,
      ],
      [
        { ...ok, events: [{ type: "BlockRemoved", block_hashes: [1], token_ids: [1] }] },
        400,
        "invalid_request",
        /body\/events\/0\/token_ids is not a field of a BlockRemoved/,
      ],
      [
        { ...ok, events: [{ type: "BlockEvicted" }] },
        400,
        "invalid_request",
        /body\/events\/0\/type/,
      ],
      [{ ...ok, events: [{ ...stored(A, 1), extra: 1 }] }, 400, "invalid_request", /extra/],
      [
        { ...ok, dp_rank: 2 },
        400,
        "invalid_request",
        /body\/dp_rank is 2 but worker w0 has dp_size 2/,
      ],
      [
        { ...ok, events: [{ ...stored(A, 1), block_hashes: [[1], [2]] }] },
        400,
        "json_too_deep",
        /deeper than 4/,
      ],
      ["{", 400, "invalid_json", /not valid JSON/],
    ];
    for (const [body, status, code, message] of cases) {
      const r = await push(svc, "w0", body);
      expect({ status: r.status, code: r.body.error?.code }, JSON.stringify(body)).toEqual({
        status,
        code,
      });
      expect(r.body.error.message).toMatch(message);
    }
    expect(await held(svc, "w0", A)).toBe(0);
    expect(await stream(svc, "w0")).toBeNull(); // no batch reached a stream

    expect((await push(svc, "w0", ok, false)).body.error.code).toBe("unauthorized");
    expect((await push(svc, "nope", ok)).body.error.code).toBe("worker_not_found");
    const z = await push(svc, "z", ok);
    expect(z.status).toBe(409);
    expect(z.body.error).toMatchObject({ code: "events_over_zmq" });
    expect(z.body.error.message).toMatch(/tcp:\/\/127\.0\.0\.1:1/);
  });
});

describe("pushed streams and predict-on-route", () => {
  it("an AllBlocksCleared pushed over HTTP drops the worker's predictions", async () => {
    // Health loop every 25 ms (a quarter of recoverAfterMs); predictions live a minute.
    const s = await start({
      index: { blockSize: BS },
      workers: workers(1),
      server: { authToken: TOKEN },
      predict: { ttlMs: 60_000, recoverAfterMs: 100 },
    });
    await s.app.listen({ host: "127.0.0.1", port: 0 });
    const a = s.app.server.address();
    if (a === null || typeof a === "string") throw new Error("not listening");
    const svc = { s, base: `http://127.0.0.1:${a.port}` };
    const predictedBlocks = async () => {
      const text = await (await fetch(`${svc.base}/metrics`)).text();
      return Number(/^kvrouter_predicted_blocks (\d+)$/m.exec(text)?.[1]);
    };
    const settle = () => new Promise((r) => setTimeout(r, 150));
    await push(svc, "w0", { event_id: 0, events: [stored(B, 50)] });
    await settle(); // the loop has seen the stream
    const routed = await call(svc, "/v1/route", { token_ids: A, request_id: "r1" });
    expect(routed.body.worker.key).toBe("w0#0");
    expect(await predictedBlocks()).toBe(2);
    await push(svc, "w0", { event_id: 1, events: [{ type: "AllBlocksCleared" }] });
    const deadline = Date.now() + 2_000;
    while ((await predictedBlocks()) !== 0 && Date.now() < deadline) await settle();
    expect(await predictedBlocks()).toBe(0);
  });
});

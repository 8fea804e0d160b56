/**
 * `PUT /v1/workers/:id/load` with Dynamo's `ForwardPassMetrics` body, flat or nested as
 * Dynamo serialises it, beside today's body; bad mixes get a 400 naming the field.
 */

import { describe, expect, it } from "vitest";
import { startsClosedAfterEach, workers } from "./http-harness.js";

const start = startsClosedAfterEach();
const TOKEN = "t0ken";
const auth = { authorization: `Bearer ${TOKEN}` };

async function put(payload: unknown, id = "w0") {
  const s = await start({ workers: workers(1, { dpSize: 2 }), server: { authToken: TOKEN } });
  const res = await s.app.inject({
    method: "PUT",
    url: `/v1/workers/${id}/load`,
    headers: auth,
    payload: payload as Record<string, unknown>,
  });
  return { status: res.statusCode, body: res.json(), s };
}

const WORKER = { request_active_slots: 3, request_total_slots: 64, num_requests_waiting: 2 };
const KV = { kv_active_blocks: 250, kv_total_blocks: 1000, gpu_prefix_cache_hit_rate: 0.4 };

describe("PUT /v1/workers/:id/load with ForwardPassMetrics", () => {
  it("takes the flat shape: usage from active/total blocks, capacity from the total", async () => {
    const r = await put({ ...WORKER, ...KV });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      worker: "w0#0",
      load: {
        state: "fresh",
        source: "push",
        running: 3,
        waiting: 2,
        kv_usage: 0.25,
        num_gpu_blocks: 1000,
      },
    });
  });

  it("takes Dynamo's nested shape, its data_parallel_rank and gpu_cache_usage_perc", async () => {
    const r = await put({
      worker_stats: { ...WORKER, data_parallel_rank: 1 },
      kv_stats: { ...KV, gpu_cache_usage_perc: 0.3 },
      spec_decode_stats: null,
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      worker: "w0#1",
      load: { running: 3, waiting: 2, kv_usage: 0.3, num_gpu_blocks: 1000 },
    });
  });

  it("still takes today's body", async () => {
    const r = await put({ running: 1, waiting: 0, kv_usage: 0.5 });
    expect(r.status).toBe(200);
    expect(r.body.load).toMatchObject({ running: 1, kv_usage: 0.5 });
  });

  it.each([
    [{ ...WORKER, running: 1 }, "body/running cannot be mixed with ForwardPassMetrics fields"],
    [{ num_requests_waiting: 0, ...KV }, "body/request_active_slots is required"],
    [{ ...WORKER, kv_active_blocks: 1 }, "body/gpu_cache_usage_perc is required unless both"],
    [
      { ...WORKER, kv_active_blocks: 5, kv_total_blocks: 4 },
      "body/kv_active_blocks is 5, more than kv_total_blocks 4",
    ],
    [{ ...WORKER, kv_active_blocks: 0, kv_total_blocks: 0 }, "body/kv_total_blocks is 0"],
    [
      { worker_stats: WORKER, kv_stats: { kv_total_blocks: 4 } },
      "body/kv_stats/gpu_cache_usage_perc is required",
    ],
    [
      { worker_stats: WORKER, kv_stats: KV, num_requests_waiting: 1 },
      "body/num_requests_waiting cannot be sent beside",
    ],
    [
      { worker_stats: { ...WORKER, data_parallel_rank: 1 }, kv_stats: KV, dp_rank: 0 },
      "body/dp_rank is 0 but data_parallel_rank is 1",
    ],
    [
      { worker_stats: { ...WORKER, data_parallel_rank: 2 }, kv_stats: KV },
      "body/dp_rank is 2 but worker w0 has dp_size 2",
    ],
    [
      { worker_stats: { ...WORKER, extra: 1 }, kv_stats: KV },
      "body/worker_stats/extra is not an accepted property",
    ],
    [{ ...WORKER, gpu_cache_usage_perc: 1.5 }, "body/gpu_cache_usage_perc must be <= 1"],
  ])("%j → 400", async (payload, message) => {
    const r = await put(payload);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.message).toContain(message);
  });
});

/**
 * LoRA adapters through the gateway: a request whose `model` is an adapter one worker
 * lists in its `/v1/models` (vLLM's card: the adapter's name, its base model as parent)
 * goes only to that worker, is tokenized as the base model, and is keyed under the
 * adapter's chain as the engine caches it — so the engine's `cached_tokens` on a repeat
 * equals what the index reported (prediction check "match"), and the index holds the
 * blocks under the adapter, not under the base model. An unknown name stays a 404.
 */

import { describe, expect, it } from "vitest";
import { metricValue, simEntry, startGateway, startSim, until } from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const cleanup = closersAfterEach();

const prompt = (seed: number) =>
  Array.from({ length: 160 }, (_, i) => 700 + ((seed * 7919 + i * 104729) % 30000));

async function fleet() {
  const a = await startSim(["--lora", "sql-lora"]);
  cleanup.push(() => a.close());
  const b = await startSim();
  cleanup.push(() => b.close());
  const gw = await startGateway({ workers: [simEntry("a", a), simEntry("b", b)] });
  cleanup.push(() => gw.close());
  return gw;
}

async function complete(url: string, body: Record<string, unknown>) {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ max_tokens: 2, ...body }),
  });
  return { res, body: (await res.json()) as { model?: string; error?: { code?: string } } };
}

async function matchOn(url: string, tokens: number[], lora: string | null, worker: string) {
  const r = await fetch(`${url}/v1/match`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token_ids: tokens, ...(lora === null ? {} : { lora_name: lora }) }),
  });
  const body = (await r.json()) as {
    workers: { worker: string; overlap_blocks: { gpu: number } }[];
  };
  return body.workers.find((w) => w.worker === worker)?.overlap_blocks.gpu ?? 0;
}

describe("gateway: LoRA adapters", () => {
  it("an adapter's requests go to the workers listing it, keyed under the adapter", async () => {
    const gw = await fleet();
    for (let i = 0; i < 6; i++) {
      const { res, body } = await complete(gw.url, { model: "sql-lora", prompt: prompt(i) });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-kvrouter-worker")).toBe("a#0");
      expect(body.model).toBe("sql-lora");
    }
    // The engine's events land under the adapter's chain: found with the adapter's name,
    // not as the base model's blocks.
    const p = prompt(0);
    await until("events applied", async () => (await matchOn(gw.url, p, "sql-lora", "a#0")) > 0);
    expect(await matchOn(gw.url, p, "sql-lora", "a#0")).toBe(p.length / 16);
    expect(await matchOn(gw.url, p, null, "a#0")).toBe(0);
    // A repeat: the engine's cached tokens are what the index reported for the gateway's
    // keys (under "sql-lora"), so the prediction check matches.
    const { res } = await complete(gw.url, { model: "sql-lora", prompt: p });
    expect(res.status).toBe(200);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const check = (outcome: string) =>
      metricValue(metrics, "kvrouter_gateway_prediction_checks_total", { worker: "a#0", outcome });
    expect(check("under")).toBe(0);
    expect(check("over")).toBe(0);
    expect(check("match")).toBe(7);
    // The adapter is listed beside the base model, as vLLM lists it.
    const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as {
      data: { id: string }[];
    };
    expect(models.data.map((m) => m.id)).toEqual(["sim-model", "sql-lora"]);
  });

  it("the base model still goes anywhere; an unknown name is a 404 naming the field", async () => {
    const gw = await fleet();
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const { res } = await complete(gw.url, { model: "sim-model", prompt: prompt(100 + i) });
      expect(res.status).toBe(200);
      seen.add(res.headers.get("x-kvrouter-worker") ?? "");
    }
    expect(seen.has("b#0")).toBe(true);
    const { res, body } = await complete(gw.url, { model: "no-such-lora", prompt: prompt(1) });
    expect(res.status).toBe(404);
    expect(body.error?.code).toBe("model_not_found");
  });
});

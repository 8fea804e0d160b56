/**
 * `cache_salt` on `/v1/match` and `/v1/route`: blocks an engine cached under a salt
 * match only requests that name the same salt (docs/block-keys.md, "Extra keys").
 */

import { afterEach, describe, expect, it } from "vitest";
import { keyableStored } from "../src/ingest/extra-keys.js";
import { workerKey } from "../src/protocol/worker.js";
import {
  startTestService,
  storedFromRoot,
  type TestService,
  tokens,
  workers,
} from "./http-harness.js";

let svc: TestService | null = null;
afterEach(async () => {
  await svc?.close();
  svc = null;
});

describe("cache_salt", () => {
  it("matches salted blocks only for the same salt", async () => {
    svc = await startTestService({ workers: workers(2) });
    const prompt = tokens(64);
    const salted = { ...storedFromRoot(prompt, 16, 1000), cacheSalt: "tenant-a" };
    svc.index.applyEvent(workerKey("w0"), keyableStored(salted)!);
    const match = async (body: Record<string, unknown>) => {
      const res = await svc!.app.inject({ method: "POST", url: "/v1/match", payload: body });
      expect(res.statusCode).toBe(200);
      const w0 = res.json().workers.find((w: { id: string }) => w.id === "w0");
      return w0?.overlap_blocks.gpu ?? 0;
    };
    expect(await match({ token_ids: prompt })).toBe(0);
    expect(await match({ token_ids: prompt, cache_salt: "tenant-b" })).toBe(0);
    expect(await match({ token_ids: prompt, cache_salt: "tenant-a" })).toBe(4);
    const route = await svc.app.inject({
      method: "POST",
      url: "/v1/route",
      payload: { token_ids: prompt, cache_salt: "tenant-a", request_id: "r1" },
    });
    expect(route.json()).toMatchObject({ worker: { id: "w0" }, overlap_blocks: 4 });
    const bad = await svc.app.inject({
      method: "POST",
      url: "/v1/match",
      payload: { token_ids: prompt, cache_salt: 7 },
    });
    expect(bad.statusCode).toBe(400);
  });
});

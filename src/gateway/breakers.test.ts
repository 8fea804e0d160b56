import { describe, expect, it } from "vitest";
import { WorkerBreakers } from "./breakers.js";
import { ClientGoneError } from "./errors.js";
import { UpstreamFailure } from "./upstream.js";

const refused = () => Promise.reject(new UpstreamFailure("connect", "refused", null, true));
const busy = () => Promise.reject(new UpstreamFailure("status", "HTTP 429", 429, false));
const ok = () => Promise.resolve("ok");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("WorkerBreakers", () => {
  it("opens after consecutive failures (not 429s), allows one trial after the delay, closes on success", async () => {
    const changes: string[] = [];
    const b = new WorkerBreakers({
      failures: 2,
      halfOpenAfterMs: 250,
      onChange: (w, s) => changes.push(`${w}:${s}`),
    });
    await expect(b.execute("a", refused)).rejects.toThrow("refused");
    await expect(b.execute("a", busy)).rejects.toThrow("429");
    await expect(b.execute("a", ok)).resolves.toBe("ok"); // a success resets the count
    await expect(b.execute("a", refused)).rejects.toThrow();
    expect(b.allows("a")).toBe(true);
    await expect(b.execute("a", refused)).rejects.toThrow();
    expect(b.view("a")).toMatchObject({ state: "open", consecutive_failures: 2, opens: 1 });
    expect(b.allows("a")).toBe(false);
    expect(b.allows("b")).toBe(true);
    await sleep(300);
    expect(b.allows("a")).toBe(true);
    let release: () => void = () => {};
    const trial = b.execute("a", () => new Promise<string>((r) => (release = () => r("ok"))));
    expect(b.state("a")).toBe("half_open");
    expect(b.allows("a")).toBe(false); // nobody else while the trial runs
    release();
    await expect(trial).resolves.toBe("ok");
    expect(b.view("a")).toMatchObject({
      state: "closed",
      consecutive_failures: 0,
      opened_at_ms: null,
    });
    expect(changes).toEqual(["a:open", "a:half_open", "a:closed"]);
  });

  it("a trial the client abandoned does not close the circuit", async () => {
    const b = new WorkerBreakers({ failures: 1, halfOpenAfterMs: 20 });
    await expect(b.execute("a", refused)).rejects.toThrow();
    await sleep(30);
    await expect(b.execute("a", () => Promise.reject(new ClientGoneError("gone")))).rejects.toThrow(
      "gone",
    );
    expect(b.state("a")).toBe("open");
    // Outside a trial, a client leaving says nothing either way.
    const c = new WorkerBreakers({ failures: 1, halfOpenAfterMs: 20 });
    await expect(
      c.execute("x", () => Promise.reject(new ClientGoneError("gone"))),
    ).rejects.toThrow();
    expect(c.state("x")).toBe("closed");
  });
});

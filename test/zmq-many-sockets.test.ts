/**
 * A router following more than 1,023 engines needs more sockets than libzmq's default
 * context allows; past it, socket creation failed and (inside the decode thread) the
 * process aborted. Run in a fresh process: the limit is fixed by the first socket of a
 * process, and other tests may already have opened one in this one.
 */

import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("ZeroMQ socket capacity", () => {
  it("a process that loads the subscriber can open 1,500 SUB sockets", () => {
    const script = `
      await import("./src/ingest/kv-event-subscriber.ts");
      const { Subscriber } = await import("zeromq");
      const socks = [];
      try {
        for (let i = 0; i < 1500; i++) socks.push(new Subscriber({ linger: 0 }));
        console.log("opened " + socks.length);
      } catch (err) {
        console.log("failed at " + socks.length + ": " + err.message);
      } finally {
        for (const s of socks) s.close();
      }`;
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    expect(run.stdout.trim()).toBe("opened 1500");
  });
});

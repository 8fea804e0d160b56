import { describe, expect, it } from "vitest";
import { UsageChunkFilter, withIncludeUsage } from "./stream-usage.js";

describe("withIncludeUsage", () => {
  it("splices include_usage into the client's bytes, nothing else changed", () => {
    const raw = Buffer.from(' {"model":"m",  "stream":true,"prompt":"é"}');
    const out = withIncludeUsage(raw, JSON.parse(raw.toString()));
    expect(out?.toString()).toBe(
      ' {"stream_options":{"include_usage":true},"model":"m",  "stream":true,"prompt":"é"}',
    );
    expect(JSON.parse(out!.toString())).toEqual({
      ...JSON.parse(raw.toString()),
      stream_options: { include_usage: true },
    });
  });

  it("leaves bodies it would have to rewrite", () => {
    const raw = Buffer.from('{"stream_options":{"include_usage":false}}');
    expect(withIncludeUsage(raw, JSON.parse(raw.toString()))).toBeNull();
    expect(withIncludeUsage(Buffer.from(" { } "), {})).toBeNull();
  });
});

describe("UsageChunkFilter", () => {
  const events = [
    'data: {"choices":[{"text":"héllo"}],"usage":null}\n\n',
    'data: {"choices":[{"text":"","finish_reason":"length"}]}\n\n',
    'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3}}\n\n',
    "data: [DONE]\n\n",
  ];
  const stream = Buffer.from(events.join(""));
  const expected = Buffer.from([events[0], events[1], events[3]].join(""));

  it("drops the usage-only chunk and passes every other byte, wherever the stream is cut", () => {
    for (let cut = 1; cut < stream.length; cut += 7) {
      const f = new UsageChunkFilter();
      const out = Buffer.concat([
        f.push(stream.subarray(0, cut)),
        f.push(stream.subarray(cut)),
        f.flush(),
      ]);
      expect(out.equals(expected), `cut at ${cut}`).toBe(true);
    }
  });

  it("passes a chunk of whole events without usage on as the same buffer, undecoded", () => {
    const f = new UsageChunkFilter();
    const chunk = Buffer.from(events[1]! + events[3]!);
    expect(f.push(chunk)).toBe(chunk);
    // A character cut in two inside a held-back event comes out whole.
    const e = Buffer.from(events[0]!);
    const cut = e.indexOf("é") + 1;
    const out = Buffer.concat([f.push(e.subarray(0, cut)), f.push(e.subarray(cut)), f.flush()]);
    expect(out.toString()).toBe(events[0]);
  });

  it("does the same on a CRLF stream, releasing each event as it ends", () => {
    const crlf = (x: string) => x.replaceAll("\n", "\r\n");
    const stream2 = Buffer.from(crlf(events.join("")));
    const expected2 = Buffer.from(crlf([events[0], events[1], events[3]].join("")));
    for (let cut = 1; cut < stream2.length; cut += 7) {
      const f = new UsageChunkFilter();
      const out = Buffer.concat([
        f.push(stream2.subarray(0, cut)),
        f.push(stream2.subarray(cut)),
        f.flush(),
      ]);
      expect(out.equals(expected2), `cut at ${cut}`).toBe(true);
    }
    const f = new UsageChunkFilter();
    expect(f.push(Buffer.from(crlf(events[1]!))).toString()).toBe(crlf(events[1]!));
  });

  it("passes an event that never ends on once it is over 1 MB", () => {
    const f = new UsageChunkFilter();
    const big = Buffer.alloc(1 << 20, 0x61);
    expect(f.push(big).length).toBe(0);
    expect(f.push(Buffer.from("more")).length).toBe((1 << 20) + 4);
  });

  it("releases each complete event at once", () => {
    const f = new UsageChunkFilter();
    expect(f.push(Buffer.from(events[0]!)).toString()).toBe(events[0]);
    expect(f.push(Buffer.from("data: {")).length).toBe(0);
    expect(f.flush().toString()).toBe("data: {");
  });
});

import { describe, expect, it } from "vitest";
import { UsageScanner } from "./usage-scan.js";

const usage = { prompt_tokens: 120, prompt_tokens_details: { cached_tokens: 96 } };

describe("UsageScanner", () => {
  it("reads the final usage chunk of a stream split anywhere", () => {
    const text =
      'data: {"choices":[{"text":"a"}]}\n\n' +
      `data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`;
    for (const cut of [1, 7, 40, text.length - 20]) {
      const s = new UsageScanner("text/event-stream; charset=utf-8");
      s.push(Buffer.from(text.slice(0, cut)));
      s.push(Buffer.from(text.slice(cut)));
      expect(s.result()).toEqual({ promptTokens: 120, cachedTokens: 96 });
    }
  });

  it("reads a JSON answer's usage; none when absent or not JSON", () => {
    const s = new UsageScanner("application/json");
    const body = JSON.stringify({ choices: [], usage });
    s.push(Buffer.from(body.slice(0, 10)));
    s.push(Buffer.from(body.slice(10)));
    expect(s.result()).toEqual({ promptTokens: 120, cachedTokens: 96 });
    const none = new UsageScanner("application/json");
    none.push(Buffer.from('{"usage":{"prompt_tokens":3}}'));
    expect(none.result()).toEqual({ promptTokens: 3, cachedTokens: null });
    const bad = new UsageScanner("application/json");
    bad.push(Buffer.from("{oops"));
    expect(bad.result()).toBeNull();
  });
});

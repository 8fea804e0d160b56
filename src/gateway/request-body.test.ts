import { describe, expect, it } from "vitest";
import { GatewayError } from "./errors.js";
import { parseGatewayRequest } from "./request-body.js";

describe("parseGatewayRequest", () => {
  it("reads the prompt forms vLLM accepts", () => {
    const p = (prompt: unknown) => parseGatewayRequest("completion", { prompt }).prompt;
    expect(p("hi")).toEqual({ kind: "text", text: "hi" });
    expect(p(["hi"])).toEqual({ kind: "text", text: "hi" });
    expect(p([1, 2])).toEqual({ kind: "tokens", tokens: [1, 2] });
    expect(p([[1, 2]])).toEqual({ kind: "tokens", tokens: [1, 2] });
    expect(p(["a", [1]])).toEqual({ kind: "batch", count: 2 });
  });

  it("keeps the chat fields the template needs", () => {
    const r = parseGatewayRequest("chat", {
      model: "m",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "x" }],
      tools: [],
      chat_template_kwargs: { enable_thinking: false },
      add_generation_prompt: false,
      unknown_field: 1,
    });
    expect(r).toMatchObject({ model: "m", stream: true, includeUsage: true });
    expect(r.chat).toEqual({
      messages: [{ role: "user", content: "x" }],
      tools: [],
      chat_template_kwargs: { enable_thinking: false },
      add_generation_prompt: false,
    });
  });

  it.each([
    ["completion", {}, "prompt"],
    ["completion", { prompt: [-1] }, "prompt"],
    ["completion", { prompt: "x", stream_options: 1 }, "stream_options"],
    [
      "completion",
      { prompt: "x", stream_options: { include_usage: 1 } },
      "stream_options/include_usage",
    ],
    ["chat", { messages: [] }, "messages"],
    ["chat", { messages: [{ role: "user", content: 5 }] }, "messages/0/content"],
    ["chat", { messages: [{ role: "user" }], tools: {} }, "tools"],
  ] as const)("%s %j: 400 naming %s", (kind, body, param) => {
    try {
      parseGatewayRequest(kind, body);
      throw new Error("accepted");
    } catch (err) {
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).param).toBe(param);
      expect((err as GatewayError).message).toContain(`body/${param}`);
    }
  });
});

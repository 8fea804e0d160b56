/**
 * Chat requests whose prompt vLLM's OpenAI server builds in a way worth pinning, each
 * checked against the prompt text derived by hand from vLLM's rules (docs/
 * gateway-tokenization.md, "What vLLM does, case by case") and Qwen3's template, encoded by
 * the same tokenizer with add_special_tokens=false.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseGatewayRequest } from "../src/gateway/request-body.js";
import {
  bundledQwen3Dir,
  type ChatRequestLike,
  type LocalTokenizer,
  loadModelTokenizer,
} from "../src/tokenize/index.js";
import { tinyTokenizerJson } from "./tiny-tokenizer.js";

let tok: LocalTokenizer;
beforeAll(async () => {
  tok = await loadModelTokenizer(bundledQwen3Dir(), { threads: 0 });
});
afterAll(async () => {
  await tok?.close();
});

const S = "<|im_start|>";
const E = "<|im_end|>\n";
const GEN = `${S}assistant\n`;

async function expectPrompt(request: ChatRequestLike, text: string): Promise<void> {
  expect(tok.renderChat(request)).toBe(text);
  expect((await tok.tokenizeChat(request)).tokenIds).toEqual(tok.encodeSync(text));
}

describe("chat prompts as vLLM renders them (Qwen3)", () => {
  it("joins several text parts with a newline (string content format)", async () => {
    await expectPrompt(
      {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "first" },
              { type: "text", text: "second" },
            ],
          },
        ],
      },
      `${S}user\nfirst\nsecond${E}${GEN}`,
    );
  });

  it("renders an assistant tool call with content null or missing, arguments string or object", async () => {
    const call = (args: unknown) => [
      { id: "c1", type: "function", function: { name: "f", arguments: args } },
    ];
    const text =
      `${S}user\nq${E}${S}assistant\n<tool_call>\n{"name": "f", "arguments": {"x": 1, "y": "é"}}\n</tool_call>${E}` +
      `${S}user\n<tool_response>\nr\n</tool_response>${E}${GEN}`;
    for (const assistant of [
      { role: "assistant", content: null, tool_calls: call('{"x":1,"y":"é"}') },
      { role: "assistant", tool_calls: call({ x: 1, y: "é" }) },
    ]) {
      await expectPrompt(
        {
          messages: [
            { role: "user", content: "q" },
            assistant,
            { role: "tool", tool_call_id: "c1", content: "r" },
          ],
        },
        text,
      );
    }
  });

  it("passes chat_template_kwargs the template reads (enable_thinking: false)", async () => {
    await expectPrompt(
      {
        messages: [{ role: "user", content: "hi" }],
        chat_template_kwargs: { enable_thinking: false, unknown_kwarg: 1 },
      },
      `${S}user\nhi${E}${GEN}<think>\n\n</think>\n\n`,
    );
  });

  it("continue_final_message with add_generation_prompt false leaves the final message open", async () => {
    await expectPrompt(
      {
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "Hello, " },
        ],
        add_generation_prompt: false,
        continue_final_message: true,
      },
      // The final assistant message comes after the last user turn: the template opens a
      // think block for it; the cut ends the prompt at its content.
      `${S}user\nhi${E}${S}assistant\n<think>\n\n</think>\n\nHello, `,
    );
  });

  it("keeps a system message that is not first, ignores a name, drops an unknown role", async () => {
    await expectPrompt(
      {
        messages: [
          { role: "user", content: "a", name: "alice" },
          { role: "system", content: "late rule" },
          { role: "critic", content: "not rendered by Qwen3's template" },
          { role: "user", content: "b" },
        ],
      },
      `${S}user\na${E}${S}system\nlate rule${E}${S}user\nb${E}${GEN}`,
    );
  });
});

describe("an assistant's reasoning_content (deprecated name of reasoning)", () => {
  it("reaches the template as reasoning does", async () => {
    const text =
      `${S}user\nq${E}${S}assistant\n<think>\nthought\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>${E}` +
      `${S}user\n<tool_response>\nr\n</tool_response>${E}${GEN}`;
    for (const field of ["reasoning", "reasoning_content"]) {
      await expectPrompt(
        {
          messages: [
            { role: "user", content: "q" },
            {
              role: "assistant",
              content: null,
              [field]: "thought",
              tool_calls: [
                { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
              ],
            },
            { role: "tool", tool_call_id: "c1", content: "r" },
          ],
        },
        text,
      );
    }
  });
});

describe("Claude Code's billing header in a system message (vLLM strips it)", () => {
  it("drops the header's line from system text, and a part holding only the header", async () => {
    const header = "x-anthropic-billing-header: cc_version=2.1; cch=1f2e3;";
    const text = `${S}system\nYou are a coding agent.${E}${S}user\nhi${E}${GEN}`;
    for (const system of [
      `${header}\nYou are a coding agent.`,
      [
        { type: "text", text: header },
        { type: "text", text: "You are a coding agent." },
      ],
    ]) {
      await expectPrompt(
        {
          messages: [
            { role: "system", content: system },
            { role: "user", content: "hi" },
          ],
        },
        text,
      );
    }
    // Only a system message's text, and only at its start.
    await expectPrompt(
      { messages: [{ role: "user", content: `${header}\nx` }] },
      `${S}user\n${header}\nx${E}${GEN}`,
    );
  });
});

describe("request fields over chat_template_kwargs (vLLM build_chat_params)", () => {
  it("a chat_template_kwargs add_generation_prompt does not override the request's (default true)", async () => {
    await expectPrompt(
      {
        messages: [{ role: "user", content: "hi" }],
        chat_template_kwargs: { add_generation_prompt: false },
      },
      `${S}user\nhi${E}${GEN}`,
    );
    await expectPrompt(
      {
        messages: [{ role: "user", content: "hi" }],
        add_generation_prompt: false,
        chat_template_kwargs: { add_generation_prompt: true },
      },
      `${S}user\nhi${E}`,
    );
  });
});

describe("reasoning_effort (vLLM build_chat_params)", () => {
  const messages = [{ role: "user", content: "hi" }];
  it('"none" turns Qwen3\'s thinking off; another effort or an explicit kwarg does not', async () => {
    await expectPrompt(
      { messages, reasoning_effort: "none" },
      `${S}user\nhi${E}${GEN}<think>\n\n</think>\n\n`,
    );
    await expectPrompt({ messages, reasoning_effort: "low" }, `${S}user\nhi${E}${GEN}`);
    await expectPrompt(
      { messages, reasoning_effort: "none", chat_template_kwargs: { enable_thinking: true } },
      `${S}user\nhi${E}${GEN}`,
    );
  });
});

describe("a request's own chat_template", () => {
  it("is refused locally (bad_request: routed on load alone), never rendered as the model's", async () => {
    const request = {
      messages: [{ role: "user", content: "hi" }],
      chat_template: "{% for m in messages %}{{ m.content }}{% endfor %}",
    };
    await expect(tok.tokenizeChat(request)).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringMatching(/--trust-request-chat-template/),
    });
    expect(() => tok.renderChat(request)).toThrow(/chat_template/);
  });
});

/** A tiny model whose completions get a BOS (`add_bos_token`), like Llama 3's. */
function bosModelDir(
  template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
): string {
  const dir = mkdtempSync(join(tmpdir(), "kvr-bos-"));
  const tokenizer = tinyTokenizerJson("always", {
    id: 6,
    content: "<s>",
    single_word: false,
    lstrip: false,
    rstrip: false,
    special: true,
  });
  const config = {
    bos_token: "<s>",
    add_bos_token: true,
    chat_template: template,
  };
  writeFileSync(join(dir, "tokenizer.json"), tokenizer);
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
  return dir;
}

describe("add_special_tokens on a chat (vLLM: default false)", () => {
  it("true adds the BOS a completion gets, on top of the template's; default adds none", async () => {
    const dir = bosModelDir();
    const bos = await loadModelTokenizer(dir, { threads: 0 });
    try {
      const messages = [{ role: "user", content: "a b" }];
      const plain = bos.encodeSync("<s>a b");
      expect(plain[0]).toBe(6);
      expect((await bos.tokenizeCompletion("a b")).tokenIds[0]).toBe(6);
      expect((await bos.tokenizeChat({ messages })).tokenIds).toEqual(plain);
      const request = { messages, add_special_tokens: true };
      expect((await bos.tokenizeChat(request)).tokenIds).toEqual([6, ...plain]);
      expect(bos.encodeChatSync(request)).toEqual([6, ...plain]);
      // What a tokenizer thread answers.
      expect([...bos.tokenizeChatIdsSync(request).ids]).toEqual([6, ...plain]);
    } finally {
      await bos.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("add_special_tokens on a completion (vLLM: default true)", () => {
  it("false leaves the BOS out, on the caller's thread and a tokenizer thread's path", async () => {
    const req = parseGatewayRequest("completion", { prompt: "a b", add_special_tokens: false });
    expect(req.addSpecialTokens).toBe(false);
    expect(parseGatewayRequest("completion", { prompt: "a b" }).addSpecialTokens).toBe(true);
    const dir = bosModelDir();
    const bos = await loadModelTokenizer(dir, { threads: 0 });
    try {
      const bare = bos.encodeSync("a b");
      expect((await bos.tokenizeCompletion("a b")).tokenIds).toEqual([6, ...bare]);
      expect((await bos.tokenizeCompletion("a b", false)).tokenIds).toEqual(bare);
      expect(bos.tokenizeCompletionSync("a b", false).tokenIds).toEqual(bare);
    } finally {
      await bos.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("an assistant's empty tool_calls list (vLLM keeps it)", () => {
  it("reaches a template that tests `tool_calls is defined`", async () => {
    const dir = bosModelDir(
      "{% for m in messages %}{% if m.tool_calls is defined %}<s>{% endif %}{{ m.content }}{% endfor %}",
    );
    const t = await loadModelTokenizer(dir, { threads: 0 });
    try {
      const messages = (tool_calls?: unknown[]) => [
        { role: "user", content: "a" },
        { role: "assistant", content: "b", ...(tool_calls ? { tool_calls } : {}) },
      ];
      expect(t.renderChat({ messages: messages([]) })).toBe("a<s>b");
      expect(t.renderChat({ messages: messages() })).toBe("ab");
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

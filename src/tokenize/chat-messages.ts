/**
 * OpenAI chat messages → the conversation vLLM hands to the chat template
 * (`vllm/entrypoints/chat_utils.py`: `_parse_chat_message_content`, `_postprocess_messages`),
 * for text-only requests: string content stays; text parts are joined with "\n" for
 * string-format templates or kept as `{type: "text", text}` for openai-format ones; null
 * content is ""; assistant `tool_calls` keep their place with JSON-string arguments parsed
 * into objects; tools are dumped the way vLLM's pydantic models dump them.
 */

import { TokenizeError } from "./types.js";

export type ContentFormat = "string" | "openai";
type Obj = Record<string, unknown>;

const TEXT_FIELD: Readonly<Record<string, string>> = {
  text: "text",
  input_text: "text",
  output_text: "text",
  refusal: "refusal",
  thinking: "thinking",
};

function bad(message: string): TokenizeError {
  return new TokenizeError("bad_request", message);
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * vLLM's detection, simplified to the source text: a template that loops over a message's
 * `content` (`{% for x in message['content'] %}`) wants openai-format content.
 */
export function detectContentFormat(template: string): ContentFormat {
  const loop = /\{%-?\s*for\s+\w+\s+in\s+\w+(?:\.content|\[\s*['"]content['"]\s*\])/;
  return loop.test(template) ? "openai" : "string";
}

function texts(where: string, content: unknown): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) throw bad(`'${where}.content' must be a string, a list or null`);
  const out: string[] = [];
  content.forEach((part, j) => {
    if (typeof part === "string") {
      out.push(part);
      return;
    }
    const type = isObj(part) ? part.type : undefined;
    const field = typeof type === "string" ? TEXT_FIELD[type] : undefined;
    if (field === undefined) {
      throw bad(
        `'${where}.content[${j}]' has type ${JSON.stringify(type)}; only text parts can be tokenized locally`,
      );
    }
    const t = (part as Obj)[field];
    if (t === undefined || t === null) return; // vLLM skips empty text parts
    if (typeof t !== "string") throw bad(`'${where}.content[${j}].${field}' must be a string`);
    out.push(t);
  });
  return out;
}

function toolCallsOf(where: string, v: unknown): Obj[] {
  if (!Array.isArray(v)) throw bad(`'${where}.tool_calls' must be a list`);
  return v.map((c, k) => {
    if (!isObj(c) || !isObj(c.function)) {
      throw bad(`'${where}.tool_calls[${k}]' must be an object with a 'function' object`);
    }
    const fn: Obj = structuredClone(c.function);
    const args = fn.arguments;
    if (typeof args === "string") {
      try {
        fn.arguments = JSON.parse(args);
      } catch {
        fn.arguments = {};
      }
    } else if (typeof args !== "object" || args === null) {
      fn.arguments = {};
    }
    return { ...structuredClone(c), function: fn };
  });
}

const BILLING_HEADER = "x-anthropic-billing-header";

/**
 * vLLM drops Claude Code's attribution line (its `cch` value changes per request) from a
 * system message's text: a string or `text` part starting with the header loses its
 * first line, and is dropped when nothing follows (`_strip_claude_code_billing_header`).
 */
function stripBillingHeader(content: unknown): unknown {
  const strip = (text: string): string | null => {
    const nl = text.indexOf("\n");
    const rest = nl < 0 ? "" : text.slice(nl + 1);
    return rest === "" ? null : rest;
  };
  if (typeof content === "string") {
    if (!content.startsWith(BILLING_HEADER)) return content;
    const rest = strip(content);
    return rest === null ? [] : rest;
  }
  if (!Array.isArray(content)) return content;
  const out: unknown[] = [];
  for (const part of content) {
    const text =
      typeof part === "string"
        ? part
        : isObj(part) && part.type === "text" && typeof part.text === "string"
          ? part.text
          : null;
    if (text === null || !text.startsWith(BILLING_HEADER)) {
      out.push(part);
      continue;
    }
    const rest = strip(text);
    if (rest !== null) out.push(typeof part === "string" ? rest : { ...(part as Obj), text: rest });
  }
  return out;
}

/** The conversation as the chat template sees it. Throws `TokenizeError("bad_request")`. */
export function toConversation(messages: readonly unknown[], format: ContentFormat): Obj[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw bad("'messages' must be a non-empty list");
  }
  return messages.map((m, i) => {
    const where = `messages[${i}]`;
    if (!isObj(m)) throw bad(`'${where}' must be an object`);
    const role = m.role;
    if (typeof role !== "string") throw bad(`'${where}.role' must be a string`);
    const parts = texts(where, role === "system" ? stripBillingHeader(m.content) : m.content);
    const content: unknown =
      format === "string" ? parts.join("\n") : parts.map((text) => ({ type: "text", text }));
    const out: Obj = { role, content };
    if (role === "assistant") {
      if (m.tool_calls !== undefined && m.tool_calls !== null) {
        // Kept even when empty: vLLM copies any non-null list (a template testing
        // `tool_calls is defined` sees `[]`).
        out.tool_calls = toolCallsOf(where, m.tool_calls);
      }
      // vLLM renames the deprecated `reasoning_content` to `reasoning` when `reasoning` is
      // null or absent (ChatCompletionRequest._normalize_messages_before).
      const reasoning = m.reasoning ?? m.reasoning_content;
      if (reasoning !== undefined && reasoning !== null) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    } else if (role === "tool") {
      if ("tool_call_id" in m) out.tool_call_id = m.tool_call_id;
      if (format === "openai") out.content = parts.join("\n");
    }
    if (typeof m.name === "string") out.name = m.name;
    if (typeof m.task === "string") out.task = m.task;
    if (role === "developer") out.tools = m.tools ?? null;
    return out;
  });
}

/** `tool.model_dump()` of vLLM's `ChatCompletionToolsParam`: declared fields first, defaults filled. */
export function toToolDicts(tools: readonly unknown[] | undefined): Obj[] | null {
  if (tools === undefined || tools === null) return null;
  if (!Array.isArray(tools)) throw bad("'tools' must be a list");
  return tools.map((t, i) => {
    if (!isObj(t) || !isObj(t.function) || typeof t.function.name !== "string") {
      throw bad(`'tools[${i}]' must be {"type": "function", "function": {"name": string, …}}`);
    }
    const { name, description, parameters, ...fnRest } = t.function;
    const { type, function: _f, ...rest } = t;
    return {
      type: type ?? "function",
      function: {
        name,
        description: description ?? null,
        parameters: parameters ?? null,
        ...structuredClone(fnRest),
      },
      ...structuredClone(rest),
    };
  });
}

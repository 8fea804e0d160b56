/**
 * Renders a chat request to prompt text as vLLM's OpenAI server does (vLLM
 * `vllm/renderers/hf.py` `safe_apply_chat_template` → transformers `apply_chat_template`
 * with `tokenize=False`): the model's template (or its "tool_use" variant), the special
 * tokens as variables, `chat_template_kwargs` filtered to what the template or HF accepts
 * and merged over add_generation_prompt / continue_final_message / tools / documents, and
 * transformers' `continue_final_message` cut (a tag after the final message's content).
 */

import { Template } from "@huggingface/jinja";
import { detectContentFormat, toConversation, toToolDicts } from "./chat-messages.js";
import { type ModelFiles, pickChatTemplate } from "./model-files.js";
import { type ChatRequestLike, TokenizeError } from "./types.js";

/** Parameters of HF `apply_chat_template`; vLLM lets these through whatever the template uses. */
const HF_BASE_PARAMS = new Set([
  "conversation",
  "tools",
  "documents",
  "add_generation_prompt",
  "continue_final_message",
  "padding",
  "truncation",
  "max_length",
  "return_tensors",
  "return_dict",
  "return_assistant_tokens_mask",
  "tokenizer_kwargs",
]);
const REJECTED_KWARGS = ["chat_template", "tokenize"];
const CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG ";

interface Compiled {
  readonly template: Template;
  readonly source: string;
  /** Every identifier in the source: a superset of the template's undeclared variables. */
  readonly names: ReadonlySet<string>;
  readonly format: ReturnType<typeof detectContentFormat>;
}

function bad(message: string, cause?: unknown): TokenizeError {
  return new TokenizeError("bad_request", message, { cause });
}

export class ChatRenderer {
  readonly #files: ModelFiles;
  readonly #compiled = new Map<string, Compiled>();

  constructor(files: ModelFiles) {
    this.#files = files;
  }

  #compile(source: string): Compiled {
    let c = this.#compiled.get(source);
    if (c === undefined) {
      let template: Template;
      try {
        template = new Template(source);
      } catch (err) {
        throw new TokenizeError(
          "model_files",
          `${this.#files.dir}: chat_template does not parse (${(err as Error).message})`,
          { cause: err },
        );
      }
      const names = new Set(source.match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []);
      c = { template, source, names, format: detectContentFormat(source) };
      this.#compiled.set(source, c);
    }
    return c;
  }

  /** The prompt text vLLM would tokenize for this request. */
  render(request: ChatRequestLike): string {
    if (request.chat_template !== undefined && request.chat_template !== null) {
      // vLLM refuses it without --trust-request-chat-template and renders it with the flag;
      // which one a worker does is not known here, and a client's template is not run here.
      throw bad(
        "a request's own chat_template is not rendered locally (vLLM renders it only with --trust-request-chat-template)",
      );
    }
    const tools = toToolDicts(request.tools);
    const source = pickChatTemplate(this.#files.chatTemplates, tools !== null);
    if (source === null) {
      throw bad(
        `${this.#files.dir}: the model has no chat_template; chat requests cannot be rendered`,
      );
    }
    const c = this.#compile(source);
    const kwargs = request.chat_template_kwargs ?? {};
    const rejected = REJECTED_KWARGS.filter((k) => k in kwargs);
    if (rejected.length > 0) {
      throw bad(`Found unexpected chat template kwargs from request: ${rejected.join(", ")}`);
    }
    const vars: Record<string, unknown> = { tools, documents: null };
    for (const [k, v] of Object.entries(kwargs)) {
      if (c.names.has(k) || HF_BASE_PARAMS.has(k)) vars[k] = v;
    }
    // vLLM merges the request's own fields over chat_template_kwargs (`build_chat_params`:
    // `merge_kwargs(chat_template_kwargs, {add_generation_prompt, …})`, a null one not
    // counting), so a kwarg of the same name never wins; the booleans always have a value.
    vars.add_generation_prompt = request.add_generation_prompt ?? true;
    vars.continue_final_message = request.continue_final_message ?? false;
    if (request.documents !== undefined && request.documents !== null) {
      vars.documents = request.documents;
    }
    // And `reasoning_effort` (vLLM's, not OpenAI's only): passed on, and unless the
    // kwargs name `enable_thinking`, it sets `enable_thinking = effort != "none"`.
    const effort = request.reasoning_effort;
    if (typeof effort === "string") {
      vars.reasoning_effort = effort;
      if (!("enable_thinking" in kwargs)) vars.enable_thinking = effort !== "none";
    }
    for (const k of ["reasoning_effort", "enable_thinking"]) {
      if (k in vars && !c.names.has(k)) delete vars[k];
    }
    const addGen = vars.add_generation_prompt === true;
    const cont = vars.continue_final_message === true;
    if (addGen && cont) {
      throw bad("continue_final_message and add_generation_prompt cannot both be true");
    }
    const messages = toConversation(request.messages, c.format);
    let finalText = "";
    if (cont) finalText = tagFinalMessage(messages);
    let rendered: string;
    try {
      rendered = c.template.render({
        ...this.#files.specialTokensMap,
        ...vars,
        messages,
        add_generation_prompt: addGen,
      });
    } catch (err) {
      throw bad(`chat template error: ${(err as Error).message}`, err);
    }
    return cont ? cutAtTag(rendered, finalText) : rendered;
  }
}

/** Appends the tag to the final message's (last text part's) content; returns the text. */
function tagFinalMessage(messages: Record<string, unknown>[]): string {
  const last = messages[messages.length - 1]!;
  const content = last.content;
  if (typeof content === "string") {
    last.content = content + CONTINUE_TAG;
    return content;
  }
  if (Array.isArray(content)) {
    for (let i = content.length - 1; i >= 0; i--) {
      const part = content[i] as { text?: unknown };
      if (typeof part.text === "string") {
        const text = part.text;
        part.text = text + CONTINUE_TAG;
        return text;
      }
    }
  }
  throw bad("continue_final_message is set but the final message has no text to continue");
}

function cutAtTag(rendered: string, finalText: string): string {
  const tag = CONTINUE_TAG.trim();
  if (!rendered.includes(finalText.trim()) || !rendered.includes(tag)) {
    throw bad(
      "continue_final_message is set but the final message does not appear in the rendered chat",
    );
  }
  const at = rendered.lastIndexOf(tag);
  return rendered.startsWith(CONTINUE_TAG, at)
    ? rendered.slice(0, at)
    : rendered.slice(0, at).trimEnd();
}

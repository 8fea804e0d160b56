/** The tokenizer contract the gateway codes against (see docs/gateway-tokenization.md). */
export interface TokenizeResult {
  readonly tokenIds: readonly number[];
  readonly cachedSegments?: number;
}
export interface ChatRequestLike {
  readonly messages: readonly unknown[];
  readonly tools?: readonly unknown[];
  readonly chat_template_kwargs?: Readonly<Record<string, unknown>>;
  readonly add_generation_prompt?: boolean;
  readonly continue_final_message?: boolean;
  readonly documents?: readonly unknown[];
}
export interface PromptTokenizer {
  readonly model: string;
  tokenizeCompletion(prompt: string): Promise<TokenizeResult>;
  tokenizeChat(request: ChatRequestLike): Promise<TokenizeResult>;
  close(): Promise<void>;
}

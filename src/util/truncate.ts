/**
 * Bounded renderings of values for messages and error details: whatever a caller or an
 * engine sent, what we echo back or log is at most a few dozen characters, and building
 * it costs no more than that (a 4 MB string or a 100,000-deep array is never serialised
 * whole). The one place that decides how values are cut.
 */

/** Default length of an echoed value. */
export const ECHO_CHARS = 80;

/** `text` itself when short enough, else its first `max - 3` characters and `...`. */
export function clip(text: string, max = ECHO_CHARS): string {
  return text.length > max ? `${text.slice(0, Math.max(0, max - 3))}...` : text;
}

/**
 * A JSON-like rendering of `value` of at most `max` characters, built by walking only as
 * far as needed (bounded in depth and size, so it never overflows the stack).
 */
export function preview(value: unknown, max = ECHO_CHARS): string {
  const out: string[] = [];
  let len = 0;
  const push = (s: string): boolean => {
    out.push(s);
    len += s.length;
    return len <= max;
  };
  const walk = (v: unknown, depth: number): boolean => {
    if (typeof v === "string") return push(JSON.stringify(v.length > max ? v.slice(0, max) : v));
    if (typeof v === "bigint") return push(`${v}`);
    if (typeof v !== "object" || v === null) return push(String(JSON.stringify(v) ?? v));
    if (depth >= 8) return push(Array.isArray(v) ? "[...]" : "{...}");
    if (Array.isArray(v)) {
      if (!push("[")) return false;
      for (let i = 0; i < v.length; i++) {
        if ((i > 0 && !push(",")) || !walk(v[i], depth + 1)) return false;
      }
      return push("]");
    }
    if (!push("{")) return false;
    let first = true;
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue;
      if ((!first && !push(",")) || !push(`${JSON.stringify(clip(k, max))}:`)) return false;
      first = false;
      if (!walk((v as Record<string, unknown>)[k], depth + 1)) return false;
    }
    return push("}");
  };
  walk(value, 0);
  return clip(out.join(""), max);
}

/**
 * A value as it may be echoed in an error's `details`: numbers, booleans and null as they
 * are, short strings as they are, anything else as a bounded `preview` string.
 */
export function echoValue(value: unknown, max = ECHO_CHARS): unknown {
  if (value === null || typeof value === "number" || typeof value === "boolean") return value;
  if (typeof value === "string") return clip(value, max);
  if (value === undefined) return undefined;
  return preview(value, max);
}

/**
 * Property test of the token-id reader against the path it shortcuts: for any body —
 * generated members around a `prompt` (random spacing, escaped and duplicate keys,
 * `__proto__`, ids that must fall back: `-0`, `01`, `1e3`, ≥ 2^31…), and the same bodies
 * with bytes inserted or deleted — `parseTokenIdBody ?? JSON.parse` then
 * `parseGatewayRequest` gives the same body, the same request or the same error as
 * `JSON.parse` alone. A fixed seed (`FC_SEED` to try another) and a run count that keeps
 * it to a couple of seconds.
 */

import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseGatewayRequest } from "./request-body.js";
import { parseTokenIdBody } from "./token-id-body.js";

/** What the gateway's parser + field checks make of a body: the old path, or the new. */
function run(buf: Buffer, fastFirst: boolean) {
  let body: unknown;
  try {
    body = (fastFirst ? parseTokenIdBody(buf) : null) ?? JSON.parse(buf.toString("utf8"));
  } catch (e) {
    return { syntax: (e as Error).message };
  }
  let out: unknown;
  try {
    const r = parseGatewayRequest("completion", body);
    const p = r.prompt;
    out = {
      ...r,
      prompt: p?.kind === "tokens" ? { kind: "tokens", ids: Array.from(p.tokens) } : p,
    };
  } catch (e) {
    const g = e as { code?: string; message?: string; param?: unknown };
    out = { err: [g.code, g.message, g.param] };
  }
  const o = body as Record<string, unknown>;
  const plain: Record<string, unknown> = {};
  for (const k of Object.keys(o)) {
    const v = o[k] instanceof Int32Array ? Array.from(o[k] as Int32Array) : o[k];
    Object.defineProperty(plain, k, {
      value: v,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return { out, body: plain };
}

const ws = fc.constantFrom("", " ", "\n", "\t", "\r", " \r\n\t ");
const id = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 2 ** 31 - 1 }).map(String), weight: 60 },
  { arbitrary: fc.nat(20).map(String), weight: 20 },
  fc.constantFrom(
    "-0",
    "-1",
    "01",
    "2147483648",
    "9007199254740993",
    "1e3",
    "1.0",
    "0.5",
    "[1]",
    '"1"',
    "null",
  ),
);
const ids = fc
  .tuple(
    fc.array(fc.tuple(ws, id, ws), { maxLength: 40 }),
    fc.nat(30).map((n) => n === 0),
  )
  .map(
    ([xs, trailing]) =>
      `[${xs.map(([a, v, b]) => `${a}${v}${b}`).join(",")}${trailing ? "," : ""}]`,
  );
const key = fc.oneof(
  { arbitrary: fc.string().map((s) => JSON.stringify(s)), weight: 8 },
  {
    arbitrary: fc.constantFrom(
      '"prompt"',
      '"pr\\u006fmpt"',
      '"__proto__"',
      '"model"',
      '"stream"',
      '"stream_options"',
      '"cache_salt"',
    ),
    weight: 2,
  },
);
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v, null, 2)),
  ids,
);
const member = fc.tuple(key, ws, ws, value).map(([k, a, b, v]) => `${k}${a}:${b}${v}`);
const body = fc
  .tuple(fc.array(member, { maxLength: 6 }), fc.nat(6), ws, ws, ids, fc.boolean())
  .map(([ms, at, a, b, p, withPrompt]) => {
    const all = [...ms];
    if (withPrompt) all.splice(Math.min(at, all.length), 0, `"prompt"${a}:${b}${p}`);
    return `${a}{${b}${all.join(`${a},${b}`)}${a}}${b}`;
  });
const mutated = fc
  .tuple(
    body,
    fc.nat(),
    fc.constantFrom("", ",", "]", "[", '"', "\\", "0", "-", "é", "}", "{", ":", "\ufeff"),
    fc.nat(2),
  )
  .map(([s, at, ins, del]) => {
    const b = Buffer.from(s, "utf8");
    const i = b.length === 0 ? 0 : at % b.length;
    return Buffer.concat([b.subarray(0, i), Buffer.from(ins), b.subarray(i + del)]);
  });

describe("parseTokenIdBody against JSON.parse + parseGatewayRequest", () => {
  it("same body and same answer for any body (property)", () => {
    let fast = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          { arbitrary: body.map((s) => Buffer.from(s, "utf8")), weight: 3 },
          { arbitrary: mutated, weight: 1 },
        ),
        (buf) => {
          if (parseTokenIdBody(buf) !== null) fast++;
          const a = run(buf, false);
          const b = run(buf, true);
          if (!isDeepStrictEqual(a, b)) expect(b).toEqual(a);
          return true;
        },
      ),
      { numRuns: 10_000, seed: Number(process.env.FC_SEED ?? 42) },
    );
    expect(fast).toBeGreaterThan(300);
  });
});

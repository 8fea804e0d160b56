import { describe, expect, it } from "vitest";
import { seededRng } from "../util/rng.js";
import { parseGatewayRequest } from "./request-body.js";
import { parseTokenIdBody, scratchCapacity } from "./token-id-body.js";

const bytes = (s: string) => Buffer.from(s, "utf8");

/** The fast parse, with its ids as a plain array, for comparing with JSON.parse. */
function fast(s: string): unknown {
  const o = parseTokenIdBody(bytes(s));
  if (o === null) return null;
  expect(o.prompt).toBeInstanceOf(Int32Array);
  return { ...o, prompt: Array.from(o.prompt as Int32Array) };
}

describe("parseTokenIdBody", () => {
  it("gives what JSON.parse gives for plain token-id bodies, ids in an Int32Array", () => {
    const cases = [
      '{"model":"m","prompt":[1,2,3],"max_tokens":4,"stream":true}',
      '  {\n "prompt" : [ 0 , 2147483647,\t10 ] , "stream_options": {"include_usage": true} }\n',
      '{"prompt":[5]}',
      '{"a":{"prompt":"nested, not the prompt"},"prompt":[7,8],"b":["]","[",{"x":"\\"]"}]}',
      '{"model":"modèle ✓","prompt":[42],"stop":["\\n","]"]}',
      '{"logit_bias":{"12":-1},"prompt":[1,2],"user":"prompt"}',
    ];
    for (const c of cases) expect(fast(c)).toEqual(JSON.parse(c));
  });

  it("matches JSON.parse on random bodies (fields around the prompt, random spacing)", () => {
    const rng = seededRng(12345);
    const rnd = (n: number) => Math.floor(rng() * n);
    const ws = () => [" ", "", "\n", "\t", "  "][rnd(5)]!;
    for (let t = 0; t < 300; t++) {
      const ids = Array.from({ length: 1 + rnd(2000) }, () =>
        rnd(4) === 0 ? rnd(10) : rnd(2 ** 31 - 1),
      );
      const members = [
        `"prompt"${ws()}:${ws()}[${ws()}${ids.join(`${ws()},${ws()}`)}${ws()}]`,
        `"model":"m-${rnd(9)}"`,
        `"stream":${rnd(2) === 0}`,
        `"extra":{"prompt":[${rnd(9)}],"s":"a]b[c\\"d"}`,
        `"max_tokens":${rnd(100)}`,
      ].sort(() => rnd(3) - 1);
      const s = `${ws()}{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}${ws()}`;
      expect(fast(s)).toEqual(JSON.parse(s));
    }
  });

  it("leaves every other shape to the whole-body parse (null)", () => {
    const cases = [
      '{"prompt":"text"}',
      '{"prompt":[]}',
      '{"prompt":[[1,2]]}',
      '{"prompt":[1.0,2]}',
      '{"prompt":[1e3]}',
      '{"prompt":[-1]}',
      '{"prompt":[01]}',
      '{"prompt":[2147483648]}',
      '{"prompt":[1,2,]}',
      '{"prompt":[1 2]}',
      '{"prompt":[1,2],"prompt":[3]}',
      '{"pr\\u006fmpt":[9],"prompt":[1]}',
      '{"prompt":[1,2]',
      '{"prompt":[1,2]} x',
      '{"prompt":[1,2],}',
      '[{"prompt":[1]}]',
      '{"model":"m"}',
      "",
      '\uFEFF{"prompt":[1]}',
    ];
    for (const c of cases) expect(parseTokenIdBody(bytes(c)), c).toBeNull();
  });

  it("a huge prompt's ids are read whole, and the grown scratch array is not kept", () => {
    const ids = Array.from({ length: 600_000 }, (_, i) => i % 150_000);
    const o = parseTokenIdBody(bytes(JSON.stringify({ prompt: ids })));
    const read = o?.prompt;
    expect(read).toBeInstanceOf(Int32Array);
    expect((read as Int32Array).length).toBe(ids.length);
    expect((read as Int32Array)[599_999]).toBe(599_999 % 150_000);
    expect(scratchCapacity()).toBeLessThanOrEqual(1 << 18);
    // A body that falls back after growing it lets it go too.
    expect(parseTokenIdBody(bytes(`{"prompt":[${ids.join(",")},-1]}`))).toBeNull();
    expect(scratchCapacity()).toBeLessThanOrEqual(1 << 18);
  });

  it("its ids are a token-id prompt for the gateway's field checks", () => {
    const body = parseTokenIdBody(bytes('{"model":"m","prompt":[3,1,4],"stream":true}'));
    const req = parseGatewayRequest("completion", body);
    expect(req.prompt?.kind).toBe("tokens");
    expect(Array.from((req.prompt as { tokens: ArrayLike<number> }).tokens)).toEqual([3, 1, 4]);
    expect(req.stream).toBe(true);
    expect(req.model).toBe("m");
  });
});

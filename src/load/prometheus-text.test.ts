import { describe, expect, it } from "vitest";
import { parsePrometheusText } from "./prometheus-text.js";

describe("parsePrometheusText", () => {
  it("reads comments, labels, values and timestamps", () => {
    const r = parsePrometheusText(
      [
        "# HELP a_total Something.",
        "# TYPE a_total counter",
        'a_total{x="1",y="two"} 3.5',
        "b 7 1712345678901",
        "  c{} -2e-3",
        "",
      ].join("\n"),
    );
    expect(r.issues).toEqual([]);
    expect(r.types.get("a_total")).toBe("counter");
    expect(r.samples.get("a_total")).toEqual([
      { name: "a_total", labels: { x: "1", y: "two" }, value: 3.5, timestamp: null },
    ]);
    expect(r.samples.get("b")![0]!.timestamp).toBe(1712345678901);
    expect(r.samples.get("c")![0]!.value).toBe(-0.002);
  });

  it("decodes label escapes and keeps braces, commas and spaces inside values", () => {
    const r = parsePrometheusText(
      'm{a="x\\"y",b="back\\\\slash",c="line\\nbreak",d="{,} =", } 1\n',
    );
    expect(r.issues).toEqual([]);
    expect(r.samples.get("m")![0]!.labels).toEqual({
      a: 'x"y',
      b: "back\\slash",
      c: "line\nbreak",
      d: "{,} =",
    });
  });

  it("reads +Inf, -Inf and NaN", () => {
    const r = parsePrometheusText('h_bucket{le="+Inf"} +Inf\nn NaN\nm -Inf\n');
    expect(r.samples.get("h_bucket")![0]!.value).toBe(Infinity);
    expect(r.samples.get("h_bucket")![0]!.labels.le).toBe("+Inf");
    expect(Number.isNaN(r.samples.get("n")![0]!.value)).toBe(true);
    expect(r.samples.get("m")![0]!.value).toBe(-Infinity);
  });

  it("keeps every series of a metric in order", () => {
    const r = parsePrometheusText('g{engine="0"} 1\ng{engine="1"} 2\r\ng{engine="2"} 3\n');
    expect(r.samples.get("g")!.map((s) => s.value)).toEqual([1, 2, 3]);
  });

  it("reports bad lines with their number and keeps the good ones", () => {
    const r = parsePrometheusText(
      [
        "ok 1",
        'bad{a="1" 2',
        "noval",
        "x 0x10",
        'dup{a="1",a="2"} 1',
        "y 1 2 3",
        "9bad 1",
        "ok2 2",
      ].join("\n"),
    );
    expect([...r.samples.keys()]).toEqual(["ok", "ok2"]);
    expect(r.issues.map((i) => i.line)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(r.issues[3]!.message).toContain("duplicate label a");
  });

  it("skips unwanted names without parsing them when a filter is given", () => {
    const r = parsePrometheusText('want 1\nother{broken 2\nwant{x="y"} 3\n', {
      names: new Set(["want"]),
    });
    expect(r.issues).toEqual([]);
    expect(r.samples.get("want")!.length).toBe(2);
    expect(r.samples.has("other")).toBe(false);
  });
});

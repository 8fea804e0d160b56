/**
 * There is no Docker daemon in CI, so this test checks the Dockerfile's structure and then
 * replays what the image build does, step by step, on this machine: the build stage's
 * COPYs into a temp dir, `npm ci` (replaced by a symlink to the installed node_modules —
 * the only step not run for real), a real `npm run build`, the runtime stage's COPYs
 * (including `COPY --from=build`), and the ENTRYPOINT/CMD with the image's ENV: the
 * router must answer /healthz, the image's own HEALTHCHECK command must pass against it
 * (finding the port from the router's configuration),
 * the same image must run `sim-worker`, and both must exit 0 on SIGTERM. The compose
 * file and its router config are checked against the real config loader.
 */

import { type ChildProcess, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { loadConfig } from "../src/config/index.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

interface Stage {
  readonly from: string;
  readonly name: string | null;
  readonly steps: Instruction[];
}

/** Instructions of a Dockerfile: continuation lines joined, comments dropped. */
function parseDockerfile(text: string): Stage[] {
  const lines: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (pending === "" && (line === "" || line.startsWith("#"))) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    lines.push(pending + line);
    pending = "";
  }
  const stages: Stage[] = [];
  /** `ARG NAME=default` before the first FROM: usable in FROM lines, with its default. */
  const globalArgs: Record<string, string> = {};
  for (const line of lines) {
    const m = /^(\S+)\s*(.*)$/.exec(line)!;
    const keyword = m[1]!.toUpperCase();
    const args = m[2]!;
    if (keyword === "ARG" && stages.length === 0) {
      const a = /^(\w+)(?:=(\S*))?$/.exec(args)!;
      globalArgs[a[1]!] = a[2] ?? "";
    } else if (keyword === "FROM") {
      const expanded = args.replace(/\$\{(\w+)\}/g, (_, k: string) => globalArgs[k] ?? "");
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(expanded)!;
      stages.push({ from: f[1]!, name: f[2] ?? null, steps: [] });
    } else {
      if (stages.length === 0) throw new Error(`${keyword} before FROM`);
      stages.at(-1)!.steps.push({ keyword, args });
    }
  }
  return stages;
}

const find = (s: Stage, kw: string) => s.steps.filter((i) => i.keyword === kw);
const one = (s: Stage, kw: string) => {
  const all = find(s, kw);
  expect(all, `${kw} in stage ${s.name}`).toHaveLength(1);
  return all[0]!;
};

/** ENV k=v pairs (the `k=v k2=v2` form). */
function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of find(stage, "ENV")) {
    for (const m of e.args.matchAll(/(\w+)=(\S+)/g)) env[m[1]!] = m[2]!;
  }
  return env;
}

/** `COPY [--from=x] src... dest` → sources, dest, from. */
function copyOf(i: Instruction): { from: string | null; sources: string[]; dest: string } {
  const parts = i.args.split(/\s+/);
  let from: string | null = null;
  while (parts[0]!.startsWith("--")) {
    const flag = parts.shift()!;
    if (flag.startsWith("--from=")) from = flag.slice(7);
  }
  const dest = parts.pop()!;
  return { from, sources: parts, dest };
}

const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
const stages = parseDockerfile(dockerfile);
const build = stages.find((s) => s.name === "build");
const runtime = stages.at(-1)!;

describe("Dockerfile structure", () => {
  it("has a build stage with dev dependencies and a runtime stage with production ones", () => {
    expect(stages).toHaveLength(2);
    expect(build).toBeDefined();
    for (const s of stages) expect(s.from).toMatch(/^node:20-bookworm-slim$/);
    const buildRuns = find(build!, "RUN").map((r) => r.args);
    expect(buildRuns.some((r) => /^npm ci\b/.test(r) && !r.includes("--omit=dev"))).toBe(true);
    expect(buildRuns).toContain("npm run build");
    const runtimeRuns = find(runtime, "RUN").map((r) => r.args);
    expect(runtimeRuns.some((r) => /^npm ci\b.*--omit=dev/.test(r))).toBe(true);
    expect(runtimeRuns.join(" ")).not.toMatch(/npm run build/);
    const fromBuild = find(runtime, "COPY")
      .map(copyOf)
      .filter((c) => c.from === "build");
    expect(fromBuild).toEqual([{ from: "build", sources: ["/app/dist"], dest: "./dist" }]);
  });

  it("runs as a non-root user, exposes 8080, checks health with node, starts the router", () => {
    const user = one(runtime, "USER").args;
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(one(runtime, "EXPOSE").args.split(/\s+/)).toContain("8080");
    const hc = one(runtime, "HEALTHCHECK").args;
    const cmd = JSON.parse(hc.slice(hc.indexOf("CMD") + 3).trim()) as string[];
    // The probe reads the router's configuration: no port baked into the image.
    expect(cmd).toEqual(["node", "dist/cli.js", "healthcheck"]);
    expect(envOf(runtime).HEALTHCHECK_URL).toBeUndefined();
    expect(JSON.parse(one(runtime, "ENTRYPOINT").args)).toEqual(["node", "dist/cli.js"]);
    expect(JSON.parse(one(runtime, "CMD").args)).toEqual(["serve"]);
    expect(envOf(runtime).KVROUTER_CONFIG).toBe("/etc/kvrouter/config.yaml");
    // The user switch comes after every install/copy step that writes as root.
    const steps = runtime.steps.map((s) => s.keyword);
    expect(steps.lastIndexOf("USER")).toBeGreaterThan(steps.lastIndexOf("RUN"));
  });

  it("copies only files that exist and that .dockerignore keeps", () => {
    const ignore = readFileSync(join(ROOT, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(ignore).toEqual(expect.arrayContaining(["node_modules", "dist", ".git"]));
    for (const s of stages) {
      for (const c of find(s, "COPY").map(copyOf)) {
        if (c.from !== null) continue;
        for (const src of c.sources) {
          expect(existsSync(join(ROOT, src)), src).toBe(true);
          expect(
            ignore.some((p) => src === p || src.startsWith(`${p}/`)),
            src,
          ).toBe(false);
        }
      }
    }
  });

  it("has a compose file with the router, three simulated workers and Prometheus", () => {
    const compose = parseYaml(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), {
      merge: true,
    });
    const all = compose.services as Record<string, Record<string, unknown>>;
    const inProfile = (n: string) => (all[n]!.profiles as string[] | undefined) !== undefined;
    const services = Object.fromEntries(Object.entries(all).filter(([n]) => !inProfile(n)));
    expect(Object.keys(services).sort()).toEqual([
      "prometheus",
      "router",
      "sim-0",
      "sim-1",
      "sim-2",
    ]);
    // The `replicas` profile: two routers sharing load through Redis, with valid config.
    expect(Object.keys(all).filter(inProfile).sort()).toEqual(["redis", "router-a", "router-b"]);
    for (const name of ["router-a", "router-b"]) {
      const env = all[name]!.environment as Record<string, string>;
      const argv = ["--config", join(ROOT, "config/compose.yaml")];
      const r = loadConfig({ argv, env });
      if (r.kind !== "ok") throw new Error(`${name}: ${JSON.stringify(r)}`);
      expect(r.config.replicas).toMatchObject({ redisUrl: "redis://redis:6379", id: name });
    }
    expect(services.router!.volumes).toContain(
      "./config/compose.yaml:/etc/kvrouter/config.yaml:ro",
    );
    expect(services.prometheus!.volumes).toContain(
      "./config/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
    );
    const prom = parseYaml(readFileSync(join(ROOT, "config/prometheus.yml"), "utf8"));
    const targets = prom.scrape_configs.flatMap((c: { static_configs: { targets: string[] }[] }) =>
      c.static_configs.flatMap((s) => s.targets),
    );
    expect(targets).toContain("router:8080");

    // The router's compose config is valid and points at the workers' actual ports.
    const loaded = loadConfig({ argv: ["--config", join(ROOT, "config/compose.yaml")], env: {} });
    if (loaded.kind !== "ok") throw new Error(`config/compose.yaml: ${JSON.stringify(loaded)}`);
    expect(loaded.config.server.host).toBe("0.0.0.0");
    // The workers share the router's network namespace: the URL /v1/route returns
    // (http://localhost:PORT) is the router's view and, through the router's published
    // ports, the host's.
    const published = (services.router!.ports as string[]).flatMap((p) => {
      // "[host_ip:]published:target": the published side is the one before the target.
      const parts = p.split(":");
      const [from, to] = parts[parts.length - 2]!.split("-").map(Number);
      return Array.from({ length: (to ?? from!) - from! + 1 }, (_, i) => from! + i);
    });
    for (const name of ["sim-0", "sim-1", "sim-2"]) {
      const args = (services[name]!.command as string[]).join(" ");
      expect(services[name]!.image).toBe(services.router!.image);
      expect(services[name]!.network_mode).toBe("service:router");
      expect(args).toMatch(/^sim-worker /);
      const flag = (f: string) => new RegExp(`--${f}=(\\S+)`).exec(args)?.[1];
      const w = loaded.config.workers.find((x) => x.id === name)!;
      expect(w.url).toBe(`http://localhost:${flag("port")}`);
      expect(published).toContain(Number(flag("port")));
      expect(w.eventsEndpoint).toBe(`tcp://127.0.0.1:${flag("events-port")}`);
      expect(w.replayEndpoint).toBe(`tcp://127.0.0.1:${flag("replay-port")}`);
      expect(w.topic).toBe(flag("topic"));
      expect(w.blockSize).toBe(Number(flag("block-size")));
      expect(services[name]!.environment).toEqual({
        HEALTHCHECK_URL: `http://127.0.0.1:${flag("port")}/health`,
      });
    }
  });

  it("has a commented vLLM service whose flags match the commented worker beside it", () => {
    /** The lines of a commented-out block, uncommented (from its first line to a blank). */
    const uncomment = (text: string, first: string): string => {
      const lines = text.split("\n");
      const start = lines.findIndex((l) => l.trimStart().startsWith(`# ${first}`));
      expect(start, first).toBeGreaterThan(0);
      const block: string[] = [];
      for (const l of lines.slice(start)) {
        const m = /^(\s*)# ?(.*)$/.exec(l);
        if (m === null) break;
        block.push(m[1]! + m[2]!);
      }
      return block.join("\n");
    };
    const composeText = readFileSync(join(ROOT, "docker-compose.yml"), "utf8");
    const vllm = (parseYaml(uncomment(composeText, "vllm:")) as { vllm: Record<string, unknown> })
      .vllm;
    expect(vllm.image).toMatch(/^vllm\/vllm-openai:/);
    const command = vllm.command as string[];
    const arg = (name: string) =>
      command.find((c) => c === `--${name}` || c.startsWith(`--${name}=`))?.split(/=(.*)/s)[1];
    expect(command).toContain("--enable-prompt-tokens-details");
    expect(arg("api-key")).toBeTruthy();
    const devices = (vllm.deploy as { resources: { reservations: { devices: unknown[] } } })
      .resources.reservations.devices;
    expect(devices).toEqual([{ driver: "nvidia", count: 1, capabilities: ["gpu"] }]);
    // KVEventsConfig's fields (vllm/config/kv_events.py).
    const kv = JSON.parse(arg("kv-events-config")!) as Record<string, unknown>;
    expect(Object.keys(kv).sort()).toEqual(
      ["enable_kv_cache_events", "endpoint", "publisher", "replay_endpoint", "topic"].sort(),
    );
    expect(kv).toMatchObject({ enable_kv_cache_events: true, publisher: "zmq" });

    const configText = readFileSync(join(ROOT, "config/compose.yaml"), "utf8");
    const entry = (
      parseYaml(uncomment(configText, "- id: vllm-0")) as Record<string, unknown>[]
    )[0]!;
    const withVllm = loadConfig({
      argv: ["--config", join(ROOT, "config/compose.yaml")],
      env: { KVROUTER_WORKERS: JSON.stringify([entry]) },
    });
    if (withVllm.kind !== "ok") throw new Error(JSON.stringify(withVllm));
    const w = withVllm.config.workers[0]!;
    const port = (endpoint: unknown) => String(endpoint).split(":").at(-1);
    expect(w.url).toBe(`http://localhost:${arg("port")}`);
    expect(port(w.eventsEndpoint)).toBe(port(kv.endpoint));
    expect(port(w.replayEndpoint)).toBe(port(kv.replay_endpoint));
    expect(w.topic).toBe(kv.topic);
    expect(w.model).toBe(arg("model"));
    expect(w.blockSize).toBe(Number(arg("block-size")));
    expect(withVllm.config.index.blockSize).toBe(Number(arg("block-size")));
  });
});

/** Run a command to completion; resolves with its exit code and output. */
function run(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const p = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    p.stdout!.on("data", (d) => {
      out += d;
    });
    p.stderr!.on("data", (d) => {
      out += d;
    });
    p.on("exit", (code) => resolve({ code, out }));
  });
}

/** Start a long-running process and wait for a stdout line matching `ready`. */
function start(args: string[], cwd: string, env: NodeJS.ProcessEnv, ready: RegExp) {
  const p = spawn(process.execPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const exited = new Promise<number | null>((resolve) => p.on("exit", (code) => resolve(code)));
  const line = new Promise<string>((resolve, reject) => {
    p.stdout!.on("data", (d) => {
      out += d;
      const hit = out.split("\n").find((l) => ready.test(l));
      if (hit !== undefined) resolve(hit);
    });
    p.stderr!.on("data", (d) => {
      out += d;
    });
    exited.then((code) => reject(new Error(`exited ${code} before ready:\n${out}`)));
  });
  return { p, line, exited, output: () => out };
}

/**
 * Bare packages the compiled code imports statically (what must resolve at load time).
 * tsc writes each import/export-from on one line; dynamic `import()` of a package is not
 * used outside a from-source-only code string (src/replay/run-parallel.ts), so it is not
 * scanned.
 */
function bareImports(dir: string): Set<string> {
  const found = new Set<string>();
  const re = /^\s*(?:(?:import|export)\b[^;"']*?\bfrom\s*|import\s*)["']([^"'./][^"']*)["']/gm;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".js")) continue;
    const text = readFileSync(join(entry.parentPath, entry.name), "utf8");
    for (const m of text.matchAll(re)) {
      const spec = m[1]!;
      if (spec.startsWith("node:") || builtinModules.includes(spec)) continue;
      const parts = spec.split("/");
      found.add(spec.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!);
    }
  }
  return found;
}

describe("install → build → start, as the image does", () => {
  let tmp: string;
  const procs: ChildProcess[] = [];

  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), "kvrouter-image-"));
  });
  afterAll(() => {
    for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Replay one stage's COPY/RUN steps into `dir`; `/abs` destinations go under `fsRoot`. */
  async function replay(
    stage: Stage,
    dir: string,
    fsRoot: string,
    stageDirs: Record<string, string>,
  ) {
    mkdirSync(dir, { recursive: true });
    const workdir = one(stage, "WORKDIR").args; // /app
    for (const step of stage.steps) {
      if (step.keyword === "COPY") {
        const c = copyOf(step);
        const base = c.from === null ? ROOT : stageDirs[c.from]!;
        for (const src of c.sources) {
          const from =
            c.from === null ? join(base, src) : join(base, src.replace(`${workdir}/`, ""));
          const dest = c.dest.startsWith("/") ? join(fsRoot, c.dest) : join(dir, c.dest);
          const target =
            c.sources.length > 1 || c.dest.endsWith("/") ? join(dest, src.split("/").pop()!) : dest;
          mkdirSync(dirname(target), { recursive: true });
          cpSync(from, target, { recursive: true });
        }
      } else if (step.keyword === "RUN") {
        for (const cmd of step.args.split("&&").map((s) => s.trim())) {
          if (/^npm ci\b/.test(cmd)) {
            // The one step not run for real: link the dependencies already installed here.
            if (!existsSync(join(dir, "node_modules"))) {
              symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
            }
          } else if (cmd === "npm cache clean --force") {
            // nothing to clean in a linked tree
          } else {
            const [bin, ...args] = cmd.split(/\s+/);
            const r = await run(bin!, args, { cwd: dir });
            expect(r.code, `${cmd}:\n${r.out}`).toBe(0);
          }
        }
      }
    }
  }

  it("builds, starts the router and a sim-worker, passes HEALTHCHECK, exits 0 on SIGTERM", async () => {
    const buildDir = join(tmp, "build", "app");
    const fsRoot = join(tmp, "runtime");
    const appDir = join(fsRoot, "app");
    await replay(build!, buildDir, join(tmp, "build"), {});
    expect(existsSync(join(buildDir, "dist", "cli.js"))).toBe(true);
    await replay(runtime, appDir, fsRoot, { build: buildDir });
    expect(existsSync(join(fsRoot, "etc/kvrouter/config.yaml"))).toBe(true);
    // The image's own file listens on every interface, so without a token it refuses.
    const imageFile = ["--config", join(fsRoot, "etc/kvrouter/config.yaml")];
    const bare = loadConfig({ argv: imageFile, env: {} });
    expect(bare.kind).toBe("invalid");
    if (bare.kind === "invalid") expect(bare.issues[0]!.key).toBe("server.authToken");
    const withToken = loadConfig({ argv: imageFile, env: { KVROUTER_SERVER_AUTH_TOKEN: "t" } });
    expect(withToken.kind === "ok" && withToken.config.server.host).toBe("0.0.0.0");

    // `npm ci --omit=dev` must be enough: the compiled code imports production deps only.
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const imported = bareImports(join(appDir, "dist"));
    expect(imported).toContain("fastify"); // the scan sees real imports
    for (const dep of imported) {
      expect(Object.keys(pkg.dependencies), `dist imports ${dep}`).toContain(dep);
    }

    const imageEnv = envOf(runtime);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      ...imageEnv,
      KVROUTER_CONFIG: join(fsRoot, imageEnv.KVROUTER_CONFIG!),
      // Tests stay on loopback (the image's file listens on 0.0.0.0) and take any free port.
      KVROUTER_SERVER_HOST: "127.0.0.1",
      KVROUTER_SERVER_PORT: "0",
    };
    const [entry, ...entryArgs] = JSON.parse(one(runtime, "ENTRYPOINT").args) as string[];
    expect(entry).toBe("node");
    const cmd = JSON.parse(one(runtime, "CMD").args) as string[];
    const hc = one(runtime, "HEALTHCHECK").args;
    const [, ...hcArgs] = JSON.parse(hc.slice(hc.indexOf("CMD") + 3).trim()) as string[];

    const router = start([...entryArgs, ...cmd], appDir, env, /kvrouter listening/);
    procs.push(router.p);
    const port = (JSON.parse(await router.line) as { address: { port: number } }).address.port;
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    // The router's port reaches the check as it would in a container: KVROUTER_SERVER_PORT.
    const check = await run(process.execPath, hcArgs, {
      cwd: appDir,
      env: { ...env, KVROUTER_SERVER_PORT: String(port) },
    });
    expect(check.code, check.out).toBe(0);

    const sim = start(
      [...entryArgs, "sim-worker", "--port", "0", "--events-port", "0", "--replay-port", "0"],
      appDir,
      env,
      /sim-worker listening/,
    );
    procs.push(sim.p);
    const simUrl = (JSON.parse(await sim.line) as { url: string }).url;
    const simCheck = await run(process.execPath, hcArgs, {
      cwd: appDir,
      env: { ...env, HEALTHCHECK_URL: `${simUrl}/health` },
    });
    expect(simCheck.code, simCheck.out).toBe(0);
    // And the check fails when nothing answers.
    const down = await run(process.execPath, hcArgs, {
      cwd: appDir,
      env: { ...env, HEALTHCHECK_URL: `${simUrl}/no-such-route` },
    });
    expect(down.code).toBe(1);

    router.p.kill("SIGTERM");
    sim.p.kill("SIGTERM");
    expect(await router.exited, router.output()).toBe(0);
    expect(await sim.exited, sim.output()).toBe(0);
  }, 180_000);
});

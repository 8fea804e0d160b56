/**
 * Starting a worker thread from this source tree, whether it runs compiled (`.js`) or
 * from TypeScript under tsx or vitest (`.ts`). A `.ts` entry point goes through a small
 * bootstrap that loads it with tsx's `tsImport`, because tsx's `--import` hook does not
 * reach worker threads (Node then rejects the `.ts` entry point). Used by the decode
 * thread (`ingest/decode-thread.ts`) and the tokenizer pool (`tokenize/encode-pool.ts`).
 */

import { createRequire } from "node:module";
import { extname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker, type WorkerOptions } from "node:worker_threads";

/**
 * The URL of the module `name` (no extension) beside `moduleUrl` (the caller's
 * `import.meta.url`), with the caller's own extension: `.ts` from source, `.js` compiled.
 */
export function siblingModule(moduleUrl: string, name: string): URL {
  return new URL(`./${name}${extname(fileURLToPath(moduleUrl))}`, moduleUrl);
}

/** A worker thread running `entry` (a `.js` or `.ts` module URL). */
export function startWorkerThread(entry: URL, options: WorkerOptions = {}): Worker {
  if (extname(fileURLToPath(entry)) !== ".ts") return new Worker(entry, options);
  const tsxPackage = createRequire(import.meta.url).resolve("tsx/package.json");
  const api = new URL("./dist/esm/api/index.mjs", pathToFileURL(tsxPackage)).href;
  const target = JSON.stringify(entry.href);
  const code =
    `import(${JSON.stringify(api)}).then((tsx) => tsx.tsImport(${target}, ${target}))` +
    ".catch((err) => { console.error(err); process.exit(1); });";
  return new Worker(code, { ...options, eval: true });
}

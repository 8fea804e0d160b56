/**
 * Process lifetime of every `kvrouter` command: it ends when the process that started it
 * ends. A signal is the usual way (each long-running command stops cleanly on SIGTERM,
 * SIGINT and SIGHUP), but a parent killed with SIGKILL, or a launcher that dies without
 * passing the signal on (npm does so for SIGHUP), sends nothing: the child is re-parented
 * and would keep its ports forever. So the command watches its parent and, when the
 * parent is gone, sends itself SIGTERM, which runs the same clean shutdown as a `kill`.
 *
 * A process started by PID 1 or with no parent (a container's entry point, a systemd
 * unit, a daemon already detached) is not watched: its parent is the supervisor.
 *
 * Node's `process.ppid` is read once at start-up (Node 20), so the current parent comes
 * from `/proc/self/stat` on Linux; elsewhere the original parent is probed with signal 0.
 */

import { readFileSync } from "node:fs";

/** How often the parent is checked; the delay between its death and ours. */
const WATCH_INTERVAL_MS = 250;

/** The signals every long-running command treats as "stop cleanly". */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];

/** The current parent pid, or null when it cannot be read. */
function currentParent(originalParent: number): number | null {
  if (process.platform === "linux") {
    try {
      const stat = readFileSync("/proc/self/stat", "utf8");
      // Field 4, after the command name in parentheses (which may contain spaces).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ppid = Number(fields[1]);
      return Number.isInteger(ppid) ? ppid : null;
    } catch {
      return null;
    }
  }
  try {
    process.kill(originalParent, 0);
    return originalParent;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM" ? originalParent : 1;
  }
}

/**
 * Watch the parent; when it is gone, `onOrphaned` (default: SIGTERM to this process).
 * Returns a function that stops watching. The timer never keeps the process alive.
 */
export function exitWithParent(
  onOrphaned: () => void = () => process.kill(process.pid, "SIGTERM"),
): () => void {
  const parent = process.ppid;
  if (parent <= 1) return () => {};
  const timer = setInterval(() => {
    const now = currentParent(parent);
    if (now !== null && now !== parent) {
      clearInterval(timer);
      onOrphaned();
    }
  }, WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** Durable renames: fsync of the directory that holds the renamed file. */

import { closeSync, fsyncSync, openSync } from "node:fs";

/** The rename is durable once the directory is synced (best effort: not on every FS). */
export function syncDir(dir: string): void {
  try {
    const fd = openSync(dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename itself is atomic.
  }
}

/**
 * Fetching another replica's snapshot at start (`snapshot.fromPeer`): one
 * `GET <peer>/v1/snapshot` with a deadline, the whole body in memory (the caller checks it
 * exactly as a file: `SnapshotStore.check`). Any failure to get the bytes is a reason
 * code and a message, never an exception: the router then starts cold.
 */

export type PeerFetch =
  | { readonly ok: true; readonly bytes: Uint8Array; readonly url: string }
  | {
      readonly ok: false;
      /** `unreachable` (connection, DNS, deadline) or `http_status` (a non-200 answer). */
      readonly reason: "unreachable" | "http_status";
      readonly url: string;
      readonly message: string;
    };

export async function fetchPeerSnapshot(
  base: string,
  options: { readonly token: string | null; readonly timeoutMs: number },
): Promise<PeerFetch> {
  // Under the base's path, not at the host's root: a peer behind a path prefix
  // (`http://lb/router-a`) serves its API there.
  const url = snapshotUrl(base);
  const headers: Record<string, string> = { accept: "application/octet-stream" };
  if (options.token !== null) headers.authorization = `Bearer ${options.token}`;
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(options.timeoutMs) });
    if (res.status !== 200) {
      const text = (await res.text()).slice(0, 300);
      return { ok: false, reason: "http_status", url, message: `HTTP ${res.status}: ${text}` };
    }
    return { ok: true, url, bytes: new Uint8Array(await res.arrayBuffer()) };
  } catch (err) {
    const e = err as Error & { cause?: unknown };
    const cause = e.cause === undefined ? "" : ` (${String(e.cause)})`;
    return { ok: false, reason: "unreachable", url, message: `${String(err)}${cause}` };
  }
}

/** `<base>/v1/snapshot`, keeping any path the base URL has. */
export function snapshotUrl(base: string): string {
  const u = new URL(base);
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  return new URL("v1/snapshot", u).toString();
}

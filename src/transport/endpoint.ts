/**
 * ZeroMQ endpoint arithmetic for data-parallel engines: rank r of an engine uses
 * port P + r for both its PUB and replay sockets (vLLM's convention, wire-formats §1).
 * Ephemeral binds (`tcp://127.0.0.1:*`, used by tests) are left alone: each rank then
 * gets its own port from the OS and the caller reads the real one back.
 */

const TCP_ENDPOINT = /^(tcp:\/\/(?:\[[0-9a-fA-F:]+\]|[^:/\s]+)):(\d{1,5}|\*)$/;

/** Split `tcp://host:port` into its address and port ("*" for an ephemeral bind). */
export function splitTcpEndpoint(endpoint: string): { address: string; port: number | "*" } | null {
  const m = TCP_ENDPOINT.exec(endpoint);
  if (m === null) return null;
  const port = m[2] === "*" ? "*" : Number(m[2]);
  if (port !== "*" && (port < 1 || port > 65535)) return null;
  return { address: m[1]!, port };
}

/**
 * The endpoint of data-parallel rank `rank` given rank 0's. Throws on an endpoint that
 * has no TCP port to offset (rank > 0 only) or when the result leaves the port range.
 */
export function endpointForRank(endpoint: string, rank: number): string {
  if (!Number.isInteger(rank) || rank < 0) throw new RangeError(`invalid dp rank ${rank}`);
  if (rank === 0) return endpoint;
  const parts = splitTcpEndpoint(endpoint);
  if (parts === null) {
    throw new Error(`endpoint ${endpoint} has no tcp port to offset for dp rank ${rank}`);
  }
  if (parts.port === "*") return endpoint;
  const port = parts.port + rank;
  if (port > 65535)
    throw new RangeError(`endpoint ${endpoint} + dp rank ${rank} exceeds port 65535`);
  return `${parts.address}:${port}`;
}

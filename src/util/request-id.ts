/**
 * Request ids the router generates for callers that send none: `kvr-` and 128 random bits
 * in hex from the platform's CSPRNG (Web Crypto, a global in Node ≥ 19), so nobody can
 * guess another caller's id and end its request (`POST /v1/requests/:id/done`).
 */

/** A fresh unguessable request id, `kvr-` + 32 hex digits. */
export function randomRequestId(): string {
  const words = crypto.getRandomValues(new Uint32Array(4));
  let hex = "kvr-";
  for (const w of words) hex += w.toString(16).padStart(8, "0");
  return hex;
}

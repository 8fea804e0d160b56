/**
 * Room for thousands of ZeroMQ sockets. libzmq's context allows 1,023 sockets by default
 * (`ZMQ_MAX_SOCKETS`), and a router that follows 1,000 engines needs one SUB per engine
 * plus a DEALER per replay in flight: past the limit socket creation fails, and inside
 * the native addon that aborted the whole process (measured: `bench/many-engines-bench.ts`,
 * docs/scaling.md). The limit is read when the context starts, i.e. at the first socket
 * of the process (the context is shared by all threads), so every module that creates
 * sockets imports this one first, for its side effect. File descriptors remain bounded
 * by the process's `ulimit -n` (docs/scaling.md).
 */

import { context } from "zeromq";

/** Sockets one process may open: far above any fleet, cheap (one slot pointer each). */
export const MAX_SOCKETS = 65_536;

if (context.maxSockets < MAX_SOCKETS) context.maxSockets = MAX_SOCKETS;

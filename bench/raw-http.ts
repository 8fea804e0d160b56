/**
 * HTTP/1.1 over bare `net` sockets, for the closed loops of `bench:gateway`: a client and
 * a server that do as little CPU work per request as the protocol allows, so that on this
 * 2-core machine the bench's own client and stand-in engines take less of the cores the
 * gateway is measured on. Only what the loops need: keep-alive, one request at a time per
 * connection, `content-length` request bodies, answers framed by `content-length` or
 * `transfer-encoding: chunked`. Not a general HTTP implementation; the gateway's own
 * tests use real clients and servers.
 */

import { connect, createServer, type Server, type Socket } from "node:net";

const CRLF2 = Buffer.from("\r\n\r\n");

/** What one answer was: status, and ms from the request's write to its first body byte. */
export interface RawAnswer {
  readonly status: number;
  readonly firstByteMs: number;
}

/** Reads one HTTP/1.1 answer's framing from the bytes as they arrive. */
class AnswerReader {
  #head: Buffer | null = Buffer.alloc(0);
  status = 0;
  #chunked = false;
  /** Body bytes still expected (content-length), or of the current chunk. */
  #left = 0;
  /** Chunked: what is being read — a size line, chunk data, the CRLF after it, the trailer. */
  #state: "size" | "data" | "crlf" | "trailer" = "size";
  #line = "";
  firstBody = false;

  /** Feeds bytes; true once the answer is complete (bytes after it are not expected). */
  feed(buf: Buffer): boolean {
    let at = 0;
    if (this.#head !== null) {
      const all = this.#head.length === 0 ? buf : Buffer.concat([this.#head, buf]);
      const end = all.indexOf(CRLF2);
      if (end < 0) {
        this.#head = all;
        return false;
      }
      const head = all.toString("latin1", 0, end);
      this.status = Number(head.slice(9, 12));
      const lower = head.toLowerCase();
      this.#chunked = lower.includes("\r\ntransfer-encoding: chunked");
      const cl = /\r\ncontent-length: *(\d+)/.exec(lower);
      this.#left = cl === null ? 0 : Number(cl[1]);
      this.#head = null;
      buf = all;
      at = end + 4;
      if (!this.#chunked) {
        if (buf.length > at) this.firstBody = true;
        this.#left -= buf.length - at;
        return this.#left <= 0;
      }
    } else if (!this.#chunked) {
      this.firstBody = true;
      this.#left -= buf.length;
      return this.#left <= 0;
    }
    while (at < buf.length) {
      if (this.#state === "data") {
        this.firstBody = true;
        const take = Math.min(this.#left, buf.length - at);
        at += take;
        this.#left -= take;
        if (this.#left === 0) this.#state = "crlf";
        continue;
      }
      const nl = buf.indexOf(10, at);
      if (nl < 0) {
        this.#line += buf.toString("latin1", at);
        return false;
      }
      const line = (this.#line + buf.toString("latin1", at, nl)).trimEnd();
      this.#line = "";
      at = nl + 1;
      if (this.#state === "crlf") this.#state = "size";
      else if (this.#state === "size") {
        this.#left = Number.parseInt(line, 16);
        this.#state = this.#left === 0 ? "trailer" : "data";
      } else if (line === "") return true; // the trailer's end
    }
    return false;
  }
}

/** One keep-alive connection sending a request at a time. */
export class RawConnection {
  #socket: Socket | null = null;
  #pending: {
    reader: AnswerReader;
    t0: number;
    first: number;
    resolve: (a: RawAnswer) => void;
    reject: (e: Error) => void;
  } | null = null;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  #open(): Socket {
    const s = connect({ host: this.host, port: this.port, noDelay: true });
    s.on("data", (buf: Buffer) => {
      const p = this.#pending;
      if (p === null) return;
      const done = p.reader.feed(buf);
      if (p.first < 0 && p.reader.firstBody) p.first = performance.now() - p.t0;
      if (done) {
        this.#pending = null;
        p.resolve({ status: p.reader.status, firstByteMs: p.first });
      }
    });
    const gone = (err?: Error) => {
      this.#socket = null;
      const p = this.#pending;
      this.#pending = null;
      p?.reject(err ?? new Error("connection closed before the answer ended"));
    };
    s.on("error", gone);
    s.on("close", () => gone());
    this.#socket = s;
    return s;
  }

  /**
   * Sends `head` (request line and headers, ending in a blank line) and the body's
   * `parts`, in one write of the socket.
   */
  send(head: Buffer, ...parts: Buffer[]): Promise<RawAnswer> {
    const s = this.#socket ?? this.#open();
    return new Promise<RawAnswer>((resolve, reject) => {
      this.#pending = {
        reader: new AnswerReader(),
        t0: performance.now(),
        first: -1,
        resolve,
        reject,
      };
      s.cork();
      s.write(head);
      for (const p of parts) s.write(p);
      process.nextTick(() => s.uncork());
    });
  }

  close(): void {
    this.#socket?.destroy();
    this.#socket = null;
  }
}

/** The request line and headers of a JSON POST with a `body.length`-byte body. */
export function postHead(hostPort: string, path: string, bodyLength: number): Buffer {
  return Buffer.from(
    `POST ${path} HTTP/1.1\r\nhost: ${hostPort}\r\ncontent-type: application/json\r\ncontent-length: ${bodyLength}\r\n\r\n`,
    "latin1",
  );
}

/** A request as the raw server hands it over. */
export interface RawRequest {
  readonly method: string;
  readonly url: string;
  readonly body: Buffer;
}

/** Writes one answer on a raw server's connection; `end()` frees it for the next request. */
export class RawReply {
  #chunked = false;
  constructor(
    private readonly socket: Socket,
    private readonly done: () => void,
  ) {}

  /** A whole answer with a `content-length`. */
  send(status: number, contentType: string, body: string): void {
    const bytes = Buffer.byteLength(body);
    this.socket.write(
      `HTTP/1.1 ${status} OK\r\ncontent-type: ${contentType}\r\ncontent-length: ${bytes}\r\nconnection: keep-alive\r\n\r\n${body}`,
    );
    this.done();
  }

  /** Starts a chunked answer. */
  start(status: number, contentType: string): void {
    this.#chunked = true;
    this.socket.write(
      `HTTP/1.1 ${status} OK\r\ncontent-type: ${contentType}\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n`,
    );
  }

  /** One chunk of a chunked answer. */
  write(data: string): void {
    this.socket.write(`${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`);
  }

  /** The last chunk (`data`, if any) and the end of a chunked answer. */
  end(data?: string): void {
    if (!this.#chunked) throw new Error("RawReply.end: not a chunked answer");
    this.socket.write(
      data === undefined
        ? "0\r\n\r\n"
        : `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n0\r\n\r\n`,
    );
    this.done();
  }
}

/**
 * A keep-alive HTTP/1.1 server reading `content-length` bodies (a chunked request body is
 * refused: the connection is closed). Requests on one connection are answered in order.
 */
export function rawServer(handle: (req: RawRequest, reply: RawReply) => void): Server {
  return createServer({ noDelay: true }, (socket) => {
    let buf: Buffer = Buffer.alloc(0);
    let busy = false;
    const next = () => {
      if (busy) return;
      const end = buf.indexOf(CRLF2);
      if (end < 0) return;
      const head = buf.toString("latin1", 0, end);
      const lower = head.toLowerCase();
      if (lower.includes("\r\ntransfer-encoding:")) {
        socket.destroy();
        return;
      }
      const cl = /\r\ncontent-length: *(\d+)/.exec(lower);
      const length = cl === null ? 0 : Number(cl[1]);
      if (buf.length < end + 4 + length) return;
      const sp = head.indexOf(" ");
      const req: RawRequest = {
        method: head.slice(0, sp),
        url: head.slice(sp + 1, head.indexOf(" ", sp + 1)),
        body: buf.subarray(end + 4, end + 4 + length),
      };
      buf = buf.subarray(end + 4 + length);
      busy = true;
      handle(
        req,
        new RawReply(socket, () => {
          busy = false;
          if (buf.length > 0) next();
        }),
      );
    };
    socket.on("data", (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      next();
    });
    socket.on("error", () => socket.destroy());
  });
}

// A loopback HTTP server that serves one blob (a gzip'd release) the way the hub will: with
// Range support, counting the body bytes it sends; it can ignore ranges, and stop a response
// after a number of body bytes until the test cuts the connection (once the client has taken
// every byte sent: a client may drop bytes it had not yet read when the link breaks), to test
// resumed downloads.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReleaseServerOptions {
  /** Answer 200 with the whole blob even when asked for a range. */
  ignoreRange?: boolean;
  /** Label the blob `Content-Encoding: gzip`, as a server compressing on the fly would. */
  gzipEncoding?: boolean;
}

const CHUNK = 16_384;

export class ReleaseServer {
  /** Body bytes sent so far, over all requests. */
  served = 0;
  /** The Range header of each request (null: none). */
  readonly ranges: (string | null)[] = [];
  /** Hold the next response after this many body bytes until cut() (then back to undefined). */
  holdNextAfter: number | undefined;
  private cutHeld: (() => void) | undefined;
  private readonly server: Server;

  private constructor(
    public blob: Uint8Array,
    private readonly opts: ReleaseServerOptions,
  ) {
    this.server = createServer((req, res) => this.answer(req, res));
  }

  static async start(blob: Uint8Array, opts: ReleaseServerOptions = {}): Promise<ReleaseServer> {
    const s = new ReleaseServer(blob, opts);
    await new Promise<void>((resolve) => s.server.listen(0, "127.0.0.1", resolve));
    return s;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/release.gz`;
  }

  /** Ends the held response's connection before the length it promised. */
  cut(): void {
    this.cutHeld?.();
    this.cutHeld = undefined;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const range = req.headers.range ?? null;
    this.ranges.push(range);
    const m = /^bytes=(\d+)-$/.exec(range ?? "");
    const size = this.blob.length;
    if (m === null || this.opts.ignoreRange) return void this.send(res, 200, 0, {});
    const start = Number(m[1]);
    if (start >= size) {
      res.writeHead(416, { "content-range": `bytes */${size}` }).end();
      return;
    }
    void this.send(res, 206, start, { "content-range": `bytes ${start}-${size - 1}/${size}` });
  }

  /** The blob from `start` in 16 KiB chunks, each written once the last one drained. */
  private async send(
    res: ServerResponse,
    status: number,
    start: number,
    headers: Record<string, string>,
  ) {
    const cut = this.holdNextAfter;
    this.holdNextAfter = undefined;
    const body = this.blob.subarray(start);
    res.writeHead(status, {
      ...headers,
      "content-length": String(body.length),
      "content-type": "application/gzip",
      ...(this.opts.gzipEncoding && { "content-encoding": "gzip" }),
    });
    let at = 0;
    while (at < body.length) {
      if (cut !== undefined && at >= cut) {
        await new Promise<void>((resolve) => {
          this.cutHeld = resolve;
        });
        res.socket?.end();
        return;
      }
      const end = Math.min(body.length, at + CHUNK, cut ?? Number.POSITIVE_INFINITY);
      const ok = res.write(body.subarray(at, end));
      this.served += end - at;
      at = end;
      if (!ok) await new Promise((resolve) => res.once("drain", resolve));
      if (res.destroyed) return;
    }
    res.end();
  }
}

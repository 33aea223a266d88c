// Public API of ddp-transport-native. Names mirror uWebSockets.js where uWS has the concept.
/// <reference types="node" />
import type { Server as HttpServer } from 'http';

/** `ws.send()` results, exactly as uWebSockets.js defines them (also exported at runtime). */
export enum SendStatus {
  /** Not written yet: bytes are buffered in user space (the kernel would not take them all). */
  BACKPRESSURE = 0,
  /** Handed to the kernel, or corked for the write at the end of this JS tick. */
  SUCCESS = 1,
  /** Not queued: the bytes already buffered exceeded `maxBackpressure` (or the socket is closed). */
  DROPPED = 2,
}

export interface AppOptions {
  /** I/O threads (tokio workers): they accept connections and answer upgrades, and in the
   *  `'threads'` I/O mode own the sockets (setting it makes that mode the default). Integer
   *  1..16, default 1. */
  threads?: number;
  /** Where upgraded connections are read and written. `'inline'`: on the JS thread, in the
   *  event-loop wakeup that found them readable (Linux under Node; connections that negotiated
   *  permessage-deflate stay on the I/O threads): less CPU and latency per message at light load.
   *  `'threads'`: on the I/O threads, messages reaching JS in batches: more calls/s at saturation.
   *  Default: `DDP_TRANSPORT_NATIVE_IO` when set, else `'threads'` when `threads` is set, else
   *  `'inline'`. Where inline cannot run (macOS, Windows, Bun, Deno) the app runs `'threads'`:
   *  see `ioMode`. */
  io?: 'inline' | 'threads';
  /** Connections to the app's own listener (`listen()`), and every connection of a plain
   *  `http.Server` it is attached to (`attach()`), must open with a PROXY protocol header (v1 or
   *  v2, as HAProxy's `send-proxy`/`send-proxy-v2` or a cloud network load balancer send it); the
   *  client it names is then the socket's remote address (on an attached server also the
   *  `net.Socket`'s `remoteAddress`/`remotePort`/`remoteFamily`, so `req.socket.remoteAddress` of
   *  plain HTTP requests). A connection without a valid header is closed unanswered. `attach()` to
   *  an `https.Server` throws. Default false. */
  proxyProtocol?: boolean;
  /** Admission control for reconnect storms, in the core before any JS runs: `true`/omitted =
   *  the defaults (on), `false` = off, or limits merged over the defaults. */
  admission?: boolean | AdmissionOptions;
}

/** Admission control's limits (integers; 0 turns a bound off). While JS is behind (its lag, its
 *  open events not taken, or its admission window of new clients not yet heard from) an upgrade
 *  is held; one held longer than `holdMs` is answered 503 with `Retry-After`. A server that keeps
 *  up admits at full speed and never refuses. */
export interface AdmissionOptions {
  /** A fixed cap on upgrades admitted per second (0..1e6, default 0 = none). */
  upgradesPerSecond?: number;
  /** With `upgradesPerSecond`: upgrades admitted at once after a quiet period (1..1e6, default 1000). */
  burst?: number;
  /** Admitted sockets whose open event (or upgrade event, with an `upgrade` hook) JS has not
   *  taken yet; new upgrades wait while this many do (0..1e6, default 256; 0 = no bound). */
  maxPendingOpens?: number;
  /** New upgrades wait while JS's oldest unhandled event has waited longer than this, ms
   *  (0..60000, default 10; 0 = no bound): keeps existing clients' latency near it in a storm. */
  maxLagMs?: number;
  /** Longest an upgrade is held before it is refused, ms (0..8000, default 5000). */
  holdMs?: number;
  /** `Retry-After` of a refusal, seconds (0..86400, default 2). */
  retryAfterSeconds?: number;
}

/**
 * permessage-deflate (RFC 7692) settings; names follow faye's permessage-deflate plus Meteor's
 * `threshold`. Runs on the I/O threads, never on the JS thread.
 */
export interface CompressionOptions {
  /** Messages shorter than this many bytes are sent uncompressed. Default 1024. */
  threshold?: number;
  /** zlib level 0..9. Default 1. */
  level?: number;
  /** Accepted for compatibility (1..9) but NOT honoured: flate2 fixes memLevel at 8. */
  memLevel?: number;
  /** Accepted for compatibility (0..4) but NOT honoured: flate2 has no strategy control. */
  strategy?: number;
  /** Server does not keep its LZ77 window between messages (`server_no_context_takeover`):
   *  one compressor per I/O thread is shared by every socket (zero bytes per socket). Default true. */
  noContextTakeover?: boolean;
  /** Server window bits 8..15 (8 is served as 9: zlib cannot deflate with 8). Default 8. */
  maxWindowBits?: number;
  /** Ask the client not to keep its window (`client_no_context_takeover`). Default false. */
  requestNoContextTakeover?: boolean;
  /** Bound the client's window (8..15): `client_max_window_bits=N` when the client offered
   *  `client_max_window_bits`; below 15, a client that did not offer it is asked for
   *  `client_no_context_takeover` instead. Default 10: the server then keeps only the window's last
   *  1 KiB between a client's messages, not an inflater. 15 answers exactly as Meteor (faye) does. */
  requestMaxWindowBits?: number;
}

export interface UpgradeRequest {
  method: string;
  /** Request target as sent: path plus query string. */
  url: string;
  /** Lower-case header names; repeated headers are joined with ", ". */
  headers: Record<string, string>;
  /** As Node's `socket.remoteAddress` for the same connection (`::ffff:a.b.c.d` for an IPv4 client
   *  of a dual-stack listener); undefined on a unix socket. With `proxyProtocol`, the client the
   *  PROXY header named (the TCP peer when it named none: LOCAL, UNKNOWN). */
  remoteAddress: string | undefined;
  remotePort: number | undefined;
  /** Offered subprotocols (Sec-WebSocket-Protocol), in order. */
  protocols: string[];
  /** The raw Sec-WebSocket-Extensions offer ("" if none). */
  extensions: string;
}

/** Response headers: `{ name: value }` (an array value repeats the header) or [name, value] pairs. */
export type AnswerHeaders = Record<string, string | string[]> | Array<[string, string]>;

export interface UpgradeResponse<UserData> {
  /** Accept the upgrade; `userData` becomes `ws.getUserData()`; `protocol` is echoed if offered.
   *  `headers` go into the 101 response (not Upgrade, Connection or Sec-WebSocket-*, which the
   *  handshake writes); `extensions`: negotiate permessage-deflate from this offer instead of the
   *  request's (`""`: no compression for this client). A header name that is not an HTTP token,
   *  or a value with CR/LF/NUL, throws. */
  accept(userData?: UserData, protocol?: string, options?: { headers?: AnswerHeaders; extensions?: string }): void;
  /** Refuse it with an HTTP status 200..599 (otherwise, and by default, 403), `statusText` as the
   *  reason phrase (default: the standard one), `headers` (a Content-Type replaces text/plain;
   *  Content-Length and Connection are the core's) and a body. */
  reject(status?: number, body?: string, options?: { headers?: AnswerHeaders; statusText?: string }): void;
  /** `cb` runs if the client goes away before accept/reject; answering after that does nothing. */
  onAborted(cb: () => void): this;
}

export interface WebSocketBehavior<UserData = Record<string, unknown>> {
  /** false (default) or permessage-deflate settings (`true` = the defaults above). */
  compression?: boolean | CompressionOptions;
  /** Largest message in bytes, counted after inflating, across fragments. Default 16 MiB. Over → close 1009. */
  maxPayloadLength?: number;
  /** Largest number of frames one message may span. Default 131072. Over → close 1009. */
  maxFragments?: number;
  /** Seconds without receiving anything before the socket is closed (1001). 0 = off. Default 120. */
  idleTimeout?: number;
  /** Bytes buffered per socket before `send` returns DROPPED. Default 16 MiB. */
  maxBackpressure?: number;
  /** Past `maxBackpressure`, close the socket (close code 1013) instead of keeping it open and
   *  dropping the frame: the send that crosses the limit returns DROPPED and the socket closes;
   *  `stats().dropped` stays 0. Default false. */
  closeOnBackpressureLimit?: boolean;
  /** Ping when half of `idleTimeout` passed without traffic. Default true. */
  sendPingsAutomatically?: boolean;
  /** Optional hook to accept/reject an upgrade and attach user data; may answer later (async). */
  upgrade?: (req: UpgradeRequest, res: UpgradeResponse<UserData>) => void;
  open?: (ws: WebSocket<UserData>) => void;
  /** Text frames arrive as strings, binary as Buffers. Called once per complete message. */
  message?: (ws: WebSocket<UserData>, data: string | Buffer, isBinary: boolean) => void;
  /** Buffered bytes went back to 0 after a BACKPRESSURE. */
  drain?: (ws: WebSocket<UserData>) => void;
  /** A ping received (the core answers it itself); only routes with this handler report them. */
  ping?: (ws: WebSocket<UserData>, data: Buffer) => void;
  /** A pong received. */
  pong?: (ws: WebSocket<UserData>, data: Buffer) => void;
  /** Exactly once per socket. `code` is the close frame received or sent; 1006 if none. */
  close?: (ws: WebSocket<UserData>, code: number, reason: string) => void;
}

/**
 * A connection. After close every method is a harmless no-op: `send` returns DROPPED (2),
 * `getBufferedAmount` 0, `end`/`close` nothing, `cork(fn)` still calls `fn`; getters keep working.
 */
export interface WebSocket<UserData = Record<string, unknown>> {
  /** Queue one frame. `isBinary` defaults to `typeof data !== 'string'`; `compress` (default true)
   *  lets the message be compressed when the extension is on and it is at least `threshold` bytes. */
  send(data: string | Buffer | ArrayBuffer | ArrayBufferView, isBinary?: boolean, compress?: boolean): SendStatus;
  /** Graceful: queued frames, then the close frame, then (bounded) the peer's close, then FIN. */
  end(code?: number, reason?: string): void;
  /** Forceful: immediate, no close frame; `close` handler gets 1006. */
  close(): void;
  /** Runs `fn` and writes everything it sent in one syscall (all sends of a JS tick are corked anyway). */
  cork(fn: () => void): this;
  /** Exact bytes queued in user space and not yet accepted by the kernel. */
  getBufferedAmount(): number;
  /** The peer's address exactly as Node's `socket.remoteAddress` writes it for the same connection
   *  (IPv4-mapped `::ffff:a.b.c.d` for an IPv4 client of a dual-stack `::` listener, plain IPv6,
   *  plain IPv4); undefined when the server listens on a unix socket path (read
   *  `X-Forwarded-For` there). With `proxyProtocol`, the client the PROXY header named (the TCP
   *  peer when it named none: LOCAL, UNKNOWN). */
  getRemoteAddressAsText(): string | undefined;
  /** undefined on a unix socket. */
  getRemotePort(): number | undefined;
  getUserData(): UserData;
  /** Request target of the upgrade (path + query). */
  getUrl(): string;
  /** Lower-case request headers of the upgrade. */
  getHeaders(): Record<string, string>;
  /** Negotiated subprotocol ("" if none). */
  getProtocol(): string;
  /** Negotiated extensions header ("" if none). */
  getExtensions(): string;
  /** Per-socket idle timeout in **milliseconds** (0 = off); overrides the behavior's `idleTimeout`. */
  setIdleTimeout(ms: number): void;
  /** True once closed (or once end()/close() was called). */
  readonly closed: boolean;
}

export interface ListenToken {
  host: string;
  port: number;
}

export interface AttachOptions {
  /** Path patterns whose upgrades this app takes over (default: every `ws()` pattern). */
  paths?: string[];
}

export interface DrainOptions {
  /** Sockets ended per step. Default 100. */
  batch?: number;
  /** Pause between steps. Default 50 ms. */
  intervalMs?: number;
  /** Close code. Default 1001. */
  code?: number;
  reason?: string;
}

export interface Stats {
  connections: number;
  upgradesAccepted: number;
  upgradesRejected: number;
  messagesIn: number;
  messagesOut: number;
  /** Payload bytes before compression / after inflating. */
  bytesIn: number;
  bytesOut: number;
  /** Bytes on the wire (frames, after compression). */
  wireBytesIn: number;
  wireBytesOut: number;
  backpressureEvents: number;
  /** Frames refused (DROPPED) on a socket that stayed open; 0 with closeOnBackpressureLimit. */
  dropped: number;
  /** Messages run through a deflater: once per distinct message with server_no_context_takeover
   *  (the compress-once cache), once per socket and message with context takeover. */
  compressions: number;
  /** Compressed messages whose payload was reused from the compress-once cache (an identical
   *  message, same deflate parameters, was already compressed for another socket). */
  compressionsReused: number;
  /** Admission control: whether it bounds upgrades (`on`), upgrades let through, held first
   *  (whether admitted or refused after), answered 503 + Retry-After; gauges: `waiting`, admitted
   *  sockets whose first event JS has not taken yet; `window`, the admission window's size (new
   *  clients that may be in flight at once); `inFlight`, new clients admitted that JS has not
   *  heard from yet (their first message or close). */
  admission: { on: boolean; admitted: number; deferred: number; refused: number; waiting: number; window: number; inFlight: number };
  closesByCode: Record<string, number>;
}

export interface TemplatedApp {
  /** The I/O mode this app runs (see `AppOptions.io`). */
  readonly ioMode: 'inline' | 'threads';
  /** Route upgrades whose path matches `pattern` ("/exact", "/prefix/*" or "/*") to `behavior`. */
  ws<UserData = Record<string, unknown>>(pattern: string, behavior: WebSocketBehavior<UserData>): TemplatedApp;
  /** Standalone listener. `cb(token)` on success, `cb(false, error)` on failure (error.code e.g. EADDRINUSE). */
  listen(host: string, port: number, cb: (token: ListenToken | false, error?: Error) => void): TemplatedApp;
  listen(port: number, cb: (token: ListenToken | false, error?: Error) => void): TemplatedApp;
  /**
   * Same-port mode: take over WebSocket upgrades from a Node `http.Server`/`https.Server` on the
   * matching paths. Plain TCP sockets are adopted by fd (no second port); sockets without an fd
   * (TLS terminated in Node; every socket on Windows, or with DDP_TRANSPORT_NATIVE_SAME_PORT=pipe)
   * are piped through Node to a lazily opened loopback listener on 127.0.0.1, port 0
   * (docs/windows.md: its cost). Other upgrades reach the server's other `upgrade` listeners
   * untouched. `server.close()` closes the app too (throws: DDP_TRANSPORT_NATIVE_SAME_PORT other
   * than "fd" or "pipe").
   */
  attach(server: HttpServer, options?: AttachOptions): TemplatedApp;
  /** Stop accepting upgrades (503), end sockets in batches with queued frames flushed. */
  drain(options?: DrainOptions): Promise<void>;
  stats(): Stats;
  /** `stats()` in the Prometheus text exposition format 0.0.4 (HELP and TYPE per family,
   *  counters end in `_total`, closes by code as the `code` label). `prefix` replaces
   *  `ddp_transport_native_`. Serve it with `metricsContentType`. */
  metrics(options?: { prefix?: string }): string;
  /** Observable instruments on an OpenTelemetry Meter (`@opentelemetry/api`, not a dependency):
   *  counters, gauges and `closes` with a `code` attribute, read from `stats()` per collection.
   *  `prefix` defaults to `ddp_transport_native.`. Returns a function that removes them. */
  registerOpenTelemetry(meter: unknown, options?: { prefix?: string }): () => void;
  /** Stop listening, close every socket (close handlers run), release the I/O threads. */
  close(): void;
}

export function App(options?: AppOptions): TemplatedApp;
/** The Content-Type of `app.metrics()` (Prometheus text format 0.0.4). */
export const metricsContentType: string;
/** Validate admission-control options as `App({ admission })` does; errors name `where` and the
 *  key. Returns the limits, or null when off. */
export function admissionOptions(value: boolean | AdmissionOptions | undefined, where: string): Required<AdmissionOptions> | null;

/**
 * Validate permessage-deflate options as `behavior.compression` would (`where` names the source in
 * error messages, e.g. "SERVER_WEBSOCKET_COMPRESSION"). Returns the options with defaults filled
 * in, or null when `value` is false/undefined. Throws TypeError/RangeError naming the key.
 */
export function compressionOptions(
  value: boolean | CompressionOptions | undefined,
  where: string,
): Required<Omit<CompressionOptions, 'requestMaxWindowBits'>> & { requestMaxWindowBits?: number } | null;

// require('ddp-transport-native/uws'): the WebSocket part of uWebSockets.js's API (v20).
// Differences from uWS.js: see docs/uws-compat.md.
/// <reference types="node" />

/** The context handed to the upgrade handler, passed back to `res.upgrade` (opaque, as in uWS.js). */
export interface us_socket_context_t {}
/** A socket handle (uWS.js types `us_socket_local_port` with it; a listen socket is one here). */
export interface us_socket {}
/** The `compression` bit flags (DISABLED, SHARED_COMPRESSOR, …). */
export type CompressOptions = number;

export type RecognizedString = string | ArrayBuffer | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array | Float64Array | DataView;

export interface WebSocket<UserData> {
  /** 0 BACKPRESSURE, 1 SUCCESS, 2 DROPPED. isBinary and compress default to false. */
  send(message: RecognizedString, isBinary?: boolean, compress?: boolean): number;
  /** Fragments are sent uncompressed. */
  sendFirstFragment(message: RecognizedString, isBinary?: boolean, compress?: boolean): number;
  sendFragment(message: RecognizedString, compress?: boolean): number;
  sendLastFragment(message: RecognizedString, compress?: boolean): number;
  /** Graceful close; the close handler runs before this returns. */
  end(code?: number, shortMessage?: RecognizedString): void;
  /** Forceful close (no close frame); the close handler runs with 1006 before this returns. */
  close(): void;
  ping(message?: RecognizedString): number;
  subscribe(topic: RecognizedString): boolean;
  unsubscribe(topic: RecognizedString): boolean;
  isSubscribed(topic: RecognizedString): boolean;
  getTopics(): string[];
  /** To every subscriber except this socket; false when the topic has no subscriber. */
  publish(topic: RecognizedString, message: RecognizedString, isBinary?: boolean, compress?: boolean): boolean;
  cork(cb: () => void): WebSocket<UserData>;
  getBufferedAmount(): number;
  /** 4 bytes (IPv4) or 16 bytes (IPv6, IPv4-mapped included). */
  getRemoteAddress(): ArrayBuffer;
  getRemoteAddressAsText(): ArrayBuffer;
  /** The client a PROXY header named (`App({ proxyProtocol: true })`), encoded as
   *  getRemoteAddress(); an empty ArrayBuffer without one. (uWS.js v20 has these on HttpResponse only.) */
  getProxiedRemoteAddress(): ArrayBuffer;
  getProxiedRemoteAddressAsText(): ArrayBuffer;
  getUserData(): UserData;
}

export interface HttpRequest {
  getHeader(lowerCaseKey: RecognizedString): string;
  getParameter(index: number | RecognizedString): string;
  getUrl(): string;
  getMethod(): string;
  getCaseSensitiveMethod(): string;
  /** undefined when the URL has no query (as uWS.js returns; its types say string). */
  getQuery(): string | undefined;
  getQuery(key: string): string | undefined;
  forEach(cb: (key: string, value: string) => void): void;
  setYield(yield_: boolean): HttpRequest;
}

export interface HttpResponse {
  /** The status line of a refusal ("401 Unauthorized", "302 Found"; 200 when none is written;
   *  outside 200–599 served as 403), or "101 Switching Protocols" before a 101's headers. */
  writeStatus(status: RecognizedString): HttpResponse;
  /** Sent with the answer: the 101 of `upgrade` (not its own Upgrade/Connection/Sec-WebSocket-*
   *  headers), or the refusal of `end`. */
  writeHeader(key: RecognizedString, value: RecognizedString): HttpResponse;
  /** Refuse the upgrade: the status and headers written, then `body`. */
  end(body?: RecognizedString): HttpResponse;
  write(chunk: RecognizedString): boolean;
  endWithoutBody(): HttpResponse;
  /** permessage-deflate is negotiated from `secWebSocketExtensions` (pass the request's header,
   *  or "" for none), as in uWS.js. */
  upgrade<UserData>(userData: UserData, secWebSocketKey: RecognizedString, secWebSocketProtocol: RecognizedString, secWebSocketExtensions: RecognizedString, context: us_socket_context_t): void;
  onAborted(handler: () => void): HttpResponse;
  cork(cb: () => void): HttpResponse;
  getRemoteAddress(): ArrayBuffer;
  getRemoteAddressAsText(): ArrayBuffer;
  /** The client a PROXY header named (`App({ proxyProtocol: true })`); an empty ArrayBuffer without one. */
  getProxiedRemoteAddress(): ArrayBuffer;
  getProxiedRemoteAddressAsText(): ArrayBuffer;
  /** Arbitrary data may be attached (e.g. `res.aborted = true` in onAborted), as in uWS.js. */
  [key: string]: any;
}

export interface WebSocketBehavior<UserData> {
  /** uWS bit flags (DISABLED, SHARED_COMPRESSOR, DEDICATED_COMPRESSOR_xKB | …_DECOMPRESSOR…) or
   *  the main API's compression object. */
  compression?: CompressOptions | boolean | import('./index').CompressionOptions;
  /** Default 16 KiB. */
  maxPayloadLength?: number;
  /** Seconds; 0 or 8..86400. Default 120. */
  idleTimeout?: number;
  /** Default 64 KiB. */
  maxBackpressure?: number;
  closeOnBackpressureLimit?: boolean;
  sendPingsAutomatically?: boolean;
  /** Minutes (0 = off): the socket is closed (as close()) after that long. */
  maxLifetime?: number;
  upgrade?: (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => void | Promise<void>;
  open?: (ws: WebSocket<UserData>) => void | Promise<void>;
  message?: (ws: WebSocket<UserData>, message: ArrayBuffer, isBinary: boolean) => void | Promise<void>;
  /** A message send() refused (DROPPED), as an ArrayBuffer. */
  dropped?: (ws: WebSocket<UserData>, message: ArrayBuffer, isBinary: boolean) => void | Promise<void>;
  drain?: (ws: WebSocket<UserData>) => void;
  /** A ping received (the core has answered it already) / a pong received. */
  ping?: (ws: WebSocket<UserData>, message: ArrayBuffer) => void;
  pong?: (ws: WebSocket<UserData>, message: ArrayBuffer) => void;
  close?: (ws: WebSocket<UserData>, code: number, message: ArrayBuffer) => void;
  subscription?: (ws: WebSocket<UserData>, topic: ArrayBuffer, newCount: number, oldCount: number) => void;
}

export interface us_listen_socket { readonly port: number }

export interface TemplatedApp {
  ws<UserData>(pattern: string, behavior: WebSocketBehavior<UserData>): TemplatedApp;
  listen(port: number, cb: (listenSocket: us_listen_socket | false) => void | Promise<void>): TemplatedApp;
  listen(host: RecognizedString, port: number, cb: (listenSocket: us_listen_socket | false) => void | Promise<void>): TemplatedApp;
  /** As uWS.js: a given port (not 0) is bound with SO_REUSEPORT unless `options` has
   *  LIBUS_LISTEN_EXCLUSIVE_PORT, so processes (node:cluster workers) listening on it share it. */
  listen(port: number, options: number, cb: (listenSocket: us_listen_socket | false) => void | Promise<void>): TemplatedApp;
  publish(topic: RecognizedString, message: RecognizedString, isBinary?: boolean, compress?: boolean): boolean;
  numSubscribers(topic: RecognizedString): number;
  close(): TemplatedApp;
}

/** `admission`: the main API's admission control (see index.d.ts); off unless given here, as
 *  uWS.js has none. `proxyProtocol`: ours (uWS.js has PROXY support only as a build flag):
 *  connections to listen() must open with a PROXY protocol v1 or v2 header; without a valid one
 *  they are closed. Not with SSLApp (it attaches to an https.Server: TLS comes first). */
export interface AppOptions {
  threads?: number;
  admission?: boolean | import('./index').AdmissionOptions;
  proxyProtocol?: boolean;
}
export interface SSLAppOptions extends AppOptions { key_file_name: string; cert_file_name: string; passphrase?: string }

export function App(options?: AppOptions): TemplatedApp;
export function SSLApp(options: SSLAppOptions): TemplatedApp;
export function us_listen_socket_close(listenSocket: us_listen_socket): void;
export function us_socket_local_port(listenSocket: us_listen_socket): number;

export const LIBUS_LISTEN_EXCLUSIVE_PORT: number;
export const DISABLED: number;
export const SHARED_COMPRESSOR: number;
export const SHARED_DECOMPRESSOR: number;
export const DEDICATED_COMPRESSOR: number;
export const DEDICATED_COMPRESSOR_3KB: number;
export const DEDICATED_COMPRESSOR_4KB: number;
export const DEDICATED_COMPRESSOR_8KB: number;
export const DEDICATED_COMPRESSOR_16KB: number;
export const DEDICATED_COMPRESSOR_32KB: number;
export const DEDICATED_COMPRESSOR_64KB: number;
export const DEDICATED_COMPRESSOR_128KB: number;
export const DEDICATED_COMPRESSOR_256KB: number;
export const DEDICATED_DECOMPRESSOR: number;
export const DEDICATED_DECOMPRESSOR_512B: number;
export const DEDICATED_DECOMPRESSOR_1KB: number;
export const DEDICATED_DECOMPRESSOR_2KB: number;
export const DEDICATED_DECOMPRESSOR_4KB: number;
export const DEDICATED_DECOMPRESSOR_8KB: number;
export const DEDICATED_DECOMPRESSOR_16KB: number;
export const DEDICATED_DECOMPRESSOR_32KB: number;

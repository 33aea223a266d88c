// require('ddp-transport-native/redis'): `publish` across instances through Redis pub/sub, for apps
// of require('ddp-transport-native/uws'). Needs the `ioredis` package (an optional dependency).
// Semantics, faults and limits: docs/redis.md.
/// <reference types="node" />
import type { TemplatedApp } from './uws';

export interface BridgeOptions {
  /** redis:// or rediss:// URL (user, password, db as ioredis reads them). Default redis://127.0.0.1:6379. */
  url?: string;
  /** Prepended to each topic to name its Redis channel. Default "ddp-transport-native:". Instances
   *  that should share topics use the same prefix. */
  prefix?: string;
  /** Messages sent to Redis (or batched, to be sent at the end of the tick) and not yet answered;
   *  a publish past it is delivered locally only and counted in `droppedQueueFull`. Integer
   *  1..1e7, default 10000. */
  maxQueued?: number;
  /** Bytes of the messages in them (each message + 5); same rule. Integer 1024..2^32,
   *  default 16 MiB. */
  maxQueuedBytes?: number;
  /** Longest wait between reconnect attempts, ms (the wait grows by 50 ms per attempt up to it).
   *  Integer 10..60000, default 2000. */
  retryMaxMs?: number;
  /** Other ioredis options (TLS, username, …); the bridge's own settings (no offline queue, no
   *  resend, its own resubscribe and retry strategy) take precedence. */
  redisOptions?: Record<string, unknown>;
}

export interface BridgeStats {
  /** This bridge's id, in every message it publishes (hex of 16 random bytes). */
  instanceId: string;
  /** Both connections (publisher, subscriber) are ready. */
  connected: boolean;
  /** Topics with a subscriber on this app; `subscribed`: channels Redis last reported for the
   *  subscriber connection. */
  topics: number;
  subscribed: number;
  /** PUBLISH commands sent; answered by Redis. */
  published: number;
  acknowledged: number;
  /** Messages from other instances delivered to this app's subscribers. */
  received: number;
  /** This instance's own messages handed back by Redis and skipped (delivered locally when published). */
  ownEchoes: number;
  /** Messages on the bridge's channels that are not the bridge's format (or text not UTF-8): ignored. */
  malformed: number;
  /** Gauges: PUBLISH commands in flight and their bytes; the caps. */
  queued: number;
  queuedBytes: number;
  maxQueued: number;
  maxQueuedBytes: number;
  /** droppedOffline + droppedQueueFull. */
  dropped: number;
  /** Publishes while the publisher connection was not ready (delivered locally only). */
  droppedOffline: number;
  /** Publishes past maxQueued / maxQueuedBytes (delivered locally only). */
  droppedQueueFull: number;
  /** PUBLISH commands in flight when their connection broke: they may or may not have reached
   *  Redis; never sent again. */
  failed: number;
  /** Connections re-established after a loss (a Redis restart counts two: publisher, subscriber). */
  reconnects: number;
  /** Connection errors seen (each failed attempt counts); the last one's message. */
  errors: number;
  lastError: string | null;
}

export interface Bridge {
  /** Resolves when both connections are ready and Redis has acknowledged every subscription change
   *  made so far; rejects when the bridge is closed first. Never rejects for a Redis outage (the
   *  bridge keeps retrying): race it with a timer to bound the wait. */
  synced(): Promise<void>;
  stats(): BridgeStats;
  /** Stop bridging (the app's publishes stay local again) and close both connections. Called by
   *  `app.close()` too. */
  close(): Promise<void>;
}

/**
 * Carry `app.publish` and `ws.publish` of an /uws app to every instance bridged with the same Redis
 * and prefix: delivered locally at once (as without the bridge), and sent to Redis; the other
 * instances deliver it to their subscribers of the topic. At-most-once (Redis pub/sub). Throws
 * for bad options (naming the key), a main-API app, an app bridged already, or when `ioredis` is
 * not installed. Does not throw when Redis is unreachable: it warns once per outage and retries.
 */
export function bridge(app: TemplatedApp, options?: BridgeOptions): Bridge;

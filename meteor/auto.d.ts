// `import 'ddp-transport-native/meteor/auto'`: the takeover's outcome (meteor/takeover.js).
import type { EventEmitter } from 'node:events';

declare const outcome: {
  /** serving: native serves /websocket; registry: a patched 3.5 ddp-server selected native itself;
   *  stood-down: a Meteor transport was selected explicitly; off: DDP_TRANSPORT_NATIVE=0 or
   *  `enabled: false`; unavailable: no usable binary, unexpected Meteor internals, or not Meteor. */
  readonly state: 'serving' | 'registry' | 'stood-down' | 'off' | 'unavailable';
  /** Why (for `serving`: how it was loaded). */
  readonly reason: string;
  /** When serving: Meteor's transport emitter; its non-enumerable `_app` is the native app. */
  readonly transport?: EventEmitter;
  /** When serving: the validated settings (`packages["ddp-transport-native"]` with defaults). */
  readonly settings?: {
    payloadLength: number; timeout: number; maxBackpressure: number; threads: number; drainOnSigterm: boolean;
    proxyProtocol: boolean;
  };
};
export = outcome;

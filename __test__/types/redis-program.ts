// The Redis bridge from TypeScript (redis.d.ts): a uWS.js-style app whose publishes reach every
// instance. `tsc` checks it (tsconfig.json); the `@ts-expect-error` lines fail the check if the
// types were loose.
import * as uWS from 'uWebSockets.js';
import { bridge, Bridge, BridgeStats } from 'ddp-transport-native/redis';

const app = uWS.App();
app.ws<{ room: string }>('/room/:id', {
  open: (ws) => { ws.subscribe(ws.getUserData().room); },
  message: (ws, message, isBinary) => { ws.publish(ws.getUserData().room, message, isBinary); },
});
const b: Bridge = bridge(app, { url: 'redis://127.0.0.1:6379', prefix: 'chat:', maxQueued: 5000 });
b.synced().then(() => {
  const s: BridgeStats = b.stats();
  const lost: number = s.droppedOffline + s.droppedQueueFull + s.failed;
  console.log(s.connected, lost);
});
// @ts-expect-error maxQueued is a number
bridge(app, { maxQueued: 'many' });
// @ts-expect-error the app is required
bridge();
void b.close();

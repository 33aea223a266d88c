// A uWebSockets.js v20 program in TypeScript, written as a uWS.js user writes one (the API of
// uWS.js's own typings): an authenticated async upgrade with an aborted flag on the response, typed
// user data, pub/sub, backpressure, compression flags, the listen socket. `tsc` checks it with
// 'uWebSockets.js' mapped to this package's uws.d.ts (tsconfig.json): it must compile unchanged.
import * as uWS from 'uWebSockets.js';

interface UserData {
  name: string;
  room: string;
}

const decoder = new TextDecoder();
let listenSocket: uWS.us_listen_socket | null = null;

async function authenticate(token: string): Promise<string | null> {
  return token === 'secret' ? 'alice' : null;
}

const behavior: uWS.WebSocketBehavior<UserData> = {
  compression: uWS.SHARED_COMPRESSOR | uWS.SHARED_DECOMPRESSOR,
  maxPayloadLength: 16 * 1024,
  idleTimeout: 32,
  maxBackpressure: 64 * 1024,
  upgrade: async (res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t) => {
    const key = req.getHeader('sec-websocket-key');
    const protocol = req.getHeader('sec-websocket-protocol');
    const extensions = req.getHeader('sec-websocket-extensions');
    const room = req.getParameter(0);
    const token = req.getQuery('token') ?? '';
    res.onAborted(() => {
      res.aborted = true;
    });
    const name = await authenticate(token);
    if (res.aborted) return;
    res.cork(() => {
      if (name === null) {
        res.writeStatus('401 Unauthorized').writeHeader('WWW-Authenticate', 'Token').end('who are you?');
        return;
      }
      res.upgrade<UserData>({ name, room: room ?? 'lobby' }, key, protocol, extensions, context);
    });
  },
  open: (ws: uWS.WebSocket<UserData>) => {
    const { room, name } = ws.getUserData();
    ws.subscribe(room);
    ws.publish(room, `${name} joined`);
    const ip: string = decoder.decode(ws.getRemoteAddressAsText());
    ws.send(`hello ${name} from ${ip}`, false, true);
  },
  message: (ws, message: ArrayBuffer, isBinary: boolean) => {
    const { room } = ws.getUserData();
    if (ws.getBufferedAmount() > 32 * 1024) return;
    const ok: boolean = ws.publish(room, message, isBinary, true);
    if (!ok) ws.cork(() => { ws.send('nobody else here'); });
  },
  dropped: (ws, message: ArrayBuffer, isBinary: boolean) => {
    console.log('dropped', message.byteLength, isBinary, ws.getTopics().length);
  },
  drain: (ws) => {
    console.log('drained', ws.getBufferedAmount());
  },
  ping: (ws, message: ArrayBuffer) => { console.log('ping', message.byteLength, ws.isSubscribed('x')); },
  close: (ws, code: number, message: ArrayBuffer) => {
    console.log('closed', code, decoder.decode(message), ws.getUserData().name);
  },
};

// @ts-expect-error a message handler gets an ArrayBuffer, not a string
const wrong: uWS.WebSocketBehavior<UserData> = { message: (ws, message: string) => ws.send(message) };

const app: uWS.TemplatedApp = uWS.App();
app.ws<UserData>('/room/:name', behavior).ws<UserData>('/*', { compression: uWS.DISABLED });
app.listen(9001, (token) => {
  if (token) {
    listenSocket = token;
    console.log('listening on', uWS.us_socket_local_port(token));
  }
});
app.listen('127.0.0.1', 0, (token: uWS.us_listen_socket | false) => { if (!token) throw new Error('listen'); });
app.listen(0, uWS.LIBUS_LISTEN_EXCLUSIVE_PORT, (token) => { if (token) uWS.us_listen_socket_close(token); });

setTimeout(() => {
  app.publish('lobby', 'server going down', false, false);
  if (listenSocket) uWS.us_listen_socket_close(listenSocket);
  console.log(app.numSubscribers('lobby'), wrong);
}, 1000);

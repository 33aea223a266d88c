// The real-app suite's server module (server/e2e.js, imported from the app's server/main.js,
// below the import line where the app uses the npm package). Nothing here needs MongoDB: the
// publication is driven by methods.
import { Meteor } from 'meteor/meteor';
import { DDP } from 'meteor/ddp';

const docs = new Map();
const subscriptions = new Set();

Meteor.publish('items', function () {
  for (const [id, fields] of docs) this.added('items', id, fields);
  subscriptions.add(this);
  this.onStop(() => subscriptions.delete(this));
  this.ready();
});

Meteor.methods({
  echo(value) {
    return value;
  },
  'items.put'(id, value) {
    const kind = docs.has(id) ? 'changed' : 'added';
    docs.set(id, { value });
    for (const sub of subscriptions) sub[kind]('items', id, { value });
    return kind;
  },
  'items.remove'(id) {
    if (!docs.delete(id)) return false;
    for (const sub of subscriptions) sub.removed('items', id);
    return true;
  },
  /** Which socket carries the caller's DDP connection, as Meteor's session holds it. */
  transport() {
    const session = Meteor.server.sessions.get(this.connection.id);
    const socket = session && session.socket;
    return {
      protocol: socket ? socket.protocol : null,
      url: socket ? socket.url : null,
      clientAddress: this.connection.clientAddress,
    };
  },
  /** Server to server: this app's DDP client (Meteor's, in Node) calls the app at E2E_UPSTREAM. */
  async upstream(value) {
    const url = process.env.E2E_UPSTREAM;
    if (!url) throw new Meteor.Error('no-upstream', 'E2E_UPSTREAM is not set');
    const connection = DDP.connect(url);
    try {
      const echoed = await connection.callAsync('echo', value);
      const transport = await connection.callAsync('transport');
      return { echoed, transport };
    } finally {
      connection.disconnect();
    }
  },
});

// The real-app suite's client code: a client-side store for the `items` publication (no
// minimongo needed), the connection's history, and `window.e2e` for the suite to drive.
import { Meteor } from 'meteor/meteor';
import { Tracker } from 'meteor/tracker';

const CLIENT_VERSION = 'v1'; // the suite changes this line for the hot code push check
const items = {};
const events = [];
const statuses = [];

const store = {
  beginUpdate(batchSize, reset) {
    if (reset) for (const id of Object.keys(items)) delete items[id];
  },
  update(msg) {
    if (msg.msg === 'added') items[msg.id] = { ...msg.fields };
    else if (msg.msg === 'changed') Object.assign(items[msg.id] || (items[msg.id] = {}), msg.fields);
    else if (msg.msg === 'removed') delete items[msg.id];
    events.push(`${msg.msg} ${msg.id}${msg.fields ? ` ${JSON.stringify(msg.fields)}` : ''}`);
  },
  endUpdate() {
    render();
  },
  saveOriginals() {},
  retrieveOriginals() {
    return [];
  },
  getDoc(id) {
    return items[id];
  },
};
const connection = Meteor.connection;
(connection.registerStoreClient || connection.registerStore).call(connection, 'items', store);

let ready = false;
Meteor.subscribe('items', { onReady() { ready = true; render(); } });

Tracker.autorun(() => {
  const { status, retryCount } = Meteor.status();
  statuses.push(`${status}${retryCount ? ` (retry ${retryCount})` : ''}`);
  render();
});

function render() {
  if (!document.body) return;
  let el = document.getElementById('e2e-state');
  if (!el) {
    el = document.createElement('pre');
    el.id = 'e2e-state';
    document.body.appendChild(el);
  }
  el.textContent = [
    `client ${CLIENT_VERSION}`,
    `status ${Meteor.status().status}, subscription ${ready ? 'ready' : 'waiting'}`,
    `items ${JSON.stringify(items)}`,
    `transport flags: DISABLE_SOCKJS=${__meteor_runtime_config__.DISABLE_SOCKJS} DDP_TRANSPORT=${__meteor_runtime_config__.DDP_TRANSPORT}`,
  ].join('\n');
}
Meteor.startup(render);

window.e2e = {
  version: CLIENT_VERSION,
  items,
  events,
  statuses,
  isReady: () => ready,
  status: () => Meteor.status(),
  call: (name, ...args) => Meteor.callAsync(name, ...args),
};

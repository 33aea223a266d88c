'use strict';
// A MongoDB wire-protocol stand-in for Meteor's own package tests: a test double, not a
// database. MongoDB cannot be installed from the registries this suite uses, and the DDP tests
// (ddp-client's livedata tests, ddp-server's publications) keep their documents in server-side
// collections, so `MONGO_URL` points Meteor's mongo package (the Node driver it bundles) here.
//
// What it answers, on one in-memory store per database:
//   handshake  OP_QUERY `isMaster`/`hello` (the driver's first message) and OP_MSG `hello`,
//              `isMaster`, `ping`, `buildInfo`, `getParameter`, `endSessions`, `killCursors`;
//              a standalone server (no replica set, so Meteor polls instead of tailing an oplog)
//   writes     insert (duplicate `_id` -> E11000), update (operators, replacement, upsert,
//              multi, arrayFilters), delete (limit 0/1), findAndModify
//   reads      find (filter, sort, projection, skip, limit; the whole result in the first batch),
//              count, distinct, aggregate (the pipeline stages mingo implements)
//   schema     create, drop, dropDatabase, listCollections, createIndexes, listIndexes,
//              dropIndexes (indexes are recorded and listed; only the `_id` index is enforced)
// Anything else gets `{ ok: 0, code: 59, errmsg: "no such command" }` and is counted in
// `unknown`, so a run can say what it was not asked. Query, update and aggregation semantics
// are mingo's (an npm implementation of MongoDB's query language), not MongoDB's own.

const net = require('node:net');
const { BSON, ObjectId } = require('bson');
const { Query, Aggregator } = require('mingo');
const { update: applyUpdate } = require('mingo/updater');

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;
const MSG_CHECKSUM_PRESENT = 1;
const MSG_MORE_TO_COME = 2;
const MAX_MESSAGE_BYTES = 48_000_000;
const WIRE_VERSION = { min: 0, max: 17 }; // as a MongoDB 6.0 server reports
const DUPLICATE_KEY = 11000;
const NS_NOT_FOUND = 26;
const NO_SUCH_COMMAND = 59;

const clone = (doc) => BSON.deserialize(BSON.serialize(doc));
const isOperatorDoc = (u) => u && typeof u === 'object' && !Array.isArray(u) && Object.keys(u).some((k) => k.startsWith('$'));
const idKey = (id) => (id instanceof ObjectId ? `oid:${id.toHexString()}` : `${typeof id}:${JSON.stringify(id)}`);

class Collection {
  constructor() {
    this.docs = new Map(); // idKey -> document, in insertion order
    this.indexes = [{ v: 2, key: { _id: 1 }, name: '_id_' }];
  }
  all() {
    return [...this.docs.values()];
  }
  matching(filter) {
    const q = new Query(filter || {});
    return this.all().filter((d) => q.test(d));
  }
  insert(doc) {
    if (doc._id === undefined) doc = { _id: new ObjectId(), ...doc };
    const k = idKey(doc._id);
    if (this.docs.has(k)) return { code: DUPLICATE_KEY, errmsg: `E11000 duplicate key error index: _id_ dup key: { _id: ${JSON.stringify(doc._id)} }` };
    this.docs.set(k, doc);
    return null;
  }
  /** One update statement; returns { n, nModified, upserted } or throws { code, errmsg }. */
  update({ q, u, upsert, multi, arrayFilters }) {
    if (Array.isArray(u)) throw Object.assign(new Error('update pipelines are not supported by the stand-in'), { code: 9 });
    const targets = this.matching(q);
    const hits = multi ? targets : targets.slice(0, 1);
    let nModified = 0;
    for (const doc of hits) {
      if (isOperatorDoc(u)) {
        if (applyUpdate(doc, u, arrayFilters).length) nModified++;
      } else {
        const next = { _id: doc._id, ...clone(u) };
        const before = BSON.serialize(doc);
        for (const key of Object.keys(doc)) delete doc[key];
        Object.assign(doc, next);
        if (!before.equals(BSON.serialize(doc))) nModified++;
      }
    }
    if (hits.length || !upsert) return { n: hits.length, nModified, upserted: null };
    // Upsert: the filter's equality fields, then the update (or the replacement).
    let doc = {};
    for (const [k, v] of Object.entries(q || {})) {
      if (!k.startsWith('$') && !k.includes('.') && !(v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).some((x) => x.startsWith('$')))) doc[k] = v;
    }
    if (isOperatorDoc(u)) {
      applyUpdate(doc, u, arrayFilters);
      if (u.$setOnInsert) Object.assign(doc, u.$setOnInsert);
    } else {
      doc = { ...(doc._id !== undefined ? { _id: doc._id } : {}), ...clone(u) };
    }
    if (doc._id === undefined) doc = { _id: new ObjectId(), ...doc };
    const err = this.insert(doc);
    if (err) throw Object.assign(new Error(err.errmsg), { code: err.code });
    return { n: 1, nModified: 0, upserted: doc._id };
  }
  remove(filter, limit) {
    const hits = this.matching(filter);
    const gone = limit === 1 ? hits.slice(0, 1) : hits;
    for (const d of gone) this.docs.delete(idKey(d._id));
    return gone.length;
  }
  find({ filter, sort, projection, skip, limit }) {
    let cursor = new Query(filter || {}).find(this.all(), projection && Object.keys(projection).length ? projection : undefined);
    if (sort && Object.keys(sort).length) cursor = cursor.sort(sort);
    if (skip) cursor = cursor.skip(skip);
    if (limit) cursor = cursor.limit(Math.abs(limit));
    return cursor.all();
  }
}

class Store {
  constructor() {
    this.dbs = new Map();
    this.unknown = new Map(); // command name -> times asked
    this.commands = new Map(); // command name -> times answered
  }
  db(name) {
    if (!this.dbs.has(name)) this.dbs.set(name, new Map());
    return this.dbs.get(name);
  }
  coll(db, name, create = true) {
    const colls = this.db(db);
    if (!colls.has(name) && create) colls.set(name, new Collection());
    return colls.get(name);
  }

  /** Answers one command document (its kind-1 sections already merged in). */
  command(cmd) {
    const name = Object.keys(cmd)[0];
    const db = cmd.$db || 'admin';
    const lower = name.toLowerCase();
    this.commands.set(lower, (this.commands.get(lower) || 0) + 1);
    const handler = this.handlers[lower];
    if (!handler) {
      this.unknown.set(name, (this.unknown.get(name) || 0) + 1);
      return { ok: 0, code: NO_SUCH_COMMAND, codeName: 'CommandNotFound', errmsg: `no such command: '${name}' (MongoDB stand-in)` };
    }
    try {
      return { ...handler.call(this, cmd, db, cmd[name]), ok: 1 };
    } catch (e) {
      return { ok: 0, code: e.code || 8000, errmsg: e.message };
    }
  }
}

function cursorReply(db, coll, docs) {
  return { cursor: { id: BSON.Long.ZERO, ns: `${db}.${coll}`, firstBatch: docs } };
}

let connectionIds = 0;
function helloReply() {
  return {
    helloOk: true, ismaster: true, isWritablePrimary: true, maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: MAX_MESSAGE_BYTES, maxWriteBatchSize: 100_000, localTime: new Date(),
    logicalSessionTimeoutMinutes: 30, connectionId: ++connectionIds,
    minWireVersion: WIRE_VERSION.min, maxWireVersion: WIRE_VERSION.max, readOnly: false,
  };
}

Store.prototype.handlers = {
  hello: helloReply,
  ismaster: helloReply,
  ping: () => ({}),
  buildinfo: () => ({ version: '6.0.0', versionArray: [6, 0, 0, 0], gitVersion: 'stand-in', bits: 64, maxBsonObjectSize: 16 * 1024 * 1024 }),
  getparameter: () => ({}),
  endsessions: () => ({}),
  killcursors: (cmd) => ({ cursorsKilled: cmd.cursors || [], cursorsNotFound: [], cursorsAlive: [], cursorsUnknown: [] }),
  insert(cmd, db, coll) {
    const c = this.coll(db, coll);
    const writeErrors = [];
    let n = 0;
    for (const [index, doc] of (cmd.documents || []).entries()) {
      const err = c.insert(doc);
      if (err) {
        writeErrors.push({ index, ...err });
        if (cmd.ordered !== false) break;
      } else n++;
    }
    return writeErrors.length ? { n, writeErrors } : { n };
  },
  update(cmd, db, coll) {
    const c = this.coll(db, coll);
    let n = 0;
    let nModified = 0;
    const upserted = [];
    const writeErrors = [];
    for (const [index, stmt] of (cmd.updates || []).entries()) {
      try {
        const r = c.update(stmt);
        n += r.n;
        nModified += r.nModified;
        if (r.upserted !== null) upserted.push({ index, _id: r.upserted });
      } catch (e) {
        writeErrors.push({ index, code: e.code || 8000, errmsg: e.message });
        if (cmd.ordered !== false) break;
      }
    }
    return { n, nModified, ...(upserted.length ? { upserted } : {}), ...(writeErrors.length ? { writeErrors } : {}) };
  },
  delete(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    let n = 0;
    for (const stmt of cmd.deletes || []) if (c) n += c.remove(stmt.q, stmt.limit);
    return { n };
  },
  find(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    return cursorReply(db, coll, c ? c.find(cmd) : []);
  },
  getmore: () => {
    throw Object.assign(new Error('cursor not found (the stand-in returns every result in the first batch)'), { code: 43 });
  },
  count(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    return { n: c ? c.find({ filter: cmd.query, skip: cmd.skip, limit: cmd.limit }).length : 0 };
  },
  distinct(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    const values = [];
    const seen = new Set();
    for (const d of c ? c.matching(cmd.query) : []) {
      const v = cmd.key.split('.').reduce((o, k) => (o == null ? undefined : o[k]), d);
      for (const x of Array.isArray(v) ? v : [v]) {
        const k = JSON.stringify(x);
        if (x !== undefined && !seen.has(k)) { seen.add(k); values.push(x); }
      }
    }
    return { values };
  },
  aggregate(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    return cursorReply(db, coll, new Aggregator(cmd.pipeline || []).run(c ? c.all() : []));
  },
  findandmodify(cmd, db, coll) {
    const c = this.coll(db, coll);
    const [target] = c.find({ filter: cmd.query, sort: cmd.sort, limit: 1 });
    const project = (d) => (d && cmd.fields && Object.keys(cmd.fields).length ? new Query({}).find([d], cmd.fields).all()[0] : d);
    if (cmd.remove) {
      if (target) c.docs.delete(idKey(target._id));
      return { lastErrorObject: { n: target ? 1 : 0 }, value: project(target) || null };
    }
    const before = target ? clone(target) : null;
    const r = c.update({ q: target ? { _id: target._id } : cmd.query, u: cmd.update, upsert: !!cmd.upsert, arrayFilters: cmd.arrayFilters });
    const id = target ? target._id : r.upserted;
    const after = id === null || id === undefined ? null : c.docs.get(idKey(id));
    return {
      lastErrorObject: { n: r.n, updatedExisting: !!target, ...(r.upserted !== null ? { upserted: r.upserted } : {}) },
      value: project(cmd.new ? (after ? clone(after) : null) : before),
    };
  },
  create(cmd, db, coll) {
    this.coll(db, coll);
    return {};
  },
  drop(cmd, db, coll) {
    if (!this.db(db).delete(coll)) throw Object.assign(new Error('ns not found'), { code: NS_NOT_FOUND });
    return { ns: `${db}.${coll}`, nIndexesWas: 1 };
  },
  dropdatabase(cmd, db) {
    this.dbs.delete(db);
    return { dropped: db };
  },
  listcollections(cmd, db) {
    const filter = new Query(cmd.filter || {});
    const docs = [...this.db(db).keys()].map((name) => ({ name, type: 'collection', options: {}, info: { readOnly: false } }))
      .filter((d) => filter.test(d));
    return cursorReply(db, '$cmd.listCollections', cmd.nameOnly ? docs.map(({ name, type }) => ({ name, type })) : docs);
  },
  createindexes(cmd, db, coll) {
    const c = this.coll(db, coll);
    const before = c.indexes.length;
    for (const spec of cmd.indexes || []) if (!c.indexes.some((i) => i.name === spec.name)) c.indexes.push({ v: 2, ...spec });
    return { numIndexesBefore: before, numIndexesAfter: c.indexes.length, createdCollectionAutomatically: false };
  },
  listindexes(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    if (!c) throw Object.assign(new Error(`ns does not exist: ${db}.${coll}`), { code: NS_NOT_FOUND });
    return cursorReply(db, coll, c.indexes);
  },
  dropindexes(cmd, db, coll) {
    const c = this.coll(db, coll, false);
    if (!c) throw Object.assign(new Error('ns not found'), { code: NS_NOT_FOUND });
    const before = c.indexes.length;
    c.indexes = cmd.index === '*' ? c.indexes.slice(0, 1) : c.indexes.filter((i) => i.name === '_id_' || (i.name !== cmd.index && JSON.stringify(i.key) !== JSON.stringify(cmd.index)));
    return { nIndexesWas: before };
  },
};

/** Parses one OP_MSG body: its command document with kind-1 sequences merged in. */
function parseMsg(buf) {
  const flags = buf.readUInt32LE(16);
  const end = buf.length - (flags & MSG_CHECKSUM_PRESENT ? 4 : 0);
  let off = 20;
  let cmd = null;
  const sequences = {};
  while (off < end) {
    const kind = buf[off++];
    if (kind === 0) {
      const len = buf.readInt32LE(off);
      cmd = BSON.deserialize(buf.subarray(off, off + len));
      off += len;
    } else if (kind === 1) {
      const size = buf.readInt32LE(off);
      const stop = off + size;
      const nul = buf.indexOf(0, off + 4);
      const id = buf.toString('utf8', off + 4, nul);
      let p = nul + 1;
      const docs = [];
      while (p < stop) {
        const len = buf.readInt32LE(p);
        docs.push(BSON.deserialize(buf.subarray(p, p + len)));
        p += len;
      }
      sequences[id] = docs;
      off = stop;
    } else {
      throw new Error(`OP_MSG section kind ${kind}`);
    }
  }
  return { flags, cmd: Object.assign(cmd, sequences) };
}

function header(length, requestId, responseTo, opCode) {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(requestId, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

let requestIds = 0;
function msgReply(responseTo, doc) {
  const body = BSON.serialize(doc);
  const len = 16 + 4 + 1 + body.length;
  return Buffer.concat([header(len, ++requestIds, responseTo, OP_MSG), Buffer.alloc(4), Buffer.from([0]), body]);
}

function opReply(responseTo, doc) {
  const body = BSON.serialize(doc);
  const fixed = Buffer.alloc(20); // responseFlags, cursorID (int64), startingFrom, numberReturned
  fixed.writeInt32LE(1, 16);
  return Buffer.concat([header(16 + 20 + body.length, ++requestIds, responseTo, OP_REPLY), fixed, body]);
}

/** Parses OP_QUERY (legacy handshake only: a command on `<db>.$cmd`). */
function parseQuery(buf) {
  const nul = buf.indexOf(0, 20);
  const ns = buf.toString('utf8', 20, nul);
  const p = nul + 1 + 8; // numberToSkip, numberToReturn
  const len = buf.readInt32LE(p);
  const cmd = BSON.deserialize(buf.subarray(p, p + len));
  return { ns, cmd };
}

/**
 * Starts the stand-in on 127.0.0.1 (port 0: any free one). Resolves
 * { port, url(db), store, stats(), close() }.
 */
async function startMongoStandIn({ port = 0 } = {}) {
  const store = new Store();
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      while (pending.length >= 4) {
        const len = pending.readInt32LE(0);
        if (len < 16 || len > MAX_MESSAGE_BYTES) return socket.destroy();
        if (pending.length < len) break;
        const msg = pending.subarray(0, len);
        pending = pending.subarray(len);
        const requestId = msg.readInt32LE(4);
        const opCode = msg.readInt32LE(12);
        try {
          if (opCode === OP_MSG) {
            const { flags, cmd } = parseMsg(msg);
            const reply = store.command(cmd);
            if (!(flags & MSG_MORE_TO_COME)) socket.write(msgReply(requestId, reply));
          } else if (opCode === OP_QUERY) {
            const { ns, cmd } = parseQuery(msg);
            socket.write(opReply(requestId, store.command({ ...cmd, $db: ns.replace(/\.\$cmd$/, '') })));
          } else {
            socket.destroy();
            return;
          }
        } catch (e) {
          socket.write(msgReply(requestId, { ok: 0, code: 2, errmsg: `stand-in: ${e.message}` }));
        }
      }
    });
  });
  await new Promise((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  const actual = server.address().port;
  return {
    port: actual,
    store,
    url: (db = 'meteor') => `mongodb://127.0.0.1:${actual}/${db}`,
    stats: () => ({ commands: Object.fromEntries(store.commands), unknown: Object.fromEntries(store.unknown) }),
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

module.exports = { startMongoStandIn };

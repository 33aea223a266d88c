'use strict';
// A realistic DDP document of about 4 KiB (what a Meteor publication's `added`/`changed` carries:
// ids, names, e-mails, dates, numbers, nested arrays and text), built deterministically from a
// seed so that every server and run compresses the same bytes. `node bench/ddp-doc.js` prints the
// 4 KiB `added` message (the fixture crates/native-ws/src/deflate/doc4k.json was made this way).

const WORDS = ('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore ' +
  'et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea ' +
  'commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat nulla pariatur ' +
  'project invoice customer order shipped pending review meeting quarterly budget release deploy').split(' ');
const NAMES = ['Alice', 'Bruno', 'Chloé', 'Dmitri', 'Eun-ji', 'Farah', 'Gustavo', 'Hiroshi', 'Ines', 'Jamal'];
const UNMISTAKABLE = '23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz';

function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

/** The fields of one document (~`size` bytes once in a DDP message). */
function makeDoc(seed = 1, size = 4096) {
  const r = rng(seed);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const id = () => Array.from({ length: 17 }, () => pick(UNMISTAKABLE)).join('');
  const words = (n) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
  const date = () => ({ $date: 1700000000000 + Math.floor(r() * 3e10) });
  const doc = {
    ownerId: id(), title: words(6), status: pick(['open', 'closed', 'draft', 'archived']),
    createdAt: date(), updatedAt: date(), priority: Math.floor(r() * 5), score: Math.round(r() * 1e4) / 100,
    tags: Array.from({ length: 5 }, () => pick(WORDS)), members: [], comments: [],
  };
  for (let i = 0; i < 6; i++) {
    const name = pick(NAMES);
    doc.members.push({ userId: id(), name, email: `${name.toLowerCase()}.${Math.floor(r() * 1000)}@example.com`, role: pick(['owner', 'editor', 'viewer']) });
  }
  while (JSON.stringify(doc).length < size - 120) {
    doc.comments.push({ _id: id(), authorId: id(), at: date(), text: words(8 + Math.floor(r() * 12)), likes: Math.floor(r() * 40) });
  }
  return doc;
}

/** The DDP `added` message for `makeDoc(seed, size)`. */
function addedMessage(seed = 1, size = 4096) {
  return JSON.stringify({ msg: 'added', collection: 'items', id: `doc${seed}`, fields: makeDoc(seed, size) });
}

module.exports = { makeDoc, addedMessage };

if (require.main === module) process.stdout.write(addedMessage(1));

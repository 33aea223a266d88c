'use strict';
// A Meteor-style server process (helpers/meteor-fake.js, line from $LINE) whose app code starts
// with `import 'ddp-transport-native/meteor/auto'` ($AUTO_MODULE: another copy of the package).
// Prints STATE <state> and LISTENING <port>; exits by itself after 60 s.

const { fakeMeteor } = require('./meteor-fake');

const m = fakeMeteor({ line: process.env.LINE || '3.4' });
m.installGlobals();
const status = require(process.env.AUTO_MODULE || 'ddp-transport-native/meteor/auto');
console.log(`STATE ${status.state}`);
m.listen().then((port) => console.log(`LISTENING ${port}`));
setTimeout(() => process.exit(0), 60000);

'use strict';
// `import 'ddp-transport-native/meteor/auto'` — one line at the top of a Meteor app's server entry
// (server/main.js): `native` serves /websocket on the app's own port, on every Meteor 3.x, with no
// file of Meteor copied or patched. It never stops an app for a missing binary or unexpected
// Meteor internals (one line says what happened; Meteor's transport keeps serving); settings
// errors throw, naming the key. What it does and why: takeover.js.
//
// The export is the outcome: { state: 'serving' | 'registry' | 'stood-down' | 'off' | 'unavailable',
// reason, transport? } (transport._app is the native app: stats(), drain()).

module.exports = require('./takeover').takeOverFromGlobals("import 'ddp-transport-native/meteor/auto'");

'use strict';
// The client bundle's `ddp-transport-native/meteor/auto`: nothing to do in a browser (the server
// sets __meteor_runtime_config__ for it). package.json "browser" maps auto.js here, so importing
// it from shared code does not pull the native addon into a client bundle.
module.exports = { state: 'unavailable', reason: 'not a Meteor server process' };

'use strict';
// How a value appears in an error message. No native code: the Meteor takeover uses it before
// (and without) loading the addon.

/** A value as it should appear in an error message. */
function describe(v) {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || typeof v !== 'object') return String(v);
  try { return JSON.stringify(v); } catch (e) { return String(v); }
}

module.exports = { describe };

'use strict';
// Browsers whose WebSocket constructor fails still get DDP, over SockJS.
//
// While `native` serves, the runtime config says DISABLE_SOCKJS, so Meteor's client
// (socket-stream-client) opens `new WebSocket(<ROOT_URL>/websocket)` and never tries SockJS. Where
// that constructor throws (a browser without WebSocket, a policy or extension that blocks it),
// Meteor's client would stop at its first connection. This module puts one small inline script
// in every page's <head> (before the runtime config and the client bundle): it wraps the
// WebSocket constructor so that, while DISABLE_SOCKJS is set, a constructor that throws (or a
// missing one) turns the flag off and hands Meteor a socket that closes at once. Meteor's client
// retries, reads the flag again on its next attempt and connects to /sockjs, which stays mounted.
// Any other use of WebSocket on the page is untouched: the wrapper is a Proxy of the browser's
// constructor (same prototype, statics and name) and rethrows when DISABLE_SOCKJS is not set.
// Pages with inline scripts turned off (WebAppInternals.setInlineScriptsAllowed(false), e.g. a
// strict Content-Security-Policy) do not get it.

const CALLBACK_KEY = 'ddp-transport-native:websocket-fallback';

/* eslint-disable no-var, prefer-arrow-callback, func-names -- runs in any browser Meteor supports */
/** Runs in the page. Kept ES5 and self-contained: it is sent as its source text. */
function pageScript() {
  var Native = window.WebSocket;
  function fallBack(why) {
    var config = window.__meteor_runtime_config__;
    if (!config || !config.DISABLE_SOCKJS) return false;
    config.DISABLE_SOCKJS = false;
    config.DDP_TRANSPORT = 'sockjs';
    if (window.console) window.console.warn('ddp-transport-native: ' + why + '; DDP uses SockJS.');
    return true;
  }
  /** A socket that is already closed, for Meteor's client to retry from. */
  function closedSocket(why) {
    var socket = { readyState: 3, url: '', protocol: '', extensions: '', bufferedAmount: 0,
      send: function () {}, close: function () {}, addEventListener: function () {}, removeEventListener: function () {} };
    setTimeout(function () {
      if (typeof socket.onerror === 'function') socket.onerror({ type: 'error', message: why });
      if (typeof socket.onclose === 'function') socket.onclose({ type: 'close', code: 1006, reason: why, wasClean: false });
    }, 0);
    return socket;
  }
  if (typeof Native !== 'function') {
    window.WebSocket = function WebSocket() {
      var why = 'this browser has no WebSocket';
      if (!fallBack(why)) throw new TypeError('WebSocket is not supported');
      return closedSocket(why);
    };
    return;
  }
  if (typeof Proxy !== 'function' || typeof Reflect !== 'object') return;
  window.WebSocket = new Proxy(Native, {
    construct: function (target, args, newTarget) {
      try {
        return Reflect.construct(target, args, newTarget === window.WebSocket ? target : newTarget);
      } catch (e) {
        var why = 'new WebSocket() failed (' + (e && (e.name || e.message)) + ')';
        if (!fallBack(why)) throw e;
        return closedSocket(why);
      }
    },
  });
}
/* eslint-enable no-var, prefer-arrow-callback, func-names */

const SCRIPT_TAG = `<script>(${pageScript.toString()})();</script>`;

/**
 * Adds the script to every page's <head> (WebAppInternals' boilerplate data callbacks, Meteor 1.x
 * to 3.x). Returns false when this Meteor has no such hook (then nothing is added).
 * @param {object} WebAppInternals Package.webapp.WebAppInternals
 */
function installClientFallback(WebAppInternals) {
  if (!WebAppInternals || typeof WebAppInternals.registerBoilerplateDataCallback !== 'function') return false;
  const inlineAllowed = () => typeof WebAppInternals.inlineScriptsAllowed !== 'function' || WebAppInternals.inlineScriptsAllowed();
  WebAppInternals.registerBoilerplateDataCallback(CALLBACK_KEY, (request, data) => {
    if (!inlineAllowed()) return false;
    data.dynamicHead = `${data.dynamicHead || ''}${SCRIPT_TAG}`;
    return true;
  });
  return true;
}

module.exports = { installClientFallback, pageScript, CALLBACK_KEY };

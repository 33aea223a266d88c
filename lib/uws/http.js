'use strict';
// `upgrade(res, req, context)` of the uWS surface over the core's upgrade hook (main API's
// `(req, res)` with accept/reject). req is valid only during the handler, as in uWS; res may
// answer later (`res.upgrade`, or `writeStatus().writeHeader().end()` to refuse).

const { native } = require('../constants');
const { arrayBuffer, text, addressBytes, proxiedBytes } = require('./util');

function expired() {
  throw new Error('Using uWS.HttpRequest past its lifetime (it is valid only during the upgrade handler)');
}

class UHttpRequest {
  constructor(r, pattern) {
    this._r = r;
    this._pattern = pattern;
    this._params = null;
    const q = r.url.indexOf('?');
    this._path = q < 0 ? r.url : r.url.slice(0, q);
    this._query = q < 0 ? undefined : r.url.slice(q + 1);
    this._valid = true;
  }

  getHeader(lowerCaseKey) {
    if (!this._valid) expired();
    const v = this._r.headers[text(lowerCaseKey)];
    return v === undefined ? '' : v;
  }

  getUrl() {
    if (!this._valid) expired();
    return this._path;
  }

  getMethod() {
    if (!this._valid) expired();
    return this._r.method.toLowerCase();
  }

  getCaseSensitiveMethod() {
    if (!this._valid) expired();
    return this._r.method;
  }

  getQuery(key) {
    if (!this._valid) expired();
    if (key === undefined || this._query === undefined) return this._query;
    return new URLSearchParams(this._query).get(text(key)) ?? undefined;
  }

  forEach(cb) {
    if (!this._valid) expired();
    for (const [k, v] of Object.entries(this._r.headers)) cb(k, v);
  }

  /** By index or by name; "" when there is none (uWS's answer). Matched by the core's rule. */
  getParameter(which) {
    if (!this._valid) expired();
    if (this._params === null) this._params = native.routeParams(this._pattern, this._path) || [];
    if (typeof which === 'number') return this._params[2 * which + 1] ?? '';
    const i = this._params.indexOf(text(which));
    return i >= 0 && i % 2 === 0 ? this._params[i + 1] : '';
  }

  setYield() {
    return this;
  }
}

class UHttpResponse {
  constructor(r, res) {
    this._r = r;
    this._res = res; // main API: accept(userData, protocol, options) / reject(status, body, options)
    this._status = 200; // uWS answers "200 OK" when nothing else was written
    this._statusText = undefined;
    this._headers = [];
    this._answered = false;
  }

  /** "401 Unauthorized", "302 Found", or "101 Switching Protocols" before headers of a 101. */
  writeStatus(status) {
    const line = text(status).trim();
    const sp = line.indexOf(' ');
    this._status = parseInt(sp < 0 ? line : line.slice(0, sp), 10) || 200;
    this._statusText = sp < 0 ? undefined : line.slice(sp + 1);
    return this;
  }

  /** Sent with the answer: the 101 of `upgrade`, or the refusal of `end`. */
  writeHeader(key, value) {
    this._headers.push([text(key), text(value)]);
    return this;
  }

  write() {
    return true;
  }

  /** Refuse the upgrade with the status written (200 when none; a status outside 200–599 is
   *  served as 403), its reason phrase, the headers written and `body`. */
  end(body) {
    if (this._answered) return this;
    this._answered = true;
    this._res.reject(this._status, body === undefined ? '' : text(body), { headers: this._headers, statusText: this._statusText });
    return this;
  }

  endWithoutBody() {
    return this.end();
  }

  /** The extensions argument decides, as in uWS: permessage-deflate is negotiated from this
   *  string (the request's header passed through, or "" for none), not from the request. */
  upgrade(userData, secWebSocketKey, secWebSocketProtocol, secWebSocketExtensions, context) {
    if (this._answered) return;
    this._answered = true;
    const p = secWebSocketProtocol === undefined ? '' : text(secWebSocketProtocol);
    const extensions = secWebSocketExtensions === undefined ? '' : text(secWebSocketExtensions);
    // uWS echoes what it is given; a client offering "a, b" and handed the whole header gets "a".
    this._res.accept(userData, p === '' ? undefined : p.split(',')[0].trim(), { headers: this._headers, extensions });
  }

  /** `cb()` runs if the client goes away before the upgrade is answered (as uWS). */
  onAborted(cb) {
    this._res.onAborted(cb);
    return this;
  }

  cork(cb) {
    cb();
    return this;
  }

  getRemoteAddress() {
    return addressBytes(this._res._event.remoteAddress);
  }

  getRemoteAddressAsText() {
    return arrayBuffer(this._res._event.remoteAddress || '');
  }

  /** The client a PROXY header named (App({ proxyProtocol: true })); empty without one. */
  getProxiedRemoteAddress() {
    return proxiedBytes(this._res._event.proxiedAddress);
  }

  getProxiedRemoteAddressAsText() {
    return arrayBuffer(this._res._event.proxiedAddress || '');
  }
}

module.exports = { UHttpRequest, UHttpResponse };

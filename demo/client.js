// Demo client: the browser's own WebSocket, DDP connect, then `echo` calls with their round trip.
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/websocket';
  var ws = new WebSocket(url);
  var nextId = 1;
  var pending = {}; // method id -> start time
  var connected = false;
  var queue = [];

  window.__ddpSocketUrl = url;
  window.__ddpSocket = ws;

  function status(text, cls) {
    $('status').textContent = text;
    $('status').className = cls || '';
  }

  function echo(text) {
    if (!connected) { queue.push(text); return; }
    var id = String(nextId++);
    pending[id] = performance.now();
    ws.send(JSON.stringify({ msg: 'method', id: id, method: 'echo', params: [text] }));
  }

  ws.onopen = function () {
    window.__ddpSocketExtensions = ws.extensions;
    $('socket').textContent = url + (ws.extensions ? ' (' + ws.extensions + ')' : '');
    ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] }));
  };

  ws.onmessage = function (event) {
    var msg;
    try { msg = JSON.parse(event.data); } catch (e) { return; }
    if (msg.msg === 'connected') {
      connected = true;
      window.__ddpSession = msg.session;
      status('connected, session ' + msg.session, 'ok');
      var waiting = queue; queue = [];
      waiting.forEach(echo);
    } else if (msg.msg === 'ping') {
      ws.send(JSON.stringify(msg.id ? { msg: 'pong', id: msg.id } : { msg: 'pong' }));
    } else if (msg.msg === 'result' && pending[msg.id] !== undefined) {
      var rtt = performance.now() - pending[msg.id];
      delete pending[msg.id];
      if (msg.error) {
        $('reply').textContent = 'error: ' + (msg.error.reason || msg.error.error);
      } else {
        $('reply').textContent = typeof msg.result === 'string' ? msg.result : JSON.stringify(msg.result);
      }
      $('rtt').textContent = rtt.toFixed(2);
    } else if (msg.msg === 'failed') {
      status('server refused DDP version ' + msg.version, 'bad');
    }
  };

  ws.onclose = function (event) {
    connected = false;
    status('closed (' + event.code + ')', 'bad');
  };
  ws.onerror = function () { status('WebSocket error', 'bad'); };

  $('form').addEventListener('submit', function (event) {
    event.preventDefault();
    echo($('text').value);
  });

  echo('hello');
})();

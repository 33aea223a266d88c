/* global Package, Npm */
Package.describe({
  name: 'ddp-transport-native',
  version: '0.1.0',
  summary: 'DDP over a native (Rust/tokio) WebSocket server on the app\'s own port: the `native` transport',
  documentation: 'README.md',
});

Npm.depends({
  'ddp-transport-native': '0.1.0',
});

Package.onUse(function (api) {
  api.use('ecmascript', 'server');
  // Meteor 3.5+: load after the registry so `native` can be registered in it. Weak, because
  // 3.0–3.4 have no such package (the takeover does not need it).
  api.use('ddp-transport-registry', 'server', { weak: true });
  // Eager: the takeover (or the registration) is the whole point; the package exports nothing.
  api.mainModule('server.js', 'server', { lazy: false });
});

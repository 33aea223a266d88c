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
  api.use(['ecmascript', 'ddp-transport-registry'], 'server');
  // Eager: registering the provider is the whole point; the package exports nothing.
  api.mainModule('server.js', 'server', { lazy: false });
});

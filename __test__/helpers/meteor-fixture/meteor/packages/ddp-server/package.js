// Stand-in for Meteor's packages/ddp-server/package.js (meteor-setup tests): only the two
// lines the patch's hunk needs, in Meteor's formatting.
Package.describe({
  summary: "stand-in ddp-server for the meteor-setup tests",
  version: "0.0.0-fixture",
});

Package.onUse(function (api) {
  api.use("ddp-transport-uws", "server");
  api.use("ddp-client", "server");
});

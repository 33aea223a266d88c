// `meteor add ddp-transport-native` alone: native serves /websocket on the app's own port, on
// every Meteor 3.x, with no patch (the takeover: ddp-transport-native/meteor/takeover.js). With a
// patched 3.5 ddp-server, `native` is also registered with Meteor's transport registry; when
// ddp-server selects it there, the takeover stands aside (one socket owner).
const { fromAtmospherePackage } = require('ddp-transport-native/meteor/takeover');

fromAtmospherePackage();

// Registers the `native` DDP transport with Meteor's transport registry.
// Select it with settings.json `{"packages":{"ddp-server":{"transport":"native"}}}` or DDP_TRANSPORT=native.
// The registry calls the factory with no arguments; the transport reads its own settings from
// Meteor.settings.packages['ddp-server'].native when ddp-server calls setup().
import { DDPTransportRegistry } from 'meteor/ddp-transport-registry';

const { createNativeTransport } = require('ddp-transport-native/meteor');

DDPTransportRegistry.register('native', () => createNativeTransport());

// Stand-in for Meteor's packages/ddp-server/transports/index.js (meteor-setup tests).

const VALID_NAMES = ["sockjs", "uws"];

export const validNames = () => VALID_NAMES.slice();

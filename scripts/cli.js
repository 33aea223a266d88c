#!/usr/bin/env node
'use strict';
// `npx ddp-transport-native <command>`. Commands:
//   meteor-setup --meteor-src <meteor checkout> --app <app dir> [--dry-run]

const COMMANDS = {
  'meteor-setup': (args) => require('./meteor-setup').main(args),
};

function usage() {
  return `Usage: ddp-transport-native <command> [options]\n\nCommands:\n` +
    '  meteor-setup --meteor-src <meteor checkout> --app <app dir> [--dry-run]\n' +
    '      put the `native` DDP transport into a Meteor 3.5 app (patched local ddp-server,\n' +
    '      the ddp-transport-native package, .meteor/packages); --help for details\n';
}

function run(argv) {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    (command === undefined ? process.stderr : process.stdout).write(usage());
    return command === undefined ? 2 : 0;
  }
  const fn = COMMANDS[command];
  if (!fn) {
    process.stderr.write(`ddp-transport-native: unknown command ${JSON.stringify(command)}\n\n${usage()}`);
    return 2;
  }
  return fn(rest);
}

process.exitCode = run(process.argv.slice(2));

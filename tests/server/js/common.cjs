// Shared helpers for the npm-client tests: the client packages live in .cache/clients
// (scripts/setup.sh); the forced outputs the server plays back are in forced.json, in the
// order the scenario scripts make their requests.
'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');

// Arguments after CLIENTS_DIR (a script's own choices) are `extra`.
const [, , baseUrl, clientsDir, ...extra] = process.argv;
if (!baseUrl || !clientsDir) {
  console.error('usage: node SCRIPT http://127.0.0.1:PORT CLIENTS_DIR [ARGS...]');
  process.exit(2);
}

function load(pkg) {
  const mod = require(path.join(clientsDir, 'node_modules', pkg));
  return mod.default && typeof mod.default === 'function' ? mod.default : (mod.OpenAI || mod.Anthropic || mod);
}

const expectedArgs = { city: 'Paris & Nice', days: 3 };

async function run(name, scenarios) {
  let n = 0;
  for (const [label, fn] of scenarios) {
    try {
      await fn();
      n++;
      console.log(`ok   ${label}`);
    } catch (e) {
      console.error(`FAIL ${label}: ${e && e.stack ? e.stack : e}`);
      process.exit(1);
    }
  }
  console.log(`${name}: ${n} scenarios passed`);
}

module.exports = { assert, baseUrl, clientsDir, extra, load, expectedArgs, run };

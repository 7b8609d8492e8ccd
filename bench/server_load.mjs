// Load generator for ds4-server: N concurrent clients stream chat completions back to back
// for S seconds; every response must be 200, end with "data: [DONE]" and carry a
// finish_reason. Prints one JSON summary line; exits 1 if any request failed.
//   node bench/server_load.mjs URL [--clients 16] [--seconds 60] [--max-tokens 16]
'use strict';

const args = process.argv.slice(2);
const url = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const clients = opt('--clients', 16), seconds = opt('--seconds', 60), maxTokens = opt('--max-tokens', 16);
if (!url) {
  console.error('usage: node server_load.mjs URL [--clients N] [--seconds S] [--max-tokens T]');
  process.exit(2);
}

let ok = 0, failed = 0, chunks = 0;
const latencies = [], errors = [];
const deadline = Date.now() + seconds * 1000;

async function one(client, n) {
  const t0 = Date.now();
  const body = {
    model: 'deepseek-v4-flash', stream: true, max_tokens: maxTokens, thinking: { type: 'disabled' },
    messages: [{ role: 'system', content: 'You are a load test.' },
      { role: 'user', content: `client ${client} request ${n}: say something` }],
  };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text.slice(0, 200)}`);
  if (!text.trimEnd().endsWith('data: [DONE]')) throw new Error(`no [DONE]: ${text.slice(-200)}`);
  if (!/"finish_reason":"(stop|length)"/.test(text)) throw new Error('no finish_reason');
  chunks += (text.match(/^data: /gm) || []).length;
  latencies.push(Date.now() - t0);
}

async function client(c) {
  for (let n = 0; Date.now() < deadline; n++) {
    try {
      await one(c, n);
      ok++;
    } catch (e) {
      failed++;
      if (errors.length < 5) errors.push(String(e));
    }
  }
}

const t0 = Date.now();
await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
latencies.sort((a, b) => a - b);
const pct = (p) => latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : 0;
console.log(JSON.stringify({
  clients, seconds: (Date.now() - t0) / 1000, max_tokens: maxTokens, ok, failed, sse_chunks: chunks,
  requests_per_s: +(ok / ((Date.now() - t0) / 1000)).toFixed(2),
  latency_ms: { p50: pct(0.5), p90: pct(0.9), max: latencies[latencies.length - 1] || 0 }, errors,
}));
process.exit(failed === 0 && ok > 0 ? 0 : 1);

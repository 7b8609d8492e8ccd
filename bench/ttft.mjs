// Time to first token of one streaming chat request (bench/server_ttft.sh): the time from sending
// the request to the first SSE data record (sent once the prompt is evaluated), and the prompt /
// cached token counts from the final usage record.
//   node bench/ttft.mjs URL --words N [--max-tokens 8]
const args = process.argv.slice(2);
const url = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const words = opt('--words', 1500), maxTokens = opt('--max-tokens', 8);
if (!url || !Number.isFinite(words)) {
  console.error('usage: node ttft.mjs URL --words N [--max-tokens T]');
  process.exit(2);
}
// A deterministic long prompt: numbered sentences (about 2.7 tokens per word).
const parts = [];
for (let i = 0; parts.length < words; i++) parts.push(`item ${i} is`, `colour ${(i * 7919) % 1000},`);
const body = {
  model: 'deepseek-v4-flash', stream: true, max_tokens: maxTokens, temperature: 0,
  thinking: { type: 'disabled' }, stream_options: { include_usage: true },
  messages: [{ role: 'system', content: 'You read long inventories.' },
    { role: 'user', content: parts.slice(0, words).join(' ') + '\nWhich item is first?' }],
};
const t0 = performance.now();
const res = await fetch(`${url}/v1/chat/completions`, {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
});
const reader = res.body.getReader();
const dec = new TextDecoder();
let text = '', ttft = null;
for (;;) {
  const { done, value } = await reader.read();
  if (done) break;
  text += dec.decode(value, { stream: true });
  if (ttft === null && /^data: /m.test(text)) ttft = performance.now() - t0;
}
const total = performance.now() - t0;
let usage = null;
for (const line of text.split('\n'))
  if (line.startsWith('data: {') && line.includes('"usage"')) {
    const j = JSON.parse(line.slice(6));
    if (j.usage) usage = j.usage;
  }
if (res.status !== 200 || ttft === null) {
  console.error(`ttft: status ${res.status}: ${text.slice(0, 300)}`);
  process.exit(1);
}
console.log(JSON.stringify({
  ttft_ms: Math.round(ttft), total_ms: Math.round(total),
  prompt_tokens: usage?.prompt_tokens, cached_tokens: usage?.prompt_tokens_details?.cached_tokens,
}));

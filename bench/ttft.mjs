// Time to first token of one streaming chat request (bench/server_ttft.sh): the time from sending
// the request to the first SSE data record (sent once the prompt is evaluated), and the prompt /
// cached token counts from the final usage record.
//   node bench/ttft.mjs URL --words N [--max-tokens 8] --turn 1|2 --state FILE
// Turn 1 sends the long prompt and writes its reply to FILE; turn 2 sends the follow-up (the
// long prompt, that reply, one more question), as an agent's next turn does.
const args = process.argv.slice(2);
const url = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const words = opt('--words', 1500), maxTokens = opt('--max-tokens', 8), turn = opt('--turn', 1);
const si = args.indexOf('--state');
const stateFile = si >= 0 ? args[si + 1] : null;
const fs = await import('node:fs');
if (!url || !Number.isFinite(words)) {
  console.error('usage: node ttft.mjs URL --words N [--max-tokens T]');
  process.exit(2);
}
// A deterministic long prompt: numbered sentences (about 2.7 tokens per word).
const parts = [];
for (let i = 0; parts.length < words; i++) parts.push(`item ${i} is`, `colour ${(i * 7919) % 1000},`);
const messages = [{ role: 'system', content: 'You read long inventories.' },
  { role: 'user', content: parts.slice(0, words).join(' ') + '\nWhich item is first?' }];
if (turn === 2) {
  messages.push({ role: 'assistant', content: fs.readFileSync(stateFile, 'utf8') });
  messages.push({ role: 'user', content: 'And which one is last?' });
}
const body = {
  model: 'deepseek-v4-flash', stream: true, max_tokens: maxTokens, temperature: 0,
  thinking: { type: 'disabled' }, stream_options: { include_usage: true }, messages,
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
let usage = null, reply = '';
for (const line of text.split('\n'))
  if (line.startsWith('data: {')) {
    const j = JSON.parse(line.slice(6));
    if (j.usage) usage = j.usage;
    const c = j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content;
    if (typeof c === 'string') reply += c;
  }
if (turn === 1 && stateFile) fs.writeFileSync(stateFile, reply);
if (res.status !== 200 || ttft === null) {
  console.error(`ttft: status ${res.status}: ${text.slice(0, 300)}`);
  process.exit(1);
}
console.log(JSON.stringify({
  ttft_ms: Math.round(ttft), total_ms: Math.round(total),
  prompt_tokens: usage?.prompt_tokens, cached_tokens: usage?.prompt_tokens_details?.cached_tokens,
}));

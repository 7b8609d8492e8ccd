// Exact tool replay through the official clients (node tool_replay.cjs URL CLIENTS_DIR API,
// API = chat | responses | anthropic): a streamed tool call is accumulated the way an SDK user
// does (chat: delta.tool_calls and delta.reasoning_content; Responses: the output items of
// response.completed; Anthropic: the message stream's finalMessage content), sent back with a
// tool result, and the script prints one line
//   replay API cached=N turn1=M
// (N: the second request's reused prompt tokens, M: the first request's prompt + completion
// tokens) for server_clients_test to compare with and without exact replay. The server's
// scripted outputs (server_clients_test.cpp): a tool call get_weather {days: 3, city: "Paris"}
// written unlike the canonical rendering, then a short text answer.
'use strict';
const { assert, baseUrl, extra, load, run } = require('./common.cjs');
const model = 'deepseek-v4-flash';
const question = 'weather in Paris for 3 days?';
const parameters = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } };
const expected = { days: 3, city: 'Paris' };
const api = extra[0];

function report(cached, turn1) {
  assert.ok(Number.isInteger(cached) && Number.isInteger(turn1), `cached=${cached} turn1=${turn1}`);
  console.log(`replay ${api} cached=${cached} turn1=${turn1}`);
}

async function chat() {
  const OpenAI = load('openai');
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'dsv4-local', maxRetries: 0 });
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters } }];
  const messages = [{ role: 'user', content: question }];
  const streamed = async () => {
    const stream = await client.chat.completions.create({
      model, messages, tools, stream: true, stream_options: { include_usage: true },
    });
    const calls = [];
    let content = '', reasoning = '', finish = null, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta.content || '';
      reasoning += c.delta.reasoning_content || '';
      for (const tc of c.delta.tool_calls || []) {
        const cur = calls[tc.index] || (calls[tc.index] = { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (tc.id) cur.id = tc.id;
        if (tc.function && tc.function.name) cur.function.name += tc.function.name;
        if (tc.function && tc.function.arguments) cur.function.arguments += tc.function.arguments;
      }
      finish = c.finish_reason || finish;
    }
    return { calls, content, reasoning, finish, usage };
  };
  const t1 = await streamed();
  assert.equal(t1.finish, 'tool_calls');
  assert.equal(t1.calls.length, 1);
  assert.equal(t1.calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(t1.calls[0].function.arguments), expected);
  assert.equal(t1.reasoning, 'Need the weather.');
  messages.push({ role: 'assistant', content: t1.content || null, reasoning_content: t1.reasoning, tool_calls: t1.calls },
    { role: 'tool', tool_call_id: t1.calls[0].id, content: 'sunny' });
  const t2 = await streamed();
  assert.equal(t2.content, 'Sunny.');
  report(t2.usage.prompt_tokens_details.cached_tokens, t1.usage.prompt_tokens + t1.usage.completion_tokens);
}

async function responses() {
  const OpenAI = load('openai');
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'dsv4-local', maxRetries: 0 });
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather forecast', parameters, strict: false }];
  const input = [{ role: 'user', content: question }];
  const streamed = async () => {
    const stream = await client.responses.create({
      model, input, tools, stream: true, reasoning: { effort: 'high', summary: 'auto' },
    });
    let done = null;
    for await (const e of stream) if (e.type === 'response.completed') done = e.response;
    assert.ok(done, 'no response.completed');
    return done;
  };
  const r1 = await streamed();
  const fc = r1.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(r1.output));
  assert.equal(fc.name, 'get_weather');
  assert.deepEqual(JSON.parse(fc.arguments), expected);
  // The whole output goes back (the reasoning item carries the reasoning the prompt needs).
  input.push(...r1.output, { type: 'function_call_output', call_id: fc.call_id, output: 'sunny' });
  const r2 = await streamed();
  assert.equal(r2.output_text !== undefined ? r2.output_text : r2.output.at(-1).content[0].text, 'Sunny.');
  report(r2.usage.input_tokens_details.cached_tokens, r1.usage.input_tokens + r1.usage.output_tokens);
}

async function anthropic() {
  const Anthropic = load('@anthropic-ai/sdk');
  const client = new Anthropic({ baseURL: baseUrl, apiKey: 'dsv4-local', maxRetries: 0 });
  const tools = [{ name: 'get_weather', description: 'Weather forecast', input_schema: parameters }];
  const messages = [{ role: 'user', content: question }];
  const streamed = () => client.messages.stream({ model, max_tokens: 200, messages, tools }).finalMessage();
  const m1 = await streamed();
  assert.equal(m1.stop_reason, 'tool_use');
  const tu = m1.content.find((b) => b.type === 'tool_use');
  assert.ok(tu, JSON.stringify(m1.content));
  assert.equal(tu.name, 'get_weather');
  assert.deepEqual(tu.input, expected);
  messages.push({ role: 'assistant', content: m1.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: 'sunny' }] });
  const m2 = await streamed();
  assert.equal(m2.content.find((b) => b.type === 'text').text, 'Sunny.');
  const u1 = m1.usage;
  report(m2.usage.cache_read_input_tokens,
    u1.input_tokens + u1.cache_read_input_tokens + u1.cache_creation_input_tokens + u1.output_tokens);
}

const flows = { chat, responses, anthropic };
if (!flows[api]) {
  console.error(`unknown API '${api}' (chat, responses, anthropic)`);
  process.exit(2);
}
run(`replay ${api}`, [[`${api}: a streamed tool call sent back with its result`, flows[api]]]);

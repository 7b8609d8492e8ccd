// Forced tool choice through the official clients (node forced_choice.cjs URL CLIENTS_DIR API,
// API = openai | anthropic). Two tools; a named choice forces the second one (get_time), a
// "required" / {type: any} choice lets the model pick (get_weather). The server writes the
// forced opening into the prompt; its scripted outputs (server_clients_test.cpp) are only what
// follows that opening, in the order of the requests below: for a named tool the parameters
// and the closing tags, for required/any the invoke as well.
'use strict';
const { assert, baseUrl, extra, load, run } = require('./common.cjs');
const model = 'deepseek-v4-flash';
const weather = { type: 'object', properties: { city: { type: 'string' } } };
const time = { type: 'object', properties: { zone: { type: 'string' } } };
const timeArgs = { zone: 'UTC' };
const weatherArgs = { city: 'Paris' };
const api = extra[0];

function openai() {
  const OpenAI = load('openai');
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'dsv4-local', maxRetries: 0 });
  const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters: weather } },
    { type: 'function', function: { name: 'get_time', description: 'Current time', parameters: time } },
  ];
  const messages = [{ role: 'user', content: 'weather in Paris?' }];
  const named = { type: 'function', function: { name: 'get_time' } };
  const chatStream = (params) =>
    client.chat.completions.stream ? client.chat.completions.stream(params) : client.beta.chat.completions.stream(params);
  const rtools = tools.map((t) => ({ type: 'function', ...t.function, strict: false }));
  return [
    ['chat: named tool_choice, non-streaming', async () => {
      const r = await client.chat.completions.create({ model, messages, tools, tool_choice: named });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.tool_calls[0].function.name, 'get_time');
      assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), timeArgs);
      assert.ok(!c.message.reasoning_content, 'a forced call starts after </think>');
    }],
    ['chat: named tool_choice, streamed through the SDK stream helper', async () => {
      const final = await chatStream({ model, messages, tools, tool_choice: named }).finalChatCompletion();
      const c = final.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.tool_calls[0].function.name, 'get_time');
      assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), timeArgs);
    }],
    ['chat: tool_choice "required", streamed chunks', async () => {
      const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', stream: true });
      let name = '', args = '', finish = null, firstDelta = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        if (!firstDelta && (c.delta.content || c.delta.reasoning_content || c.delta.tool_calls)) firstDelta = c.delta;
        for (const tc of c.delta.tool_calls || []) {
          name += (tc.function && tc.function.name) || '';
          args += (tc.function && tc.function.arguments) || '';
        }
        finish = c.finish_reason || finish;
      }
      assert.ok(firstDelta && firstDelta.tool_calls, `the reply starts with the call: ${JSON.stringify(firstDelta)}`);
      assert.equal(finish, 'tool_calls');
      assert.equal(name, 'get_weather');
      assert.deepEqual(JSON.parse(args), weatherArgs);
    }],
    ['responses: named tool_choice, streamed', async () => {
      const final = await client.responses.stream({
        model, input: 'weather in Paris?', tools: rtools, tool_choice: { type: 'function', name: 'get_time' },
      }).finalResponse();
      assert.equal(final.status, 'completed');
      const calls = final.output.filter((o) => o.type === 'function_call');
      assert.equal(calls.length, 1, JSON.stringify(final.output));
      assert.equal(calls[0].name, 'get_time');
      assert.deepEqual(JSON.parse(calls[0].arguments), timeArgs);
    }],
    ['responses: tool_choice "required", non-streaming', async () => {
      const r = await client.responses.create({ model, input: 'weather in Paris?', tools: rtools, tool_choice: 'required' });
      const calls = r.output.filter((o) => o.type === 'function_call');
      assert.equal(calls.length, 1, JSON.stringify(r.output));
      assert.equal(calls[0].name, 'get_weather');
      assert.deepEqual(JSON.parse(calls[0].arguments), weatherArgs);
    }],
  ];
}

function anthropic() {
  const Anthropic = load('@anthropic-ai/sdk');
  const client = new Anthropic({ baseURL: baseUrl, apiKey: 'dsv4-local', maxRetries: 0 });
  const tools = [
    { name: 'get_weather', description: 'Weather forecast', input_schema: weather },
    { name: 'get_time', description: 'Current time', input_schema: time },
  ];
  const messages = [{ role: 'user', content: 'weather in Paris?' }];
  const named = { type: 'tool', name: 'get_time' };
  const onlyCall = (m, name, input) => {
    assert.equal(m.stop_reason, 'tool_use');
    assert.deepEqual(m.content.map((b) => b.type), ['tool_use'], 'a forced call starts after </think>');
    assert.equal(m.content[0].name, name);
    assert.deepEqual(m.content[0].input, input);
  };
  return [
    ['messages: tool_choice {type: tool}, non-streaming', async () => {
      onlyCall(await client.messages.create({ model, max_tokens: 200, messages, tools, tool_choice: named }),
        'get_time', timeArgs);
    }],
    ['messages: tool_choice {type: tool}, streamed (input from input_json_delta)', async () => {
      const stream = client.messages.stream({ model, max_tokens: 200, messages, tools, tool_choice: named });
      const types = [];
      stream.on('streamEvent', (e) => types.push(e.type));
      onlyCall(await stream.finalMessage(), 'get_time', timeArgs);
      assert.equal(types[1], 'content_block_start');
    }],
    ['messages: tool_choice {type: any}, streamed', async () => {
      const final = await client.messages.stream({ model, max_tokens: 200, messages, tools, tool_choice: { type: 'any' } })
        .finalMessage();
      onlyCall(final, 'get_weather', weatherArgs);
    }],
  ];
}

const flows = { openai, anthropic };
if (!flows[api]) {
  console.error(`unknown API '${api}' (openai, anthropic)`);
  process.exit(2);
}
run(`forced ${api}`, flows[api]());

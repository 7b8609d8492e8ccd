// The official openai npm client against ds4-server: chat (plain, streamed, tool calls with
// arguments reassembled by the SDK's stream helper), Responses (plain and streamed with a
// function call and reasoning summary), and legacy completions. Forced outputs: forced.json.
'use strict';
const { assert, baseUrl, load, expectedArgs, run } = require('./common.cjs');
const OpenAI = load('openai');
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'dsv4-local', maxRetries: 0 });
const model = 'deepseek-v4-flash';
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather forecast',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
  },
}];
const messages = [{ role: 'user', content: 'weather in Paris?' }];
const chatStream = (params) =>
  client.chat.completions.stream ? client.chat.completions.stream(params) : client.beta.chat.completions.stream(params);

run('openai', [
  ['chat: non-streaming text with reasoning_content', async () => {
    const r = await client.chat.completions.create({ model, messages });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.content, 'Hello there!');
    assert.equal(r.choices[0].message.reasoning_content, 'Let me think.');
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.prompt_tokens > 0);
  }],
  ['chat: streaming text', async () => {
    const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } });
    let content = '', reasoning = '', finish = null, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta.content || '';
      reasoning += c.delta.reasoning_content || '';
      finish = c.finish_reason || finish;
    }
    assert.equal(content, 'Hello there!');
    assert.equal(reasoning, 'Let me think.');
    assert.equal(finish, 'stop');
    assert.ok(usage && usage.completion_tokens > 0);
  }],
  ['chat: streamed tool call reassembled by the SDK', async () => {
    const stream = chatStream({ model, messages, tools });
    const final = await stream.finalChatCompletion();
    const msg = final.choices[0].message;
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(msg.tool_calls.length, 1);
    assert.match(msg.tool_calls[0].id, /^call_[0-9a-f]{32}$/);
    assert.equal(msg.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), expectedArgs);
  }],
  ['chat: non-streaming tool call, then the tool result round trip', async () => {
    const r = await client.chat.completions.create({ model, messages, tools });
    const call = r.choices[0].message.tool_calls[0];
    assert.deepEqual(JSON.parse(call.function.arguments), expectedArgs);
    const r2 = await client.responses.create({
      model,
      input: [
        { role: 'user', content: 'weather in Paris?' },
        { type: 'function_call', call_id: call.id, name: 'get_weather', arguments: call.function.arguments },
        { type: 'function_call_output', call_id: call.id, output: 'sunny' },
      ],
    });
    assert.equal(r2.status, 'completed');
    assert.equal(r2.output_text, 'Hi!');
  }],
  ['responses: streamed function call with reasoning summary', async () => {
    const stream = client.responses.stream({
      model, input: 'weather in Paris?', reasoning: { effort: 'high', summary: 'auto' },
      tools: [{ type: 'function', name: 'get_weather', parameters: tools[0].function.parameters, strict: false }],
    });
    const types = [];
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    const fc = final.output.find((o) => o.type === 'function_call');
    assert.ok(fc, JSON.stringify(final.output));
    assert.match(fc.call_id, /^call_[0-9a-f]{32}$/);
    assert.deepEqual(JSON.parse(fc.arguments), expectedArgs);
    const rs = final.output.find((o) => o.type === 'reasoning');
    assert.equal(rs.summary[0].text, 'Need the weather.');
    assert.equal(types[0], 'response.created');
    assert.equal(types[types.length - 1], 'response.completed');
    assert.ok(types.includes('response.function_call_arguments.done'));
  }],
  ['responses: streamed text events', async () => {
    const stream = await client.responses.create({ model, input: 'hi', stream: true });
    let text = '', done = null;
    for await (const e of stream) {
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.completed') done = e.response;
    }
    assert.equal(text, 'Hi!');
    assert.equal(done.output[0].content[0].text, 'Hi!');
  }],
  ['completions: legacy text completion', async () => {
    const r = await client.completions.create({ model, prompt: 'Once', max_tokens: 50 });
    assert.equal(r.choices[0].text, 'The end.');
  }],
  ['errors: an unknown model is the SDK\'s NotFoundError (404, code model_not_found)', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages }), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      assert.ok(e instanceof OpenAI.NotFoundError, e.constructor.name);
      return true;
    });
  }],
]);

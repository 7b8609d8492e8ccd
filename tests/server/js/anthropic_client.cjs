// The official @anthropic-ai/sdk npm client against ds4-server: messages (plain, streamed
// with the SDK's message stream accumulating thinking, text and tool_use input from
// input_json_delta), and a tool_result round trip. Forced outputs: forced.json.
'use strict';
const { assert, baseUrl, load, expectedArgs, run } = require('./common.cjs');
const Anthropic = load('@anthropic-ai/sdk');
const client = new Anthropic({ baseURL: baseUrl, apiKey: 'dsv4-local', maxRetries: 0 });
const model = 'deepseek-v4-flash';
const tools = [{
  name: 'get_weather', description: 'Weather forecast',
  input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
}];
const messages = [{ role: 'user', content: 'weather in Paris?' }];

run('anthropic', [
  ['messages: non-streaming thinking and text', async () => {
    const r = await client.messages.create({ model, max_tokens: 200, messages, system: 'Be brief.' });
    assert.equal(r.type, 'message');
    assert.equal(r.stop_reason, 'end_turn');
    assert.deepEqual(r.content.map((b) => b.type), ['thinking', 'text']);
    assert.equal(r.content[0].thinking, 'Let me think.');
    assert.equal(r.content[1].text, 'Hello there!');
  }],
  ['messages: streamed thinking and text', async () => {
    const stream = client.messages.stream({ model, max_tokens: 200, messages, thinking: { type: 'enabled', budget_tokens: 1024 } });
    let text = '';
    stream.on('text', (t) => { text += t; });
    const final = await stream.finalMessage();
    assert.equal(text, 'Hello there!');
    assert.deepEqual(final.content.map((b) => b.type), ['thinking', 'text']);
    assert.equal(final.content[0].thinking, 'Let me think.');
    assert.ok(final.usage.output_tokens > 0);
  }],
  ['messages: streamed tool_use with input assembled from input_json_delta', async () => {
    const stream = client.messages.stream({ model, max_tokens: 200, messages, tools });
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const tu = final.content.find((b) => b.type === 'tool_use');
    assert.ok(tu, JSON.stringify(final.content));
    assert.match(tu.id, /^toolu_[0-9a-f]{32}$/);
    assert.equal(tu.name, 'get_weather');
    assert.deepEqual(tu.input, expectedArgs);
  }],
  ['messages: non-streaming tool_use, then the tool_result round trip', async () => {
    const r = await client.messages.create({ model, max_tokens: 200, messages, tools });
    const tu = r.content.find((b) => b.type === 'tool_use');
    assert.deepEqual(tu.input, expectedArgs);
    const r2 = await client.messages.create({
      model, max_tokens: 200, tools,
      messages: [...messages, { role: 'assistant', content: r.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: 'sunny' }] }],
    });
    assert.equal(r2.content.find((b) => b.type === 'text').text, 'Hi!');
  }],
  ['errors: an unknown model is the SDK\'s NotFoundError (404, not_found_error)', async () => {
    await assert.rejects(client.messages.create({ model: 'claude-x', max_tokens: 10, messages }), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.error.error.type, 'not_found_error');
      assert.ok(e instanceof Anthropic.NotFoundError, e.constructor.name);
      return true;
    });
  }],
]);

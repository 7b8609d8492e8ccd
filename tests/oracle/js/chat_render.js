#!/usr/bin/env node
// Reference renderer for the chat tests: renders conversations with llama.cpp's DeepSeek-V4 jinja
// template using a JS Jinja engine (@huggingface/jinja), plus the two steps llama.cpp (and DS4)
// apply outside the template:
//   * tool results are reordered into the order of the preceding assistant's tool_calls by id
//     (llama.cpp common/parsers/deepseek.cpp, re-implemented here from its description);
//   * Think Max is requested only when the context is at least 393216 tokens (DS4's gate).
// Usage: node chat_render.js CASES.json > RENDERED.json
//   CASES.json: [{name, thinking: "off"|"high"|"max", context, add_generation_prompt,
//                 drop_thinking?, tools?, response_format?, messages}]
//   output: [{name, text}]
// Setup: npm install --prefix .cache/jinja @huggingface/jinja@0.5.11 (see scripts/setup.sh).
'use strict';
const fs = require('fs');
const path = require('path');

const repo = path.resolve(__dirname, '..', '..', '..');
const jinjaDir = process.env.DS4_JINJA_DIR || path.join(repo, '.cache', 'jinja', 'node_modules', '@huggingface', 'jinja');
const templatePath = process.env.DS4_V4_TEMPLATE ||
  path.join(repo, '.cache', 'oracle', 'llama.cpp', 'models', 'templates', 'deepseek-ai-DeepSeek-V4.jinja');
const { Template } = require(jinjaDir);

const THINK_MAX_MIN_CONTEXT = 393216;

function sortToolResults(messages) {
  const out = messages.slice();
  let callOrder = new Map();
  for (let i = 0; i < out.length;) {
    const m = out[i];
    if (m.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
      callOrder = new Map();
      m.tool_calls.forEach((tc, idx) => { if (tc.id) callOrder.set(tc.id, idx); });
      i++;
      continue;
    }
    if (m.role !== 'user' && m.role !== 'tool') { i++; continue; }
    const toolPos = [];
    let end = i;
    for (; end < out.length; end++) {
      if (out[end].role === 'tool') toolPos.push(end);
      else if (out[end].role !== 'user') break;
    }
    if (toolPos.length > 1 && callOrder.size > 0) {
      const rank = (r) => (callOrder.has(r.tool_call_id) ? callOrder.get(r.tool_call_id) : 0);
      // Array.prototype.sort is stable in Node >= 12.
      const results = toolPos.map((p) => out[p]).sort((a, b) => rank(a) - rank(b));
      toolPos.forEach((p, k) => { out[p] = results[k]; });
    }
    i = end;
  }
  return out;
}

function prepare(messages) {
  // The JS engine has no from_json filter: pass arguments as parsed objects, which the template
  // renders the same way (its `args is string` branch parses them first).
  return messages.map((m) => {
    if (!Array.isArray(m.tool_calls)) return m;
    return Object.assign({}, m, {
      tool_calls: m.tool_calls.map((tc) => {
        const fn = Object.assign({}, tc.function);
        if (typeof fn.arguments === 'string') fn.arguments = JSON.parse(fn.arguments);
        return Object.assign({}, tc, { function: fn });
      }),
    });
  });
}

const template = new Template(fs.readFileSync(templatePath, 'utf8'));
const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const results = cases.map((c) => {
  const ctx = {
    bos_token: '<｜begin▁of▁sentence｜>',
    messages: prepare(sortToolResults(c.messages)),
    add_generation_prompt: c.add_generation_prompt !== false,
    thinking: c.thinking !== 'off',
  };
  if (c.thinking === 'max' && (c.context || 0) >= THINK_MAX_MIN_CONTEXT) ctx.reasoning_effort = 'max';
  if (c.drop_thinking === false) ctx.drop_thinking = false;
  if (c.tools !== undefined) ctx.tools = c.tools;
  if (c.response_format !== undefined) ctx.response_format = c.response_format;
  return { name: c.name, text: template.render(ctx) };
});
process.stdout.write(JSON.stringify(results, null, 1) + '\n');

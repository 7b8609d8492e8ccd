#!/usr/bin/env python3
"""The replicas recipe, tested (issue 37, docs/DEPLOY.md): deploy/haproxy/haproxy.cfg as shipped
in front of three ds4-server replicas on loopback that share one --kv-disk-dir.

  1. Conversations in all three APIs (chat completions, Anthropic messages, Responses), each
     with an X-DS4-Session header: the second turn lands on the replica of the first.
  2. Concurrent clients (streamed and not) while the replica holding conversation 0 is killed
     with SIGKILL: no request that had not started streaming fails (HAProxy retries it on
     another replica), and every non-streamed request succeeds.
  3. Every conversation continues: those of the dead replica on another one, from the shared
     disk cache (cached tokens > 0 in each API's usage).
  4. The killed replica restarts on its port, HAProxy's health check takes it back, and it
     answers requests again.
  5. SIGTERM drains a replica: /health turns 503 or the process is gone, HAProxy takes it out,
     and a request in flight on it completes.

  haproxy_test.py --bin BUILD/bin --cfg deploy/haproxy/haproxy.cfg
Exits 77 (skipped) without haproxy.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
DEADLINE = time.monotonic() + 240  # the whole test; ctest's timeout is larger


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def wait_for(what, pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")


class Replica:
    def __init__(self, name, bin_dir, model, kv_dir, work):
        self.name, self.bin, self.model, self.kv, self.work = name, bin_dir, model, kv_dir, work
        self.port = free_port()
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.log = open(os.path.join(self.work, f"{self.name}-{self.starts}.log"), "wb")
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "ds4-server"), "-m", self.model, "--port", str(self.port),
             "--ctx", "4096", "-t", "1", "-n", "16", "--kv-disk-dir", self.kv,
             "--kv-cache-min-tokens", "16", "--kv-cache-boundary-align-tokens", "16",
             "--kv-cache-boundary-trim-tokens", "4", "--kv-cache-continued-interval-tokens", "0",
             "--kv-disk-space-mb", "256", "--drain-timeout", "60"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(f"{self.name} to listen", lambda: self.health() == 200, 60)

    def health(self):
        if self.proc.poll() is not None:
            fail(f"{self.name} exited with {self.proc.returncode}: {self.read_log()}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            c.request("GET", "/health")
            return c.getresponse().status
        except OSError:
            return None

    def read_log(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def stop(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)


class HAProxy:
    def __init__(self, cfg, replicas, work):
        self.port = free_port()
        self.sock = os.path.join(work, "haproxy.sock")
        env = dict(os.environ, DS4_LISTEN=f"127.0.0.1:{self.port}", DS4_HAPROXY_STATS=self.sock)
        for i, r in enumerate(replicas, 1):
            env[f"DS4_R{i}"] = f"127.0.0.1:{r.port}"
        self.log = open(os.path.join(work, "haproxy.log"), "wb")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", cfg], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def status(self):
        """{server name: UP/DOWN/...} from the stats socket."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(self.sock)
                s.sendall(b"show stat\n")
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
        except OSError:
            return {}
        lines = data.decode().splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "ds4_replicas" and row.get("svname") not in ("BACKEND", None):
                out[row["svname"]] = row["status"].split()[0]
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


# --- the three APIs: a request body, and the reply text and cached tokens of an answer ---

def body(api, turns, stream=False):
    """turns: [(role, text)]."""
    msgs = [{"role": r, "content": t} for r, t in turns]
    if api == "chat":
        return "/v1/chat/completions", {"model": "deepseek-v4-flash", "messages": msgs, "max_tokens": 8,
                                        "temperature": 0, "stream": stream,
                                        "thinking": {"type": "disabled"}}
    if api == "messages":
        return "/v1/messages", {"model": "deepseek-v4-flash", "messages": msgs, "max_tokens": 8,
                                "temperature": 0, "stream": stream, "thinking": {"type": "disabled"}}
    return "/v1/responses", {"model": "deepseek-v4-flash", "input": msgs, "max_output_tokens": 8,
                             "temperature": 0, "stream": stream, "reasoning": {"effort": "none"}}


def parse(api, j):
    if api == "chat":
        return j["choices"][0]["message"]["content"], j["usage"]["prompt_tokens_details"]["cached_tokens"]
    if api == "messages":
        text = "".join(b.get("text", "") for b in j["content"] if b["type"] == "text")
        return text, j["usage"]["cache_read_input_tokens"]
    text = "".join(c.get("text", "") for o in j["output"] if o["type"] == "message" for c in o["content"])
    return text, j["usage"]["input_tokens_details"]["cached_tokens"]


def post(port, path, payload, headers=None, timeout=120):
    """(status, replica, body bytes); raises OSError on a connection failure."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(payload), {"content-type": "application/json", **(headers or {})})
    r = c.getresponse()
    data = r.read()
    return r.status, r.getheader("X-DS4-Replica"), data


class Conversation:
    TOPICS = ["caches", "rivers", "compilers", "gardens", "trains", "violins"]

    def __init__(self, i):
        self.i, self.api = i, ["chat", "messages", "responses"][i % 3]
        self.session = f"conv-{i}"
        self.turns = [("user", f"Conversation {i}. Hello there, how are you today? Tell me all about "
                               f"{self.TOPICS[i % len(self.TOPICS)]}, please, in some detail.")]
        self.replicas = []

    def turn(self, port, follow_up=None):
        if follow_up:
            self.turns.append(("user", follow_up))
        path, payload = body(self.api, self.turns)
        status, replica, data = post(port, path, payload, {"X-DS4-Session": self.session})
        if status != 200:
            fail(f"conversation {self.i} ({self.api}) got {status}: {data[:300]!r}")
        text, cached = parse(self.api, json.loads(data))
        self.turns.append(("assistant", text))
        self.replicas.append(replica)
        return replica, cached


def load(port, stop, results, client):
    """Requests back to back until `stop`: even clients stream chat, odd ones do not."""
    n = 0
    while not stop.is_set() and time.monotonic() < DEADLINE:
        stream = client % 2 == 0
        path, payload = body("chat", [("user", f"load client {client} request {n}: say something")], stream)
        started, ok, err = False, False, ""
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("POST", path, json.dumps(payload), {"content-type": "application/json"})
            r = c.getresponse()
            if r.status == 200:
                # A stream has started once its 200 and headers are out: HAProxy has passed them
                # on and can no longer retry it elsewhere.
                started = stream
                data = b""
                while chunk := r.read1(4096) if stream else r.read():
                    started = True
                    data += chunk
                    if not stream:
                        break
                ok = (b"data: [DONE]" in data) if stream else ("choices" in json.loads(data))
                if not ok:
                    err = f"incomplete body: {data[-200:]!r}"
            else:
                err = f"status {r.status}: {r.read()[:200]!r}"
        except (OSError, http.client.HTTPException, ValueError) as e:
            err = repr(e)
        results.append({"client": client, "stream": stream, "ok": ok, "started": started, "err": err})
        n += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cfg", required=True)
    a = ap.parse_args()
    if not shutil.which("haproxy"):
        print("SKIP: haproxy not installed (scripts/setup.sh installs it)")
        return SKIP
    work = tempfile.mkdtemp(prefix="ds4-haproxy-")
    replicas, proxy = [], None
    try:
        model = os.path.join(work, "tiny.gguf")
        subprocess.run([os.path.join(a.bin, "ds4-gguf-gen"), "-q", "--preset", "tiny", "--real-vocab",
                        "--type", "embd=q8_0", "--type", "output=q8_0", "-o", model], check=True)
        kv = os.path.join(work, "kv")
        replicas = [Replica(f"r{i}", a.bin, model, kv, work) for i in (1, 2, 3)]
        for r in replicas:
            r.start()
        by_name = {r.name: r for r in replicas}
        proxy = HAProxy(a.cfg, replicas, work)
        wait_for("HAProxy to see 3 replicas up",
                 lambda: proxy.status() == {"r1": "UP", "r2": "UP", "r3": "UP"}, 30)

        # 1. Affinity: the second turn of every conversation goes where the first went.
        convs = [Conversation(i) for i in range(6)]
        for c in convs:
            c.turn(proxy.port)
        for c in convs:
            replica, cached = c.turn(proxy.port, "Thank you. And what about the disk?")
            if replica != c.replicas[0]:
                fail(f"conversation {c.i} moved from {c.replicas[0]} to {replica} with its session header")
            if cached <= 0:
                fail(f"conversation {c.i} ({c.api}) second turn reused no tokens")
        used = sorted(set(c.replicas[0] for c in convs))
        print(f"affinity ok: 6 conversations over replicas {used}", flush=True)

        # 2. Load, and the replica of conversation 0 killed under it.
        victim = by_name[convs[0].replicas[0]]
        stop, results = threading.Event(), []
        clients = [threading.Thread(target=load, args=(proxy.port, stop, results, k)) for k in range(6)]
        for t in clients:
            t.start()
        time.sleep(3)
        victim.stop(signal.SIGKILL)
        killed_at = len(results)
        time.sleep(5)
        stop.set()
        for t in clients:
            t.join(timeout=150)
        bad = [r for r in results if not r["ok"] and not (r["stream"] and r["started"])]
        cut = [r for r in results if not r["ok"] and r["stream"] and r["started"]]
        print(f"load: {len(results)} requests ({killed_at} before the kill), {len(cut)} streams cut "
              f"after their headers, {len(bad)} failed before starting", flush=True)
        if bad:
            fail(f"requests that had not started failed: {bad[:5]}")
        if len(results) - killed_at < 6:
            fail("too few requests after the kill to tell anything")
        wait_for(f"HAProxy to mark {victim.name} down", lambda: proxy.status().get(victim.name) == "DOWN", 10)

        # 3. Every conversation continues; the victim's from the shared disk cache elsewhere.
        for c in convs:
            before = c.replicas[0]
            replica, cached = c.turn(proxy.port, "One more question: and the network?")
            if replica == victim.name:
                fail(f"conversation {c.i} was sent to the dead replica")
            if cached <= 0:
                fail(f"conversation {c.i} ({c.api}) on {replica} (was {before}) reused no tokens")
            if before == victim.name:
                print(f"conversation {c.i} ({c.api}) moved {before} -> {replica}, {cached} tokens from the "
                      "shared cache", flush=True)

        # 4. The victim restarts and rejoins.
        victim.start()
        wait_for(f"HAProxy to take {victim.name} back", lambda: proxy.status().get(victim.name) == "UP", 15)
        seen = set()
        for n in range(9):
            path, payload = body("chat", [("user", f"after the restart {n}")])
            status, replica, data = post(proxy.port, path, payload)
            if status != 200:
                fail(f"request after the restart got {status}: {data[:200]!r}")
            seen.add(replica)
        if victim.name not in seen:
            fail(f"the restarted {victim.name} got none of 9 requests (went to {sorted(seen)})")
        print(f"{victim.name} rejoined: answers among {sorted(seen)}", flush=True)

        # 5. SIGTERM drains: a request in flight on the replica completes, HAProxy takes it out.
        target = replicas[(replicas.index(victim) + 1) % 3]
        path, payload = body("chat", [("user", "a long answer, please, while I drain")], stream=False)
        payload["max_tokens"] = 64
        outcome = {}

        def inflight():
            outcome["r"] = post(target.port, path, payload)
        t = threading.Thread(target=inflight)
        t.start()
        time.sleep(0.3)
        target.proc.send_signal(signal.SIGTERM)
        wait_for(f"HAProxy to take the draining {target.name} out",
                 lambda: proxy.status().get(target.name) in ("DOWN", "MAINT", "NOLB"), 15)
        t.join(timeout=120)
        status = outcome.get("r", (None,))[0]
        if status != 200:
            fail(f"the request in flight on the draining {target.name} got {status}")
        if target.proc.wait(timeout=60) != 0:
            fail(f"{target.name} exited with {target.proc.returncode} after SIGTERM")
        print(f"{target.name} drained: its request completed, exit 0", flush=True)
        print("haproxy test passed", flush=True)
        return 0
    except SystemExit:
        for r in replicas:
            print(f"--- {r.name} log:\n{r.read_log() if r.proc else ''}", file=sys.stderr)
        if proxy:
            with open(proxy.log.name, "rb") as f:
                print(f"--- haproxy log:\n{f.read().decode(errors='replace')[-3000:]}", file=sys.stderr)
        raise
    finally:
        for r in replicas:
            r.stop()
        if proxy:
            proxy.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""scripts/download_model.sh end to end against a local HTTP server on loopback (never the
internet): the hub's HEAD answer (X-Linked-Size, X-Linked-Etag), ranged GETs, a download cut
off half way and resumed from its .part file, a wrong published checksum refused, --dry-run,
a token sent as a bearer header, and the error when the hub cannot be reached.

usage: download_model_test.py PATH/TO/download_model.sh
"""
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

SCRIPT = None
MTP = "DeepSeek-V4-Flash-MTP-Q4K-Q8_0-F32.gguf"
Q2 = "DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix.gguf"


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files = {}        # name -> bytes
        self.bad_sha = set()   # names published with a wrong SHA-256
        self.cut_once = {}     # name -> bytes after which the next GET is cut off
        self.log = []          # (method, name, range header, authorization header)
        self.need_token = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _name(self):
        prefix = "/antirez/deepseek-v4-gguf/resolve/main/"
        return self.path[len(prefix):] if self.path.startswith(prefix) else None

    def _check(self, name):
        hub = self.server
        hub.log.append((self.command, name, self.headers.get("Range"), self.headers.get("Authorization")))
        if hub.need_token and self.headers.get("Authorization") != "Bearer " + hub.need_token:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if name not in hub.files:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return hub.files[name]

    def do_HEAD(self):
        name = self._name()
        data = self._check(name)
        if data is None:
            return
        sha = hashlib.sha256(data).hexdigest()
        if name in self.server.bad_sha:
            sha = hashlib.sha256(data + b"x").hexdigest()
        self.send_response(302)
        self.send_header("Location", self.path)
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("X-Linked-Etag", '"%s"' % sha)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        name = self._name()
        data = self._check(name)
        if data is None:
            return
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = self.server.cut_once.pop(name, None)
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(body)


class DownloadModel(unittest.TestCase):
    def setUp(self):
        self.hub = Hub()
        self.thread = threading.Thread(target=self.hub.serve_forever, daemon=True)
        self.thread.start()
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "gguf")
        self.link = os.path.join(self.tmp.name, "ds4flash.gguf")
        self.hub.files[MTP] = os.urandom(300_000)
        self.hub.files[Q2] = os.urandom(120_000)

    def tearDown(self):
        self.hub.shutdown()
        self.hub.server_close()
        self.tmp.cleanup()

    def run_script(self, *args, endpoint=None, env_extra=None):
        env = dict(os.environ)
        env.pop("HF_TOKEN", None)
        env.update({"DS4_HF_ENDPOINT": endpoint or "http://127.0.0.1:%d" % self.hub.server_address[1],
                    "DS4_GGUF_DIR": self.dir, "DS4_FLASH_LINK": self.link, "HOME": self.tmp.name})
        env.update(env_extra or {})
        return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=60)

    def gets(self, name):
        return [e for e in self.hub.log if e[0] == "GET" and e[1] == name]

    def test_dry_run_lists_and_writes_nothing(self):
        r = self.run_script("q2-imatrix", "--dry-run")  # upstream's name for q2
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(Q2, r.stdout)
        self.assertIn(hashlib.sha256(self.hub.files[Q2]).hexdigest(), r.stdout)
        self.assertIn("120.0 KB", r.stdout)
        self.assertIn("then: " + self.link, r.stdout)
        self.assertFalse(os.path.exists(self.dir))
        self.assertEqual(self.gets(Q2), [])

    def test_interrupted_download_resumes_from_its_part_file(self):
        self.hub.cut_once[MTP] = 100_000
        r = self.run_script("mtp")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("run the same command again to resume it", r.stderr)
        part = os.path.join(self.dir, MTP + ".part")
        self.assertEqual(os.path.getsize(part), 100_000)
        self.assertFalse(os.path.exists(os.path.join(self.dir, MTP)))

        r = self.run_script("mtp")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("resuming", r.stdout)
        self.assertEqual(self.gets(MTP)[-1][2], "bytes=100000-")  # only the rest was asked for
        with open(os.path.join(self.dir, MTP), "rb") as f:
            self.assertEqual(f.read(), self.hub.files[MTP])
        self.assertFalse(os.path.exists(part))
        self.assertFalse(os.path.exists(self.link))  # mtp is not a main model

        # Once there, a new run fetches nothing.
        n = len(self.gets(MTP))
        r = self.run_script("mtp")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already downloaded", r.stdout)
        self.assertEqual(len(self.gets(MTP)), n)

    def test_wrong_checksum_is_refused(self):
        self.hub.bad_sha.add(Q2)
        r = self.run_script("q2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SHA-256", r.stderr)
        self.assertIn("corrupt", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, Q2)))
        self.assertFalse(os.path.exists(os.path.join(self.dir, Q2 + ".part")))
        self.assertFalse(os.path.lexists(self.link))

    def test_main_model_is_linked_and_the_token_is_sent(self):
        self.hub.need_token = "hf_secret"
        r = self.run_script("q2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs a token", r.stderr)
        r = self.run_script("q2", "--token", "hf_secret")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.readlink(self.link), os.path.join(self.dir, Q2))
        self.assertTrue(all(e[3] == "Bearer hf_secret" for e in self.hub.log[1:]))
        os.remove(os.path.join(self.dir, Q2))
        r = self.run_script("q2", env_extra={"HF_TOKEN": "hf_secret"})
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_offline_and_usage_errors(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        r = self.run_script("q2", endpoint="http://127.0.0.1:%d" % port)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot reach", r.stderr)
        self.assertIn("offline", r.stderr)
        r = self.run_script("q9")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown target 'q9'", r.stderr)
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0)
        for t in ("q2", "q2-q4", "q4", "mxfp4", "mtp", "pro-q2", "pro-q4-split", "--dry-run", "DS4_GGUF_DIR"):
            self.assertIn(t, r.stdout)


if __name__ == "__main__":
    SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=2)

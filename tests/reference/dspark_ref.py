#!/usr/bin/env python3
"""Reference DSpark drafter in numpy, written from docs/SPECULATIVE.md ("DSpark") and the trunk
math of docs/spec/ARCHITECTURE.md §3, independently of the C++ engine.

One draft block at position p: the trunk has just evaluated token x_p at p. Inputs:
  * the trunk GGUF (token_embd, output, hyperparameters) and the DSpark support GGUF;
  * the target-layer hidden states (raw little-endian f32) of positions p-n+1 … p, one row per
    position, the last row = p: per row T target layers (in the file's target_layer_ids
    order), each the trunk's HC state after that layer, [HC][D] floats (--features-hc, the
    default) or its stream mean, [D] floats (--features-mean). Rows before the last are the
    drafter's context window (its KV state); give fewer rows for a shorter window;
  * x_p and p.
Outputs (per draft row d = 0 … B-1, predicting the token at p+d+1): the base logits, the
Markov-biased logits along the greedy chain, the proposals, the confidence logits, and the
proposal cut at the threshold.

Run with /usr/bin/python3 (needs numpy) and PYTHONPATH=.cache/oracle/llama.cpp/gguf-py.
  dspark_ref.py --trunk T.gguf --dspark D.gguf --features F.f32 --token X --pos P \
      [--threshold 0.7] [--out-logits L.f32] [--out-base-logits L0.f32] [--out-hidden H.f32]
  dspark_ref.py --self-test --gen build/bin/ds4-gguf-gen
Prints a JSON summary (proposals, confidences, cut) on stdout.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("dspark_ref.py: gguf-py not found: set PYTHONPATH=.cache/oracle/llama.cpp/gguf-py")

F = np.float64


class GgufFile:
    def __init__(self, path):
        self.path = path
        self.r = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.r.tensors}

    def has(self, key):
        return key in self.r.fields

    def value(self, key):
        f = self.r.fields[key]
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            return [f.parts[i][0].item() for i in f.data]
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode()
        return f.parts[f.data[0]][0].item()

    def ne(self, name):
        return [int(x) for x in self.tensors[name].shape]

    def tensor(self, name):
        """Dequantized values, numpy shape = reversed ne (a matrix ne=[in, out] is (out, in))."""
        t = self.tensors[name]
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            a = np.asarray(t.data, dtype=F)
        else:
            a = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=F)
        return a.reshape([int(x) for x in reversed(t.shape)])


# ---- trunk primitives (docs/spec/ARCHITECTURE.md §3) -------------------------------------

def rms_norm(x, w, eps):
    x = np.asarray(x, dtype=F)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rope_tail(x, pos, n_rot, base, inverse=False):
    """Interleaved pairs on the last n_rot dims of each head: x [..., Dh], pos scalar."""
    x = np.array(x, dtype=F)
    dh = x.shape[-1]
    n_nope = dh - n_rot
    i = np.arange(n_rot // 2, dtype=F)
    phi = pos * base ** (-2.0 * i / n_rot)
    if inverse:
        phi = -phi
    c, s = np.cos(phi), np.sin(phi)
    a = x[..., n_nope::2].copy()
    b = x[..., n_nope + 1::2].copy()
    x[..., n_nope::2] = a * c - b * s
    x[..., n_nope + 1::2] = a * s + b * c
    return x


def e4m3(v):
    """Nearest E4M3FN value (ties to even mantissa) of v in [-448, 448]."""
    a = np.abs(v)
    out = np.zeros_like(a)
    sub = a < 2.0 ** -6
    out[sub] = np.round(a[sub] / 2.0 ** -9) * 2.0 ** -9
    n = ~sub
    e = np.floor(np.log2(a[n]))
    step = 2.0 ** (e - 3)
    out[n] = np.minimum(np.round(a[n] / step) * step, 448.0)
    return np.sign(v) * out


def fp8_roundtrip(x, n_nope):
    """FP8 simulation of the non-rope dims, blocks of 64 with power-of-two scales (§3.0)."""
    x = np.array(x, dtype=F)
    for b0 in range(0, n_nope, 64):
        blk = x[..., b0:min(b0 + 64, n_nope)]
        amax = np.maximum(np.max(np.abs(blk), axis=-1, keepdims=True), 1e-4)
        sc = 2.0 ** np.ceil(np.log2(amax / 448.0))
        x[..., b0:min(b0 + 64, n_nope)] = sc * e4m3(np.clip(blk / sc, -448.0, 448.0))
    return x


class Cfg:
    def __init__(self, g):
        k = lambda s: g.value("deepseek4." + s)
        self.n_layer, self.D, self.V = k("block_count"), k("embedding_length"), k("vocab_size")
        self.H, self.Dh, self.n_rot = k("attention.head_count"), k("attention.key_length"), k("rope.dimension_count")
        self.G = k("attention.output_group_count")
        self.E, self.K = k("expert_count"), k("expert_used_count")
        self.route_scale = k("expert_weights_scale")
        self.eps = k("attention.layer_norm_rms_epsilon")
        self.HC, self.sk_iters, self.hc_eps = (k("hyper_connection.count"),
                                               k("hyper_connection.sinkhorn_iterations"),
                                               k("hyper_connection.epsilon"))
        self.rope_base = k("rope.freq_base")
        self.clamp_exp = k("swiglu_clamp_exp")
        self.clamp_shexp = k("swiglu_clamp_shexp") if g.has("deepseek4.swiglu_clamp_shexp") else self.clamp_exp


def hc_pre(X, fn, scale, base, c):
    """X [rows, HC, D] -> (y [rows, D], post [rows, HC], comb [rows, HC, HC]) (§3.2)."""
    rows, hc, d = X.shape
    z = rms_norm(X.reshape(rows, hc * d), None, c.eps)
    m = z @ fn.T
    pre = sigmoid(scale[0] * m[:, :hc] + base[:hc]) + c.hc_eps
    post = 2.0 * sigmoid(scale[1] * m[:, hc:2 * hc] + base[hc:2 * hc])
    Z = (scale[2] * m[:, 2 * hc:] + base[2 * hc:]).reshape(rows, hc, hc)
    C = np.exp(Z - Z.max(axis=2, keepdims=True))
    C = C / C.sum(axis=2, keepdims=True) + c.hc_eps
    C = C / (C.sum(axis=1, keepdims=True) + c.hc_eps)
    for _ in range(c.sk_iters - 1):
        C = C / (C.sum(axis=2, keepdims=True) + c.hc_eps)
        C = C / (C.sum(axis=1, keepdims=True) + c.hc_eps)
    y = np.einsum("rk,rkd->rd", pre, X)
    return y, post, C


def hc_post(Fo, X, post, C):
    """X'_j = post_j F + sum_i C[i][j] X_i (§3.4)."""
    return post[:, :, None] * Fo[:, None, :] + np.einsum("rij,rid->rjd", C, X)


# ---- the drafter ---------------------------------------------------------------------------

class Drafter:
    def __init__(self, trunk_path, dspark_path):
        self.tg, self.dg = GgufFile(trunk_path), GgufFile(dspark_path)
        self.c = Cfg(self.tg)
        self.block_size = self._meta("block_size")
        self.markov_rank = self._meta("markov_rank")
        self.noise_token = self._meta("noise_token_id")
        self.targets = self._meta("target_layer_ids")
        stages = set()
        for name in self.dg.tensors:
            if name.startswith("mtp.") and name.split(".")[1].isdigit():
                stages.add(int(name.split(".")[1]))
        self.S = max(stages) + 1 if stages else 0
        self._validate()
        self.w = {}

    def _meta(self, k):
        for key in ("deepseek4.dspark." + k, "deepseek4.dspark_" + k, "dspark." + k):
            if self.dg.has(key):
                return self.dg.value(key)
        raise ValueError(f"{self.dg.path}: no DSpark metadata key '{k}'")

    def _validate(self):
        c, R, T = self.c, self.markov_rank, len(self.targets)
        if not 1 <= self.block_size <= 16 or R <= 0 or self.noise_token >= c.V or T == 0:
            raise ValueError(f"{self.dg.path}: DSpark metadata out of range")
        if any(l >= c.n_layer for l in self.targets) or any(
                b <= a for a, b in zip(self.targets, self.targets[1:])):
            raise ValueError(f"{self.dg.path}: target layers {self.targets} not increasing inside the trunk")
        if self.S < 3:
            raise ValueError(f"{self.dg.path}: {self.S} stages (DSpark has 3 or more)")
        last = f"mtp.{self.S - 1}."
        want = {"mtp.0.main_proj.weight": [T * c.D, c.D], "mtp.0.main_norm.weight": [c.D],
                last + "norm.weight": [c.D], last + "hc_head_fn.weight": [c.HC * c.D, c.HC],
                last + "hc_head_base.weight": [c.HC], last + "hc_head_scale.weight": [1],
                last + "markov_head.markov_w1.weight": [R, c.V],
                last + "markov_head.markov_w2.weight": [R, c.V],
                last + "confidence_head.proj.weight": [c.D + R, 1]}
        for name, ne in want.items():
            if name not in self.dg.tensors:
                raise ValueError(f"{self.dg.path}: missing tensor {name}")
            if self.dg.ne(name) != ne:
                raise ValueError(f"{self.dg.path}: tensor {name} has ne {self.dg.ne(name)}, expected {ne}")

    def t(self, name, trunk=False):
        key = ("T:" if trunk else "D:") + name
        if key not in self.w:
            self.w[key] = (self.tg if trunk else self.dg).tensor(name)
        return self.w[key]

    def st(self, s, suffix):
        return self.t(f"mtp.{s}.{suffix}")

    # Context features -> the context row c(t) (stage-0 projection).
    def context_rows(self, feats):
        c = self.c
        if feats.ndim == 4:  # [n, T, HC, D]: the trunk's HC states, averaged over streams
            feats = feats.mean(axis=2)
        u = feats.reshape(feats.shape[0], len(self.targets) * c.D)
        return rms_norm(u @ self.st(0, "main_proj.weight").T, self.st(0, "main_norm.weight"), c.eps)

    def kv_rows(self, s, rows_hc, positions):
        """The stage's attention KV of HC rows (hc_pre -> attn_norm -> kv -> rope -> fp8)."""
        c = self.c
        y, _, _ = hc_pre(rows_hc, self.st(s, "hc_attn_fn.weight"), self.st(s, "hc_attn_scale.weight"),
                         self.st(s, "hc_attn_base.weight"), c)
        a = rms_norm(y, self.st(s, "attn_norm.weight"), c.eps)
        kv = rms_norm(a @ self.st(s, "attn_kv.weight").T, self.st(s, "attn_kv_a_norm.weight"), c.eps)
        kv = np.stack([rope_tail(kv[i], positions[i], c.n_rot, c.rope_base) for i in range(len(kv))])
        return fp8_roundtrip(kv, c.Dh - c.n_rot) if self.fp8 else kv

    def attention(self, s, X, ctx_kv, pos):
        """Stage s attention sublayer on the block X [B+1, HC, D]; returns the draft rows'
        HC state after hc_post [B, HC, D]."""
        c, B = self.c, self.block_size
        positions = [pos] + [pos + d for d in range(B)]
        y, post, C = hc_pre(X, self.st(s, "hc_attn_fn.weight"), self.st(s, "hc_attn_scale.weight"),
                            self.st(s, "hc_attn_base.weight"), c)
        a = rms_norm(y, self.st(s, "attn_norm.weight"), c.eps)
        kv = rms_norm(a @ self.st(s, "attn_kv.weight").T, self.st(s, "attn_kv_a_norm.weight"), c.eps)
        kv = np.stack([rope_tail(kv[i], positions[i], c.n_rot, c.rope_base) for i in range(B + 1)])
        if self.fp8:
            kv = fp8_roundtrip(kv, c.Dh - c.n_rot)
        keys = np.concatenate([ctx_kv, kv]) if len(ctx_kv) else kv
        qr = rms_norm(a[1:] @ self.st(s, "attn_q_a.weight").T, self.st(s, "attn_q_a_norm.weight"), c.eps)
        q = (qr @ self.st(s, "attn_q_b.weight").T).reshape(B, c.H, c.Dh)
        q = rms_norm(q, None, c.eps)
        sinks = self.st(s, "attn_sinks.weight")
        out_a, out_b = self.st(s, "attn_output_a.weight"), self.st(s, "attn_output_b.weight")
        Ro = out_a.shape[0] // c.G
        hpg = c.H // c.G
        res = np.zeros((B, c.D))
        for d in range(B):
            qd = rope_tail(q[d], pos + d, c.n_rot, c.rope_base)
            sc = (qd @ keys.T) / np.sqrt(c.Dh)                        # [H, n_keys]
            mx = np.maximum(sc.max(axis=1), sinks)
            e = np.exp(sc - mx[:, None])
            o = (e @ keys) / (e.sum(axis=1) + np.exp(sinks - mx))[:, None]
            o = rope_tail(o, pos + d, c.n_rot, c.rope_base, inverse=True)
            z = np.concatenate([out_a[g * Ro:(g + 1) * Ro] @ o[g * hpg:(g + 1) * hpg].reshape(-1)
                                for g in range(c.G)])
            res[d] = out_b @ z
        return hc_post(res, X[1:], post[1:], C[1:])

    def ffn(self, s, X):
        c = self.c
        y, post, C = hc_pre(X, self.st(s, "hc_ffn_fn.weight"), self.st(s, "hc_ffn_scale.weight"),
                            self.st(s, "hc_ffn_base.weight"), c)
        v = rms_norm(y, self.st(s, "ffn_norm.weight"), c.eps)
        gate_inp, bias = self.st(s, "ffn_gate_inp.weight"), self.st(s, "exp_probs_b.bias")
        w1, w3, w2 = (self.st(s, "ffn_gate_exps.weight"), self.st(s, "ffn_up_exps.weight"),
                      self.st(s, "ffn_down_exps.weight"))
        sh1, sh3, sh2 = (self.st(s, "ffn_gate_shexp.weight"), self.st(s, "ffn_up_shexp.weight"),
                         self.st(s, "ffn_down_shexp.weight"))
        # Upstream runs a stage through the trunk's layer encoder with layer index s.
        il = min(s, len(c.clamp_exp) - 1)
        ce, cs = c.clamp_exp[il], c.clamp_shexp[min(il, len(c.clamp_shexp) - 1)]

        def swiglu(g, u, lim):
            g, u = np.minimum(g, lim), np.clip(u, -lim, lim)
            return g / (1.0 + np.exp(-g)) * u

        out = np.zeros_like(v)
        for r in range(len(v)):
            logit = gate_inp @ v[r]
            sp = np.sqrt(np.logaddexp(0.0, logit))
            sel = np.argsort(-(sp + bias), kind="stable")[:c.K]
            wts = sp[sel] / max(sp[sel].sum(), 6.103515625e-5) * c.route_scale
            acc = np.zeros(c.D)
            for e, we in zip(sel, wts):
                acc += w2[e] @ (we * swiglu(w1[e] @ v[r], w3[e] @ v[r], ce))
            out[r] = acc + sh2 @ swiglu(sh1 @ v[r], sh3 @ v[r], cs)
        return hc_post(out, X, post, C)

    def head(self, Z):
        """Last stage's head: HC collapse, norm -> h [B, D]; base logits with the trunk's output."""
        c, last = self.c, self.S - 1
        rows = Z.shape[0]
        m = rms_norm(Z.reshape(rows, -1), None, c.eps) @ self.st(last, "hc_head_fn.weight").T
        a = sigmoid(self.st(last, "hc_head_scale.weight")[0] * m + self.st(last, "hc_head_base.weight")) + c.hc_eps
        h = rms_norm(np.einsum("rk,rkd->rd", a, Z), self.st(last, "norm.weight"), c.eps)
        return h, h @ self.t("output.weight", trunk=True).T

    def draft(self, feats, token, pos, threshold=0.7, noise_token=None, fp8=True):
        """One block at `pos` for token x_pos. feats: [n, T, HC, D] or [n, T, D], last row = pos."""
        c, B, R = self.c, self.block_size, self.markov_rank
        self.fp8 = fp8
        noise = self.noise_token if noise_token is None else noise_token
        cr = self.context_rows(np.asarray(feats, dtype=F))       # [n, D]
        n_ctx = len(cr) - 1
        ctx_pos = [pos - n_ctx + i for i in range(n_ctx)]
        emb = self.t("token_embd.weight", trunk=True)
        rows = [cr[-1]] + [emb[token]] + [emb[noise]] * (B - 1)
        X = np.repeat(np.stack(rows)[:, None, :], c.HC, axis=1)  # [B+1, HC, D]
        ctx_hc = np.repeat(cr[:-1][:, None, :], c.HC, axis=1)
        for s in range(self.S):
            ctx_kv = self.kv_rows(s, ctx_hc, ctx_pos) if n_ctx else np.zeros((0, c.Dh))
            Y = self.ffn(s, self.attention(s, X, ctx_kv, pos))
            X = np.concatenate([X[:1], Y])
        h, base = self.head(X[1:])
        w1 = self.st(self.S - 1, "markov_head.markov_w1.weight")   # (V, R): row v = token v's state
        w2 = self.st(self.S - 1, "markov_head.markov_w2.weight")   # (V, R): bias = w2 @ state
        conf_w = self.st(self.S - 1, "confidence_head.proj.weight")[0]
        prev, logits, props, kappa, states = token, np.zeros((B, c.V)), [], [], []
        for d in range(B):
            sd = w1[prev]
            logits[d] = base[d] + w2 @ sd
            props.append(int(np.argmax(logits[d])))
            kappa.append(float(conf_w @ np.concatenate([h[d], sd])))
            states.append(sd)
            prev = props[-1]
        conf = [float(sigmoid(k)) for k in kappa]
        cut = B
        if threshold > 0:
            cut = next((d for d in range(B) if conf[d] < threshold), B)
        return {"hidden": h, "base_logits": base, "logits": logits, "markov_states": np.stack(states),
                "proposals": props, "confidence_logits": kappa, "confidence": conf,
                "proposal": props[:cut]}


# ---- self-test -----------------------------------------------------------------------------

def self_test(gen):
    with tempfile.TemporaryDirectory() as d:
        trunk, dspark = os.path.join(d, "t.gguf"), os.path.join(d, "d.gguf")
        rc = os.system(f"'{gen}' -q --seed 11 -o '{trunk}' --dspark-out '{dspark}'")
        assert rc == 0, f"{gen} failed ({rc})"
        dr = Drafter(trunk, dspark)
        c, B, R, T = dr.c, dr.block_size, dr.markov_rank, len(dr.targets)
        assert dr.S == 3 and B == 5 and T == 3, (dr.S, B, T)
        rng = np.random.default_rng(5)
        feats = rng.standard_normal((4, T, c.HC, c.D))
        token, pos = 7, 20
        out = dr.draft(feats, token, pos, threshold=0.5)
        assert out["hidden"].shape == (B, c.D) and out["logits"].shape == (B, c.V)
        assert len(out["proposals"]) == B and len(out["confidence"]) == B
        assert np.all(np.isfinite(out["logits"])) and np.all(np.isfinite(out["hidden"]))

        # Hand computation of row 1 (previous token = proposal 0) straight from the file's
        # f32 bytes, with plain loops: the Markov state, the bias, the confidence logit.
        last = f"mtp.{dr.S - 1}."
        raw = lambda n: np.asarray(dr.dg.tensors[n].data, dtype=np.float32).reshape(-1)
        w1, w2 = raw(last + "markov_head.markov_w1.weight"), raw(last + "markov_head.markov_w2.weight")
        cw = raw(last + "confidence_head.proj.weight")
        prev = out["proposals"][0]
        state = [float(w1[prev * R + r]) for r in range(R)]
        bias = [sum(float(w2[v * R + r]) * state[r] for r in range(R)) for v in range(c.V)]
        want_logits = [float(out["base_logits"][1][v]) + bias[v] for v in range(c.V)]
        assert np.allclose(out["logits"][1], want_logits, rtol=1e-9, atol=1e-9)
        assert max(abs(b) for b in bias) > 0.1, "the Markov bias should matter"
        assert out["proposals"][1] == max(range(c.V), key=lambda v: (want_logits[v], -v))
        feat = list(out["hidden"][1]) + state
        kappa = sum(float(cw[i]) * feat[i] for i in range(c.D + R))
        assert abs(kappa - out["confidence_logits"][1]) < 1e-9
        assert abs(out["confidence"][1] - 1.0 / (1.0 + np.exp(-kappa))) < 1e-12
        # Row 0's Markov state is the block token's.
        assert np.array_equal(out["markov_states"][0], dr.st(dr.S - 1, "markov_head.markov_w1.weight")[token])

        # The cut: the longest prefix at or above the threshold.
        for th in (0.0, 0.3, 0.5, 0.7, 0.99):
            o = dr.draft(feats, token, pos, threshold=th)
            n = len(o["proposal"])
            assert o["proposal"] == o["proposals"][:n]
            assert all(x >= th for x in o["confidence"][:n])
            assert n == B or o["confidence"][n] < th or th <= 0
        # Attention is non-causal: row 0 sees the later rows (the noise token), and sees the
        # context rows; the trunk's HC streams enter only through their mean.
        other = dr.draft(feats, token, pos, noise_token=(dr.noise_token + 1) % c.V)
        assert not np.allclose(other["base_logits"][0], out["base_logits"][0])
        no_ctx = dr.draft(feats[-1:], token, pos)
        assert not np.allclose(no_ctx["base_logits"], out["base_logits"])
        mean = dr.draft(feats.mean(axis=2), token, pos, threshold=0.5)
        assert np.allclose(mean["logits"], out["logits"], rtol=1e-12, atol=1e-12)
        print(json.dumps({"self_test": "ok", "proposals": out["proposals"],
                          "confidence": [round(x, 4) for x in out["confidence"]]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trunk")
    ap.add_argument("--dspark")
    ap.add_argument("--features")
    ap.add_argument("--features-mean", action="store_true", help="features are [n][T][D] stream means")
    ap.add_argument("--token", type=int)
    ap.add_argument("--pos", type=int)
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--no-fp8", action="store_true", help="skip the FP8 round trip of the KV rows")
    ap.add_argument("--out-logits")
    ap.add_argument("--out-base-logits")
    ap.add_argument("--out-hidden")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--gen", default="build/bin/ds4-gguf-gen")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.gen)
    if not (a.trunk and a.dspark and a.features) or a.token is None or a.pos is None:
        ap.error("--trunk, --dspark, --features, --token and --pos are required")
    dr = Drafter(a.trunk, a.dspark)
    c, T = dr.c, len(dr.targets)
    row = T * c.D if a.features_mean else T * c.HC * c.D
    raw = np.fromfile(a.features, dtype="<f4")
    if raw.size == 0 or raw.size % row:
        sys.exit(f"{a.features}: {raw.size} floats, not a multiple of a row ({row})")
    shape = (raw.size // row, T, c.D) if a.features_mean else (raw.size // row, T, c.HC, c.D)
    out = dr.draft(raw.reshape(shape), a.token, a.pos, a.threshold, fp8=not a.no_fp8)
    for path, key in ((a.out_logits, "logits"), (a.out_base_logits, "base_logits"), (a.out_hidden, "hidden")):
        if path:
            out[key].astype("<f4").tofile(path)
    print(json.dumps({k: out[k] for k in ("proposals", "confidence_logits", "confidence", "proposal")}))


if __name__ == "__main__":
    main()

"""One V4 attention layer (spec section 3) in plain PyTorch: the baseline v4a's
GPU timings are set beside.

Written from ../shared/spec/v4-attention.md the way an engine author would
write it first: bf16 weights and bf16 caches (window ring [B, w, D], compressed
rows [B, N/r, D], index keys [B, N/4, Di]), fp32 where the spec says so, the
fp8/fp4 simulations of section 2 as elementwise ops, top-k by torch.topk.
`decode` runs one token for each of B sequences at the same position;
`prefill` runs S tokens of one fresh sequence (queries in chunks, so that the
gathered rows fit in memory). Both are shape-static, so torch.compile takes
them whole.

    python3 bench/torch_attention.py CONFIG --layers 0,2,3 --batches 32,128
        --context C [--prefill S] [--compile] [--repeat N]

prints one JSON line per case: median/min milliseconds of the step (CUDA
events), after a warm-up run (and torch.compile's compilation).
"""

import argparse
import json
import math

import torch


class Dims:
    def __init__(self, config, layer):
        self.dim = config["hidden_size"]
        self.H = config["num_attention_heads"]
        self.D = config["head_dim"]
        self.R = config["qk_rope_head_dim"]
        self.ql = config["q_lora_rank"]
        self.ol = config["o_lora_rank"]
        self.G = config["o_groups"]
        self.w = config["sliding_window"]
        self.Hi = config["index_n_heads"]
        self.Di = config["index_head_dim"]
        self.K = config["index_topk"]
        self.eps = config["rms_norm_eps"]
        self.r = config["compress_ratios"][layer]
        self.coff = 2 if self.r == 4 else 1
        base = config["compress_rope_theta"] if self.r else config["rope_theta"]
        self.freqs = rope_frequencies(config, self.R, base, yarn=self.r > 0)


def rope_frequencies(config, R, base, yarn):
    f = base ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    scaling = config.get("rope_scaling") or {}
    L = scaling.get("original_max_position_embeddings", 0)
    if yarn and L > 0:
        def bound(beta):
            return R * math.log(L / (beta * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(bound(scaling["beta_fast"])), 0)
        high = min(math.ceil(bound(scaling["beta_slow"])), R - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(R // 2, dtype=torch.float64) - low) /
                (high - low)).clamp(0, 1)
        smooth = 1 - ramp
        f = f / scaling["factor"] * (1 - smooth) + f * smooth
    return f.float()


def rms_norm(x, g, eps):
    xf = x.float()
    return (g.float() * xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
            ).to(x.dtype)


def rope(x, pos, freqs, inverse=False):
    """Interleaved pairs of the last dims of x ([..., R]) at positions pos
    (broadcast over the middle dims)."""
    angle = pos.float()[:, None] * freqs.to(x.device)[None, :]
    while angle.dim() < x.dim():
        angle = angle.unsqueeze(1)
    cos, sin = angle.cos(), angle.sin()
    if inverse:
        sin = -sin
    xf = x.float().unflatten(-1, (-1, 2))
    re, im = xf[..., 0], xf[..., 1]
    out = torch.stack((re * cos - im * sin, re * sin + im * cos), -1)
    return out.flatten(-2).to(x.dtype)


def pow2_ceil(x):
    return torch.exp2(torch.ceil(torch.log2(x)))


def act_quant(x, block, fmax=448.0, fp4=False):
    """fp8 e4m3 (or e2m1 for fp4) round trip per block of the last dim with
    power-of-two scales."""
    xb = x.float().unflatten(-1, (-1, block))
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=1e-4 if not fp4 else 6 * 2**-126)
    s = pow2_ceil(amax / fmax)
    v = (xb / s).clamp(-fmax, fmax)
    if fp4:
        # e2m1 grid: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
        a = v.abs()
        step = torch.where(a < 2, 0.5, torch.where(a < 4, 1.0, 2.0))
        v = torch.sign(v) * torch.round(a / step) * step
    else:
        v = v.to(torch.float8_e4m3fn).float()
    return (v * s).flatten(-2).to(x.dtype)


def hadamard(n, device):
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat((torch.cat((h, h), 1), torch.cat((h, -h), 1)), 0)
    return (h * n ** -0.5).to(device)


class Layer:
    def __init__(self, d: Dims, device, seed=7):
        g = torch.Generator(device="cpu").manual_seed(seed)

        def w(*shape, scale=None):
            scale = scale or shape[-1] ** -0.5
            return (torch.randn(*shape, generator=g) * scale).to(
                device, torch.bfloat16)

        self.d = d
        self.wq_a, self.q_norm = w(d.ql, d.dim), w(d.ql, scale=1.0) + 1
        self.wq_b = w(d.H * d.D, d.ql)
        self.wkv, self.kv_norm = w(d.D, d.dim), w(d.D, scale=1.0) + 1
        self.wo_a = w(d.G * d.ol, d.H * d.D // d.G).view(d.G, d.ol, -1)
        self.wo_b = w(d.dim, d.G * d.ol)
        self.sink = torch.randn(d.H, generator=g).to(device)
        if d.r:
            self.comp = self.compressor(w, d.D, g, device)
        if d.r == 4:
            self.idx_wq_b = w(d.Hi * d.Di, d.ql)
            self.weights_proj = w(d.Hi, d.dim)
            self.idx_comp = self.compressor(w, d.Di, g, device)
            self.hadamard = hadamard(d.Di, device).to(torch.bfloat16)

    def compressor(self, w, width, g, device):
        d = self.d
        return {
            "wkv": w(d.coff * width, d.dim).float(),
            "wgate": w(d.coff * width, d.dim).float(),
            "ape": (torch.randn(d.r, d.coff * width, generator=g) * 0.1).to(device),
            "norm": w(width, scale=1.0) + 1,
        }


def pool(kvp, sc, d, width):
    """Group entries from [..., groups, r, coff*width] projections: softmax
    over the group's tokens (with overlap: also the previous group's, first
    `width` features)."""
    if d.coff == 2:
        prev_kv = torch.nn.functional.pad(kvp[..., :-1, :, :width], (0, 0, 0, 0, 1, 0))
        prev_sc = torch.nn.functional.pad(sc[..., :-1, :, :width], (0, 0, 0, 0, 1, 0),
                                          value=-float("inf"))
        kvp = torch.cat((prev_kv, kvp[..., width:]), -2)
        sc = torch.cat((prev_sc, sc[..., width:]), -2)
    return (kvp * sc.softmax(-2)).sum(-2)


def finish_entry(entry, groups_pos, layer, comp, index):
    d = layer.d
    e = rms_norm(entry.to(torch.bfloat16), comp["norm"], d.eps)
    e = torch.cat((e[..., :-d.R], rope(e[..., -d.R:], groups_pos, d.freqs)), -1)
    if index:
        return act_quant(e @ layer.hadamard, 32, fmax=6.0, fp4=True)
    return torch.cat((act_quant(e[..., :-d.R], 64), e[..., -d.R:]), -1)


def queries(layer, x, pos):
    d = layer.d
    qr = rms_norm(x @ layer.wq_a.T, layer.q_norm, d.eps)
    q = (qr @ layer.wq_b.T).unflatten(-1, (d.H, d.D)).float()
    q = (q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + d.eps)).to(x.dtype)
    q = torch.cat((q[..., :-d.R], rope(q[..., -d.R:], pos, d.freqs)), -1)
    return qr, q


def key(layer, x, pos):
    d = layer.d
    kv = rms_norm(x @ layer.wkv.T, layer.kv_norm, d.eps)
    return torch.cat((act_quant(kv[..., :-d.R], 64),
                      rope(kv[..., -d.R:], pos, d.freqs)), -1)


def index_queries(layer, qr, x, pos):
    d = layer.d
    qi = (qr @ layer.idx_wq_b.T).unflatten(-1, (d.Hi, d.Di))
    qi = torch.cat((qi[..., :-d.R], rope(qi[..., -d.R:], pos, d.freqs)), -1)
    qi = act_quant(qi @ layer.hadamard, 32, fmax=6.0, fp4=True)
    wts = (x @ layer.weights_proj.T).float() * (d.Di ** -0.5 * d.Hi ** -0.5)
    return qi, wts


def attend(layer, q, rows, valid, pos):
    """q [T, H, D], rows [T, S, D], valid [T, S] -> output [T, dim]."""
    d = layer.d
    logits = torch.einsum("thd,tsd->ths", q, rows).float() * d.D ** -0.5
    logits = logits.masked_fill(~valid[:, None, :], -float("inf"))
    sink = layer.sink[None, :, None]
    m = torch.maximum(logits.amax(-1, keepdim=True), sink)
    p = torch.exp(logits - m)
    o = torch.einsum("ths,tsd->thd", p.to(rows.dtype), rows).float()
    o = (o / (p.sum(-1, keepdim=True) + torch.exp(sink - m))).to(rows.dtype)
    o = torch.cat((o[..., :-d.R], rope(o[..., -d.R:], pos, d.freqs, inverse=True)), -1)
    o = torch.einsum("tgk,gok->tgo", o.flatten(1).unflatten(1, (d.G, -1)), layer.wo_a)
    return o.flatten(1) @ layer.wo_b.T


class Caches:
    """bf16 caches of B sequences holding `context` tokens of random rows."""

    def __init__(self, d, batch, context, device):
        n = context + 1
        self.window = torch.randn(batch, d.w, d.D, device=device, dtype=torch.bfloat16)
        if d.r:
            self.comp = torch.randn(batch, n // d.r + 1, d.D, device=device,
                                    dtype=torch.bfloat16)
            shape = (batch, d.coff * d.r)
            self.state_kv = torch.randn(*shape, d.coff * d.D, device=device)
            self.state_sc = torch.randn(*shape, d.coff * d.D, device=device)
        if d.r == 4:
            self.keys = torch.randn(batch, n // 4 + 1, d.Di, device=device,
                                    dtype=torch.bfloat16)
            self.istate_kv = torch.randn(batch, 8, 2 * d.Di, device=device)
            self.istate_sc = torch.randn(batch, 8, 2 * d.Di, device=device)


def decode_compressor(layer, comp, x, pos, state_kv, state_sc, width, index):
    """Feeds one token per sequence into the state ([B, coff*r, coff*width]:
    previous group's slots first with overlap); returns the entry the group
    would emit at its last token (the caller stores it when it is one)."""
    d = layer.d
    kvp = x.float() @ comp["wkv"].T
    sc = x.float() @ comp["wgate"].T + comp["ape"][pos % d.r]
    slot = (d.coff - 1) * d.r + pos % d.r
    b = torch.arange(x.shape[0], device=x.device)
    state_kv[b, slot] = kvp
    state_sc[b, slot] = sc
    groups = state_kv.unflatten(1, (d.coff, d.r))
    scores = state_sc.unflatten(1, (d.coff, d.r))
    if d.coff == 2:
        kv = torch.cat((groups[:, 0, :, :width], groups[:, 1, :, width:]), 1)
        s = torch.cat((scores[:, 0, :, :width], scores[:, 1, :, width:]), 1)
    else:
        kv, s = groups[:, 0], scores[:, 0]
    entry = (kv * s.softmax(1)).sum(1)
    return finish_entry(entry, pos - pos % d.r, layer, comp, index)


def decode(layer, caches, x, pos):
    """One token for each of B sequences at positions pos (all >= w)."""
    d = layer.d
    B = x.shape[0]
    b = torch.arange(B, device=x.device)
    qr, q = queries(layer, x, pos)
    caches.window[b, pos % d.w] = key(layer, x, pos)
    rows, valid = caches.window, torch.ones(B, d.w, dtype=torch.bool, device=x.device)
    if d.r:
        entry = decode_compressor(layer, layer.comp, x, pos, caches.state_kv,
                                  caches.state_sc, d.D, False)
        emit = ((pos + 1) % d.r == 0)[:, None]
        g = pos // d.r
        caches.comp[b, g] = torch.where(emit, entry, caches.comp[b, g])
        visible = (pos + 1) // d.r
        n = caches.comp.shape[1]
        if d.r == 4:
            ikey = decode_compressor(layer, layer.idx_comp, x, pos, caches.istate_kv,
                                     caches.istate_sc, d.Di, True)
            caches.keys[b, g] = torch.where(emit, ikey, caches.keys[b, g])
            qi, wts = index_queries(layer, qr, x, pos)
            scores = torch.einsum("bhd,bnd->bhn", qi, caches.keys).float().relu()
            scores = (scores * wts[..., None]).sum(1)
            live = torch.arange(n, device=x.device)[None, :] < visible[:, None]
            scores = scores.masked_fill(~live, -float("inf"))
            top = scores.topk(min(d.K, n), -1).indices
            picked = caches.comp[b[:, None], top]
            rows = torch.cat((rows, picked), 1)
            valid = torch.cat((valid, top < visible[:, None]), 1)
        else:
            live = torch.arange(n, device=x.device)[None, :] < visible[:, None]
            rows = torch.cat((rows, caches.comp), 1)
            valid = torch.cat((valid, live), 1)
    return attend(layer, q, rows, valid, pos)


def prefill(layer, x, chunk=1024):
    """S tokens of a fresh sequence (S a multiple of r)."""
    d = layer.d
    S = x.shape[0]
    pos = torch.arange(S, device=x.device)
    qr, q = queries(layer, x, pos)
    kv = key(layer, x, pos)
    comp = keys = None
    if d.r:
        def compress(c, width, index):
            kvp = (x.float() @ c["wkv"].T).unflatten(0, (-1, d.r))
            sc = (x.float() @ c["wgate"].T).unflatten(0, (-1, d.r)) + c["ape"]
            entry = pool(kvp, sc, d, width)
            return finish_entry(entry, pos[::d.r], layer, c, index)
        comp = compress(layer.comp, d.D, False)
        if d.r == 4:
            keys = compress(layer.idx_comp, d.Di, True)
            qi, wts = index_queries(layer, qr, x, pos)
    outputs = []
    for start in range(0, S, chunk):
        t = pos[start:start + chunk]
        # Window: tokens t-w+1 .. t of this step's keys.
        win = t[:, None] - d.w + 1 + torch.arange(d.w, device=x.device)[None, :]
        rows, valid = kv[win.clamp(min=0)], win >= 0
        if d.r:
            visible = (t + 1) // d.r
            n = comp.shape[0]
            live = torch.arange(n, device=x.device)[None, :] < visible[:, None]
            if d.r == 4:
                s = torch.einsum("thd,nd->thn", qi[start:start + chunk], keys).float()
                s = (s.relu() * wts[start:start + chunk, :, None]).sum(1)
                top = s.masked_fill(~live, -float("inf")).topk(min(d.K, n), -1).indices
                rows = torch.cat((rows, comp[top]), 1)
                valid = torch.cat((valid, top < visible[:, None]), 1)
            else:
                rows = torch.cat((rows, comp[None].expand(t.shape[0], -1, -1)), 1)
                valid = torch.cat((valid, live), 1)
        outputs.append(attend(layer, q[start:start + chunk], rows, valid, t))
    return torch.cat(outputs)


def time_ms(fn, repeat):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], times[0]


def run_case(config, layer_id, batch, context, tokens, compiled, repeat):
    d = Dims(config, layer_id)
    device = torch.device("cuda")
    layer = Layer(d, device)
    torch.manual_seed(0)
    with torch.no_grad():
        if tokens > 1:
            x = torch.randn(tokens, d.dim, device=device, dtype=torch.bfloat16)
            fn = (lambda: prefill(layer, x))
        else:
            caches = Caches(d, batch, context, device)
            x = torch.randn(batch, d.dim, device=device, dtype=torch.bfloat16)
            pos = torch.full((batch,), context, device=device, dtype=torch.long)
            fn = (lambda: decode(layer, caches, x, pos))
        if compiled:
            fn = torch.compile(fn)
        median, best = time_ms(fn, repeat)
    print(json.dumps({"impl": "torch.compile" if compiled else "torch eager",
                      "weights": "bf16", "layer": layer_id, "batch": batch,
                      "context": context, "tokens": tokens,
                      "median_ms": round(median, 4), "min_ms": round(best, 4)}),
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--layers", default="0")
    parser.add_argument("--batches", default="", help="decode batch sizes")
    parser.add_argument("--context", type=int, default=65536)
    parser.add_argument("--prefill", type=int, default=0)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--repeat", type=int, default=10)
    a = parser.parse_args()
    config = json.load(open(a.config))
    cases = [(b, a.context, 1) for b in map(int, filter(None, a.batches.split(",")))]
    if a.prefill:
        cases.append((1, 0, a.prefill))
    for layer_id in map(int, a.layers.split(",")):
        for batch, context, tokens in cases:
            try:
                run_case(config, layer_id, batch, context, tokens, a.compile, a.repeat)
            except Exception as e:  # one failed case does not hide the others
                print(json.dumps({"impl": "torch", "layer": layer_id, "batch": batch,
                                  "tokens": tokens, "error": str(e)[:300]}), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

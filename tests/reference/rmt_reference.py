"""Independent PyTorch reference of rmt's models (docs/paper.md §2-§3).

Backbone: Transformer-XL decoder, post-LayerNorm, relative positional attention
(attn_type 0). Model kinds: baseline, xl, rmt, mt, xl_rmt (armt: armt_reference.py;
deltanet, gated_deltanet: delta_model_reference.py, all made by make_model).

The state_dict uses the authors' names and shapes so that
load_state_dict(strict=True) works on rmt's checkpoints. The module is meant
to run in float64 (call .double()); fp32 parameters are cast on load.

Tensor layout inside this file is batch-major: hidden [B, L, d_model],
attention [B, n_head, qlen, klen].

Also here: safetensors / .npy helpers, segmentation, the loss and the three
BPTT modes (all / 0 / k) used by the golden driver test_golden.py.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

KINDS = ("baseline", "xl", "rmt", "mt", "xl_rmt")
DELTA_KINDS = ("deltanet", "gated_deltanet")   # delta_model_reference.DeltaModelReference
ALL_KINDS = KINDS + ("armt",) + DELTA_KINDS   # armt: armt_reference.ARMTReference


def make_model(kind, *args, **kwargs):
    """RMTReference; ARMTReference for kind armt (which takes d_mem); DeltaModelReference for
    deltanet / gated_deltanet (which take expand_v, short_conv and rule)."""
    if kind == "armt":
        import armt_reference  # noqa: E402  (it builds on this module)
        return armt_reference.ARMTReference(kind, *args, **kwargs)
    kwargs.pop("d_mem", None)
    if kind in DELTA_KINDS:
        import delta_model_reference  # noqa: E402  (it builds on this module)
        return delta_model_reference.DeltaModelReference(kind, *args, **kwargs)
    return RMTReference(kind, *args, **kwargs)


# --------------------------------------------------------------------------
# relative shift and mask


def rel_shift(x):
    """The literal pad/reshape trick over the last two dims [..., qlen, klen].

    Prepend one zero column, reinterpret the (qlen, klen+1) block as
    (klen+1, qlen), drop its first row, reinterpret as (qlen, klen).
    Row i, col j then holds x[i, j+qlen-1-i] for j <= i+mlen, 0 at
    j == i+mlen+1 and x[i+1, j-i-mlen-2] beyond (mlen = klen-qlen): the
    wrap-around values that memory rows see are intended.
    """
    *lead, q, k = x.shape
    pad = x.new_zeros(*lead, q, 1)
    xp = torch.cat([pad, x], dim=-1).contiguous()       # [..., q, k+1]
    xp = xp.view(*lead, k + 1, q)
    return xp[..., 1:, :].reshape(*lead, q, k)


def build_mask(qlen, mlen, m, has_write, read_mem_from_cache, device=None):
    """Attention mask [qlen, mlen+qlen], True = blocked.

    Keys [cache (mlen) | read (m) | tokens | write (m if has_write)],
    queries [read | tokens | write]:
      causal with offset: key j blocked for query i when j > i + mlen;
      read rows see the whole read block, the cache only if read_mem_from_cache;
      write rows see the whole write block and everything before it, the cache
      only if read_mem_from_cache.
    """
    klen = mlen + qlen
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool, device=device),
                      diagonal=1 + mlen)
    if m > 0:
        mask[:m, mlen:mlen + m] = False
        mask[:m, :mlen] = not read_mem_from_cache
        if has_write:
            mask[-m:, -m:] = False
            mask[-m:, :mlen] = not read_mem_from_cache
    return mask


# --------------------------------------------------------------------------
# modules (names chosen to match the authors' state_dict)


class _Holder(nn.Module):
    """Plain container so that names read word_emb.emb_layers.0.weight etc."""

    def forward(self, *a):  # pragma: no cover
        raise NotImplementedError


class PositionalEmbedding(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        s = torch.outer(pos_seq, self.inv_freq.to(pos_seq.dtype))
        return torch.cat([s.sin(), s.cos()], dim=-1)      # [klen, d_model]


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head, d_model, d_head, dropout, dropatt):
        super().__init__()
        self.n_head, self.d_model, self.d_head = n_head, d_model, d_head
        self.dropout, self.dropatt = dropout, dropatt
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1.0 / math.sqrt(d_head)

    def forward(self, w, pos, r_w_bias, r_r_bias, mask, cache):
        B, q, _ = w.shape
        H, D = self.n_head, self.d_head
        full = w if cache is None else torch.cat([cache, w], dim=1)
        k = full.shape[1]
        heads = self.qkv_net(full)                          # [B, k, 3HD]
        hq, hk, hv = torch.chunk(heads, 3, dim=-1)
        hq = hq[:, k - q:]
        hq = hq.reshape(B, q, H, D).transpose(1, 2)         # [B, H, q, D]
        hk = hk.reshape(B, k, H, D).transpose(1, 2)         # [B, H, k, D]
        hv = hv.reshape(B, k, H, D).transpose(1, 2)
        r = self.r_net(pos).reshape(k, H, D).transpose(0, 1)  # [H, k, D]
        ac = torch.matmul(hq + r_w_bias[None, :, None, :], hk.transpose(-1, -2))
        bd = torch.matmul(hq + r_r_bias[None, :, None, :], r.transpose(-1, -2)[None])
        bd = rel_shift(bd)
        score = (ac + bd) * self.scale                      # [B, H, q, k]
        score = score.masked_fill(mask[None, None], float("-inf"))
        prob = torch.softmax(score, dim=-1)
        prob = F.dropout(prob, self.dropatt, self.training)
        vec = torch.matmul(prob, hv)                        # [B, H, q, D]
        vec = vec.transpose(1, 2).reshape(B, q, H * D)
        out = F.dropout(self.o_net(vec), self.dropout, self.training)
        return self.layer_norm(w + out)


class PositionwiseFF(nn.Module):
    def __init__(self, d_model, d_inner, dropout):
        super().__init__()
        # indices 0 and 3 carry weights, as in the authors' nn.Sequential
        self.CoreNet = nn.Sequential(
            nn.Linear(d_model, d_inner), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(d_inner, d_model), nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x):
        return self.layer_norm(x + self.CoreNet(x))


class DecoderLayer(nn.Module):
    def __init__(self, n_head, d_model, d_head, d_inner, dropout, dropatt):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head,
                                                         dropout, dropatt)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout)

    def forward(self, x, pos, r_w_bias, r_r_bias, mask, cache):
        return self.pos_ff(self.dec_attn(x, pos, r_w_bias, r_r_bias, mask, cache))


class RMTReference(nn.Module):
    def __init__(self, kind, n_token, n_layer, n_head, d_head, d_model, d_inner,
                 mem_len=0, num_mem_tokens=0, read_mem_from_cache=True,
                 dropout=0.0, dropatt=0.0):
        super().__init__()
        assert kind in KINDS, kind
        self.kind = kind
        self.n_token, self.n_layer = n_token, n_layer
        self.n_head, self.d_head = n_head, d_head
        self.d_model, self.d_inner = d_model, d_inner
        self.dropout, self.dropatt = dropout, dropatt
        self.read_mem_from_cache = bool(read_mem_from_cache)
        self.use_cache = kind in ("xl", "xl_rmt")
        self.use_mem = kind in ("rmt", "mt", "xl_rmt")
        self.has_write = kind in ("rmt", "xl_rmt")
        self.mem_len = int(mem_len) if self.use_cache else 0
        self.num_mem_tokens = int(num_mem_tokens) if self.use_mem else 0
        if self.use_cache:
            assert self.mem_len > 0, "xl/xl_rmt need mem_len > 0"
        if self.use_mem:
            assert self.num_mem_tokens > 0, "rmt/mt/xl_rmt need num_mem_tokens > 0"

        self.word_emb = _Holder()
        self.word_emb.emb_layers = nn.ModuleList([nn.Embedding(n_token, d_model)])
        self.crit = _Holder()
        self.crit.out_layers = nn.ModuleList([nn.Linear(d_model, n_token)])
        self.crit.out_layers[0].weight = self.word_emb.emb_layers[0].weight  # tied
        self.pos_emb = PositionalEmbedding(d_model)
        self.r_w_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.r_r_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.layers = nn.ModuleList([
            DecoderLayer(n_head, d_model, d_head, d_inner, dropout, dropatt)
            for _ in range(n_layer)])
        if self.use_mem:
            self.mem_tokens = nn.Parameter(torch.zeros(self.num_mem_tokens, 1, d_model))
        self.init_params()

    # -- construction helpers -------------------------------------------------
    def config(self):
        return dict(kind=self.kind, n_token=self.n_token, n_layer=self.n_layer,
                    n_head=self.n_head, d_head=self.d_head, d_model=self.d_model,
                    d_inner=self.d_inner, mem_len=self.mem_len,
                    num_mem_tokens=self.num_mem_tokens,
                    read_mem_from_cache=self.read_mem_from_cache,
                    dropout=self.dropout, dropatt=self.dropatt)

    @torch.no_grad()
    def init_params(self, gen=None, w_std=0.02, ln_w_std=0.02, bias_std=0.0,
                    uv_std=0.02, mem_std=1.0):
        """docs/paper.md §2 init with the defaults: weights N(0, .02), biases 0, LayerNorm
        weight N(1, .02), bias 0, u, v N(0, .02). The golden driver passes
        larger stds so that the comparison is sensitive."""
        def normal(t, mean, std):
            t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64) * std + mean)

        for name, p in self.named_parameters():
            if name.endswith("layer_norm.weight"):
                normal(p, 1.0, ln_w_std)
            elif name.endswith("layer_norm.bias") or name.endswith(".bias"):
                normal(p, 0.0, bias_std)
            elif name in ("r_w_bias", "r_r_bias"):
                normal(p, 0.0, uv_std)
            elif name == "mem_tokens":
                normal(p, 0.0, mem_std)
            else:
                normal(p, 0.0, w_std)

    def initial_memory(self, B):
        if not self.use_mem:
            return None
        return self.mem_tokens.permute(1, 0, 2).expand(B, -1, -1)   # [B, m, d]

    def empty_cache(self, B):
        if not self.use_cache:
            return None
        p = self.r_w_bias
        return [p.new_zeros(B, 0, self.d_model) for _ in range(self.n_layer)]

    # -- one segment -------------------------------------------------------------
    def segment(self, tok, mem, cache):
        """tok [B, L] int64; mem [B, m, d] or None; cache list of [B, mlen, d]
        or None. Returns logits [B, L, V], next memory, next cache (detached)."""
        B, L = tok.shape
        E = self.word_emb.emb_layers[0].weight
        x = F.embedding(tok, E) * math.sqrt(self.d_model)
        m = 0
        if self.use_mem:
            m = mem.shape[1]
            parts = [mem, x] + ([mem] if self.has_write else [])
            x = torch.cat(parts, dim=1)
        qlen = x.shape[1]
        mlen = cache[0].shape[1] if cache is not None else 0
        klen = mlen + qlen
        mask = build_mask(qlen, mlen, m, self.has_write, self.read_mem_from_cache,
                          device=x.device)
        pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=x.dtype, device=x.device)
        pos = self.pos_emb(pos_seq)
        h = F.dropout(x, self.dropout, self.training)
        pos = F.dropout(pos, self.dropout, self.training)
        hids = []
        for i, layer in enumerate(self.layers):
            hids.append(h)
            h = layer(h, pos, self.r_w_bias, self.r_r_bias, mask,
                      None if cache is None else cache[i])
        h = F.dropout(h, self.dropout, self.training)
        out = self.crit.out_layers[0]
        logits = F.linear(h[:, m:m + L], out.weight, out.bias)
        new_mem = None
        if self.use_mem:
            new_mem = h[:, qlen - m:] if self.has_write else h[:, :m]
        new_cache = None
        if self.use_cache:
            new_cache = []
            for c, hh in zip(cache, hids):
                cat = torch.cat([c, hh], dim=1)
                new_cache.append(cat[:, max(0, cat.shape[1] - self.mem_len):].detach())
        return logits, new_mem, new_cache


# --------------------------------------------------------------------------
# segmentation, loss, BPTT


def segment_lengths(T, N):
    assert 1 <= N <= T, (T, N)
    base, extra = divmod(T, N)
    return [base + 1 if t < extra else base for t in range(N)]


def segment_bounds(T, N):
    out, s = [], 0
    for n in segment_lengths(T, N):
        out.append((s, s + n))
        s += n
    return out


def answer_loss(logits, tgt, A):
    """Mean cross-entropy over batch x the last A positions. logits [B,T,V]."""
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, -A:].reshape(-1, V), tgt[:, -A:].reshape(-1))


def run_segments(model, inp, N, detach_mem=False):
    """Forward over all segments; returns (logits [B,T,V], states) where
    states[t] = (memory, cache) entering segment t (as used)."""
    B, T = inp.shape
    mem, cache = model.initial_memory(B), model.empty_cache(B)
    logits, states = [], []
    for t, (a, b) in enumerate(segment_bounds(T, N)):
        if detach_mem and t > 0 and mem is not None:
            mem = mem.detach()
        states.append((mem, cache))
        lg, mem, cache = model.segment(inp[:, a:b], mem, cache)
        logits.append(lg)
    return torch.cat(logits, dim=1), states


def _collect_grads(model):
    g = {}
    for name, p in model.named_parameters():   # tied embedding listed once
        g[name] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    return g


def grads_unrolled(model, inp, tgt, N, A, detach_mem):
    """bptt all (detach_mem False) or bptt 0 (True): one graph, one backward."""
    model.zero_grad(set_to_none=True)
    logits, _ = run_segments(model, inp, N, detach_mem=detach_mem)
    loss = answer_loss(logits, tgt, A)
    loss.backward()
    return logits.detach(), loss.detach(), _collect_grads(model)


def grads_recompute(model, inp, tgt, N, A, k):
    """bptt k by recomputation: the loss of segment t back-propagates through
    segments max(0,t-k)..t only. For each t, re-run those segments from the
    (detached) memory state of a full forward and sum the gradients. Memory
    entering segment 0 is the mem_tokens parameter itself (not detached), so
    mem_tokens gets gradient exactly from the windows that reach segment 0."""
    B, T = inp.shape
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        logits, states = run_segments(model, inp, N)
        loss = answer_loss(logits, tgt, A)
    bounds = segment_bounds(T, N)
    V = logits.shape[-1]
    for t, (a, b) in enumerate(bounds):
        lo = max(a, T - A)          # positions of segment t inside the answer
        if lo >= b:
            continue
        s = max(0, t - k)
        if s == 0:
            mem = model.initial_memory(B)
        else:
            mem = None if states[s][0] is None else states[s][0].detach()
        for u in range(s, t + 1):
            cache = states[u][1]    # the cache is always detached
            ua, ub = bounds[u]
            lg, mem, _ = model.segment(inp[:, ua:ub], mem, cache)
        ce = F.cross_entropy(lg[:, lo - a:].reshape(-1, V), tgt[:, lo:b].reshape(-1),
                             reduction="sum")
        (ce / (B * A)).backward()
    return logits, loss, _collect_grads(model)


def loss_and_grads(model, inp, tgt, N, A, bptt):
    """bptt: 'all', 0 or an int k > 0 (also accepts the strings)."""
    if isinstance(bptt, str) and bptt != "all":
        bptt = int(bptt)
    if bptt == "all":
        return grads_unrolled(model, inp, tgt, N, A, detach_mem=False)
    if bptt == 0:
        return grads_unrolled(model, inp, tgt, N, A, detach_mem=True)
    return grads_recompute(model, inp, tgt, N, A, int(bptt))


def adam_run(model, inp, tgt, N, A, bptt, steps, lr, clip, grad_log=None, weight_decay=0.0):
    """S x (forward+backward, clip_grad_norm_, Adam step); loss before each update.
    grad_log: optional list that receives each step's (unclipped) gradient dict.
    weight_decay > 0: torch.optim.AdamW with mad-lab's two groups (configure_optimizers: no
    decay where the name holds "bias" or "norm"), fla's A_log (_no_weight_decay) also without."""
    named = list(model.named_parameters())
    params = [p for _, p in named]
    if weight_decay > 0:
        skip = lambda n: "bias" in n or "norm" in n or n.endswith("A_log")
        groups = [{"params": [p for n, p in named if not skip(n)], "weight_decay": weight_decay},
                  {"params": [p for n, p in named if skip(n)], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    else:
        opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    losses, norms = [], []
    for _ in range(steps):
        _, loss, g = loss_and_grads(model, inp, tgt, N, A, bptt)   # leaves p.grad set
        if grad_log is not None:
            grad_log.append(g)
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
        opt.step()
        losses.append(float(loss))
    return losses, norms


# --------------------------------------------------------------------------
# language modelling (docs/paper.md §7)


def lm_window_loss(model, inp, tgt, T, s, k, stored):
    """The forward of one language-model training step on segment s of B streams.

    inp, tgt [B, S*T]: the streams' inputs and next-token targets, segment u
    at columns [u*T, (u+1)*T). stored: dict u -> (memory, cache) entering
    segment u as the step before it handed it on (detached). The step runs
    the window of segments s-w .. s (w = min(k, s) for a model with memory,
    model.use_mem: memory tokens or the delta models' state; else 0) from the
    state entering s-w (the initial one, learned memory included, when
    s-w == 0) and scores every position of segment s only (mean
    cross-entropy). Stores the state entering s+1 (detached). Returns
    (logits [B,T,V], loss) with the graph through the whole window."""
    B = inp.shape[0]
    w = min(k, s) if model.use_mem else 0
    first = s - w
    if first == 0:
        mem, cache = model.initial_memory(B), model.empty_cache(B)
    else:
        mem, cache = stored[first]
    for u in range(first, s + 1):
        lg, mem, cache = model.segment(inp[:, u * T:(u + 1) * T], mem, cache)
    V = lg.shape[-1]
    loss = F.cross_entropy(lg.reshape(-1, V), tgt[:, s * T:(s + 1) * T].reshape(-1))
    stored[s + 1] = (None if mem is None else mem.detach(), cache)
    return lg, loss


def lm_step(model, inp, tgt, T, s, k, stored):
    """One language-model training step (lm_window_loss), back-propagated
    through the whole window. Returns (logits [B,T,V], loss, grads)."""
    model.zero_grad(set_to_none=True)
    lg, loss = lm_window_loss(model, inp, tgt, T, s, k, stored)
    loss.backward()
    return lg.detach(), loss.detach(), _collect_grads(model)


# --------------------------------------------------------------------------
# file formats

_ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "F16": np.float16}


def save_safetensors(path, tensors, metadata=None):
    """tensors: name -> numpy array or torch tensor (written as F32 unless int64/f64 numpy)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().to(torch.float32).numpy()
        a = np.ascontiguousarray(t)
        if a.dtype == np.float32:
            dt = "F32"
        elif a.dtype == np.float64:
            dt = "F64"
        elif a.dtype == np.int64:
            dt = "I64"
        else:
            raise ValueError(f"unsupported dtype {a.dtype} for {name}")
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for d in blobs:
            f.write(d)


def load_safetensors(path):
    """Returns (dict name -> numpy array, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for safetensors")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} past end of file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        dt = np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")
        a, b = info["data_offsets"]
        if not (0 <= a <= b <= len(data)):
            raise ValueError(f"{path}: bad data_offsets for {name}")
        arr = np.frombuffer(data[a:b], dtype=dt).reshape(info["shape"])
        out[name] = arr.astype(dt.newbyteorder("="))
    return out, meta


def save_checkpoint(path, model):
    """rmt checkpoint: every state_dict entry as F32 plus the config metadata."""
    cfg = model.config()
    meta = {k: (("true" if v else "false") if isinstance(v, bool) else v)
            for k, v in cfg.items()}
    save_safetensors(path, {k: v for k, v in model.state_dict().items()}, meta)


def model_from_checkpoint(path, dtype=torch.float64):
    tensors, meta = load_safetensors(path)
    extra = {}
    if meta["kind"] == "armt":
        extra = {"d_mem": int(meta["d_mem"])}
    elif meta["kind"] in DELTA_KINDS:
        extra = {k: int(meta[k]) for k in ("expand_v", "short_conv")}
    model = make_model(
        meta["kind"], int(meta["n_token"]), int(meta["n_layer"]), int(meta["n_head"]),
        int(meta["d_head"]), int(meta["d_model"]), int(meta["d_inner"]),
        mem_len=int(meta.get("mem_len", 0)), num_mem_tokens=int(meta.get("num_mem_tokens", 0)),
        read_mem_from_cache=meta.get("read_mem_from_cache", "true") == "true",
        dropout=float(meta.get("dropout", 0)), dropatt=float(meta.get("dropatt", 0)),
        **extra).to(dtype)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()},
                          strict=True)
    return model

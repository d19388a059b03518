"""Independent PyTorch reference of rmt's delta-rule models: kinds deltanet and gated_deltanet
(docs/deltanet.md, issue 56).

rmt's post-LayerNorm backbone (rmt_reference.py) with the relative attention replaced by the
delta-rule mixer of flash-linear-attention (fla). Per segment, from
x = dropout(E[tok] sqrt(d_model)) (E tied with the output; no positional embedding, no u/v
biases, no memory tokens, no cache), each layer l:

    a  = x + dropout(mixer_l(x))       deltanet_reference.delta_mixer with fla's defaults
    h1 = LayerNorm(a)                  layers.l.attn_layer_norm
    x  = LayerNorm(h1 + FF(h1))        rmt_reference.PositionwiseFF (layers.l.pos_ff)

then logits = dropout(x) E^T + crit.out_layers.0.bias. The mixer's parameters are fla's, under
layers.l.attn. (deltanet_reference.make_params's names); H = n_head, d_k = d_head,
d_v = expand_v d_head, short-convolution width W = short_conv.

The state handed from segment to segment (DeltaState) is every layer's delta state S
[B, H, d_k, d_v] and its three convolution windows (the last W-1 rows of q, k, v before the
convolution), zero before the first segment. rmt_reference's run_segments, grads_unrolled,
grads_recompute and lm_window_loss drive it as they drive RMT's memory: gradients flow through it
across borders (bptt all), it is detached at every border (0), or segment t's loss reaches back
through t-1..t-k (k, by recomputation); the zero state entering segment 0 is a constant.

The delta rule inside the mixer is fla's own naive recurrence (rule "fla", the default:
fla_naive.recurrent_rule, fla-core's delta_rule_recurrence / naive_recurrent_gated_delta_rule,
which compute in float32), or deltanet_reference.delta_rule_recurrent (rule "deltanet_reference",
rmt's float64 restatement). golden_self_test.py checks that the two give the same model. Rule
"fla_chunk": fla's naive chunked form (fla_naive.chunk_rule, naive_chunk_gated_delta_rule; g = 0
for DeltaNet) from the carried state, in chunks of chunk_size rows (0, the default: the largest
divisor of the segment's length up to 64, fla_naive.chunk_size_for): what bench/pytorch_reference.py
times; test_bench_reference.py checks that it gives the recurrent rule's loss and gradients.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import deltanet_reference as D
import fla_naive
import rmt_reference as R

KINDS = D.KINDS
RULES = ("fla", "fla_chunk", "deltanet_reference")


class DeltaState:
    """Per layer, delta_mixer's state: {"S" [B, H, d_k, d_v], "conv_q", "conv_k" [B, W-1, H d_k],
    "conv_v" [B, W-1, H d_v]}."""

    def __init__(self, layers):
        self.layers = [dict(s) for s in layers]

    def detach(self):
        return DeltaState([{n: t.detach() for n, t in s.items()} for s in self.layers])


class DeltaMixer(nn.Module):
    """fla's DeltaNet / Gated DeltaNet layer: its parameters under its names, its forward
    deltanet_reference.delta_mixer's. Registration order = fla's (A_log, dt_bias first)."""

    def __init__(self, kind, d_model, n_head, d_k, d_v, conv):
        super().__init__()
        self.kind = kind
        gated = kind == "gated_deltanet"
        if gated:
            self.A_log = nn.Parameter(torch.zeros(n_head))
            self.dt_bias = nn.Parameter(torch.zeros(n_head))

        def proj(n_out):
            return nn.Linear(d_model, n_out, bias=False)

        def depthwise(c):
            return nn.Conv1d(c, c, conv, groups=c, bias=False)     # weight [c, 1, W]

        self.q_proj, self.k_proj = proj(n_head * d_k), proj(n_head * d_k)
        self.v_proj = proj(n_head * d_v)
        if gated:
            self.a_proj = proj(n_head)
        self.b_proj = proj(n_head)
        if conv:    # model.short_conv 0: none, SiLU alone (delta_mixer reads the absence)
            self.q_conv1d, self.k_conv1d = depthwise(n_head * d_k), depthwise(n_head * d_k)
            self.v_conv1d = depthwise(n_head * d_v)
        if gated:   # fla's use_gate: off for DeltaNet, on for Gated DeltaNet
            self.g_proj = proj(n_head * d_v)
        self.o_norm = R._Holder()
        self.o_norm.weight = nn.Parameter(torch.ones(d_v))
        self.o_proj = nn.Linear(n_head * d_v, d_model, bias=False)

    def forward(self, x, state, rule):
        return D.delta_mixer(x, dict(self.named_parameters()), self.kind, state, form=rule)


class DeltaLayer(nn.Module):
    def __init__(self, kind, n_head, d_model, d_k, d_v, conv, d_inner, dropout):
        super().__init__()
        self.dropout = dropout
        self.attn = DeltaMixer(kind, d_model, n_head, d_k, d_v, conv)
        self.attn_layer_norm = nn.LayerNorm(d_model)
        self.pos_ff = R.PositionwiseFF(d_model, d_inner, dropout)

    def forward(self, x, state, rule):
        y, state = self.attn(x, state, rule)
        h = self.attn_layer_norm(x + F.dropout(y, self.dropout, self.training))
        return self.pos_ff(h), state


class DeltaModelReference(nn.Module):
    use_cache = False
    # Its state is a memory that BPTT reaches back through, like RMT's memory tokens:
    # lm_window_loss re-runs the window of min(k, s) segments before segment s.
    use_mem = True

    def __init__(self, kind, n_token, n_layer, n_head, d_head, d_model, d_inner,
                 mem_len=0, num_mem_tokens=0, read_mem_from_cache=True,
                 dropout=0.0, dropatt=0.0, expand_v=1, short_conv=4, rule="fla", chunk_size=0):
        super().__init__()
        assert kind in KINDS, kind
        assert int(mem_len) == 0 and int(num_mem_tokens) == 0, \
            f"{kind} has neither: mem_len {mem_len}, num_mem_tokens {num_mem_tokens}"
        assert int(expand_v) >= 1 and int(short_conv) >= 0, (expand_v, short_conv)
        assert rule in RULES, f"rule {rule!r}: expected one of {RULES}"
        self.kind, self.rule, self.chunk_size = kind, rule, int(chunk_size)
        self.n_token, self.n_layer = n_token, n_layer
        self.n_head, self.d_head = n_head, d_head
        self.d_model, self.d_inner = d_model, d_inner
        self.dropout, self.dropatt = dropout, dropatt
        self.read_mem_from_cache = bool(read_mem_from_cache)   # only handed on to the metadata
        self.expand_v, self.short_conv = int(expand_v), int(short_conv)
        self.mem_len = self.num_mem_tokens = 0

        self.word_emb = R._Holder()
        self.word_emb.emb_layers = nn.ModuleList([nn.Embedding(n_token, d_model)])
        self.crit = R._Holder()
        self.crit.out_layers = nn.ModuleList([nn.Linear(d_model, n_token)])
        self.crit.out_layers[0].weight = self.word_emb.emb_layers[0].weight  # tied
        self.layers = nn.ModuleList([
            DeltaLayer(kind, n_head, d_model, d_head, self.expand_v * d_head, self.short_conv,
                       d_inner, dropout) for _ in range(n_layer)])
        self.init_params()

    def config(self):
        return dict(kind=self.kind, n_token=self.n_token, n_layer=self.n_layer,
                    n_head=self.n_head, d_head=self.d_head, d_model=self.d_model,
                    d_inner=self.d_inner, mem_len=0, num_mem_tokens=0,
                    read_mem_from_cache=self.read_mem_from_cache,
                    dropout=self.dropout, dropatt=self.dropatt,
                    expand_v=self.expand_v, short_conv=self.short_conv)

    @torch.no_grad()
    def init_params(self, gen=None, w_std=0.02, ln_w_std=0.02, bias_std=0.0, conv_std=None,
                    **_unused):
        """fla's init and rmt's (docs/deltanet.md §5): weights N(0, w_std) (the convolutions'
        N(0, conv_std), default w_std), biases N(0, bias_std), LayerNorm and o_norm weights
        N(1, ln_w_std), A_log and dt_bias drawn as fla does (deltanet_reference.gate_init). The
        golden driver passes larger stds so that the comparison is sensitive. _unused: RMT's
        uv_std, mem_std (no such parameters here)."""
        def normal(t, mean, std):
            t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64) * std + mean)

        conv_std = w_std if conv_std is None else conv_std
        for name, p in self.named_parameters():
            if name.endswith(("attn.A_log", "attn.dt_bias")):
                continue                  # below
            if name.endswith(("layer_norm.weight", "o_norm.weight")):
                normal(p, 1.0, ln_w_std)
            elif name.endswith(".bias"):
                normal(p, 0.0, bias_std)
            elif name.endswith("conv1d.weight"):
                normal(p, 0.0, conv_std)
            else:
                normal(p, 0.0, w_std)
        for layer in self.layers:
            if self.kind == "gated_deltanet":
                A_log, dt_bias = D.gate_init(self.n_head, gen)
                layer.attn.A_log.copy_(A_log)
                layer.attn.dt_bias.copy_(dt_bias)

    def initial_memory(self, B):
        """The zero state entering segment 0 (a constant: no gradient flows out of it)."""
        dt = self.word_emb.emb_layers[0].weight.dtype
        return DeltaState([D.init_state(dict(layer.attn.named_parameters()), self.kind, B, dt)
                           for layer in self.layers])

    def empty_cache(self, B):
        return None

    def segment(self, tok, mem, cache):
        """tok [B, L] int64; mem the DeltaState entering the segment. Returns logits [B, L, V],
        the DeltaState leaving it and no cache."""
        rule = fla_naive.recurrent_rule if self.rule == "fla" else "recurrent"
        if self.rule == "fla_chunk":
            C = self.chunk_size or fla_naive.chunk_size_for(tok.shape[1])

            def rule(q, k, v, beta, g, S):
                return fla_naive.chunk_rule(q, k, v, beta, g, S, chunk_size=C)
        E = self.word_emb.emb_layers[0].weight
        h = F.dropout(F.embedding(tok, E) * math.sqrt(self.d_model), self.dropout, self.training)
        states = []
        for layer, st in zip(self.layers, mem.layers):
            h, st = layer(h, st, rule)
            states.append(st)
        h = F.dropout(h, self.dropout, self.training)
        out = self.crit.out_layers[0]
        return F.linear(h, out.weight, out.bias), DeltaState(states), None

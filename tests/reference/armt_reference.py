"""Independent PyTorch reference of rmt's ARMT (model.kind armt, docs/armt.md).

Written from the equations of docs/armt.md (the authors' AssociativeLayerWrapper,
modeling_amt/language_modeling.py), on rmt_reference.py's Transformer-XL backbone.
Per segment: the token embeddings, then the M memory tokens (the same learned
vectors every segment); a causal mask over all rows. Each layer l:

    read (from the second segment on, every row):
        q = phi(W_mq h);  h <- h + q A_l / (q . z_l + 1e-5)
    layer
    write (from the output h' at the memory rows):
        k = phi(W_mk h'), v = W_mv h', beta = sigmoid(W_mb h')
        vbar = k A_l / (k . z_l + 1e-5), gamma = clip(1 - (k . z_l + 1e-5) / (|k|^2 + 1e-5), 0, 1)
        (first segment: vbar = 0, gamma = 1), gamma without gradient
        A_l <- A_l + sum_j beta_j k_j^T (v_j - vbar_j);  z_l <- z_l + sum_j gamma_j k_j

phi is DPFP with nu = 3. The state handed between segments is an AssocState
(A and z of every layer) or None before the first write; rmt_reference's
run_segments / grads_unrolled / grads_recompute drive it as they drive RMT's memory.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import rmt_reference as R

EPS = 1e-5
NU = 3


def dpfp(x, nu=NU):
    """Deterministic parameter-free projection: [relu(x), relu(-x)] times its rolls 1..nu."""
    xp = torch.cat([F.relu(x), F.relu(-x)], dim=-1)
    return torch.cat([xp * torch.roll(xp, shifts=j, dims=-1) for j in range(1, nu + 1)], dim=-1)


class AssocState:
    """A [B, Dk, d] and z [B, Dk] of every layer."""

    def __init__(self, A, z):
        self.A, self.z = list(A), list(z)

    def detach(self):
        return AssocState([a.detach() for a in self.A], [z.detach() for z in self.z])


class ARMTReference(R.RMTReference):
    def __init__(self, kind, n_token, n_layer, n_head, d_head, d_model, d_inner,
                 mem_len=0, num_mem_tokens=0, read_mem_from_cache=True,
                 dropout=0.0, dropatt=0.0, d_mem=16):
        assert kind == "armt", kind
        # the backbone of a baseline, then the memory tokens and each layer's projections
        super().__init__("baseline", n_token, n_layer, n_head, d_head, d_model, d_inner,
                         dropout=dropout, dropatt=dropatt)
        self.kind = "armt"
        self.num_mem_tokens = int(num_mem_tokens)
        assert self.num_mem_tokens > 0, "armt needs num_mem_tokens > 0"
        self.d_mem = int(d_mem)
        self.d_key = 2 * NU * self.d_mem
        self.mem_tokens = nn.Parameter(torch.zeros(self.num_mem_tokens, 1, d_model))
        for layer in self.layers:
            layer.W_mq = nn.Linear(d_model, self.d_mem, bias=False)
            layer.W_mk = nn.Linear(d_model, self.d_mem, bias=False)
            layer.W_mv = nn.Linear(d_model, d_model, bias=False)
            layer.W_mb = nn.Linear(d_model, 1)
        self.init_params()

    def config(self):
        c = super().config()
        c.update(kind="armt", num_mem_tokens=self.num_mem_tokens, d_mem=self.d_mem)
        return c

    def initial_memory(self, B):
        return None  # nothing written yet: the first segment neither reads nor corrects

    def segment(self, tok, mem, cache):
        """tok [B, L]; mem an AssocState or None. Returns logits [B, L, V], the
        AssocState after the segment's writes, and no cache."""
        B, L = tok.shape
        m = self.num_mem_tokens
        E = self.word_emb.emb_layers[0].weight
        x = F.embedding(tok, E) * math.sqrt(self.d_model)
        x = torch.cat([x, self.mem_tokens.permute(1, 0, 2).expand(B, -1, -1)], dim=1)
        qlen = L + m
        mask = torch.triu(torch.ones(qlen, qlen, dtype=torch.bool, device=x.device), diagonal=1)
        pos_seq = torch.arange(qlen - 1, -1, -1.0, dtype=x.dtype, device=x.device)
        pos = F.dropout(self.pos_emb(pos_seq), self.dropout, self.training)
        h = F.dropout(x, self.dropout, self.training)
        new_A, new_z = [], []
        for i, layer in enumerate(self.layers):
            if mem is not None:  # read
                A, z = mem.A[i], mem.z[i]
                q = dpfp(layer.W_mq(h))                                   # [B, qlen, Dk]
                num = torch.bmm(q, A)                                     # [B, qlen, d]
                den = (q * z[:, None, :]).sum(-1, keepdim=True) + EPS     # [B, qlen, 1]
                h = h + num / den
            h = layer(h, pos, self.r_w_bias, self.r_r_bias, mask, None)
            mrows = h[:, L:]                                              # write
            k = dpfp(layer.W_mk(mrows))                                   # [B, m, Dk]
            v = layer.W_mv(mrows)
            beta = torch.sigmoid(layer.W_mb(mrows))                       # [B, m, 1]
            if mem is None:
                A0 = h.new_zeros(B, self.d_key, self.d_model)
                z0 = h.new_zeros(B, self.d_key)
                vbar, gamma = torch.zeros_like(v), torch.ones_like(beta)
            else:
                A0, z0 = mem.A[i], mem.z[i]
                den = (k * z0[:, None, :]).sum(-1, keepdim=True) + EPS
                vbar = torch.bmm(k, A0) / den
                sq = torch.linalg.vector_norm(k, dim=-1, keepdim=True) ** 2
                gamma = torch.clamp(1 - den / (sq + EPS), 0, 1).detach()
            new_A.append(A0 + torch.bmm((k * beta).transpose(1, 2), v - vbar))
            new_z.append(z0 + (gamma * k).sum(1))
        h = F.dropout(h, self.dropout, self.training)
        out = self.crit.out_layers[0]
        logits = F.linear(h[:, :L], out.weight, out.bias)
        return logits, AssocState(new_A, new_z), None

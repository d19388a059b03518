"""Independent PyTorch reference of the delta-rule mixer: DeltaNet and Gated DeltaNet (issue 56).

Written from the equations of docs/deltanet.md (flash-linear-attention, "fla",
fla/layers/delta_net.py, fla/layers/gated_deltanet.py, fla/ops/*/naive.py); no code of fla's
is here. Meant to run in float64: every function computes in the dtype of its inputs, and
tests/reference/test_deltanet_reference.py calls it with float64 tensors.

Layouts:
  - the delta rule (delta_rule_recurrent, delta_rule_chunked) is head-major, as fla's
    delta_rule_recurrence: q, k [B, H, T, d_k], v [B, H, T, d_v], beta and g [B, H, T],
    the state S [B, H, d_k, d_v] (fla's [.., K, V]; not the V-first layout of fla's Gated
    DeltaNet layer cache);
  - the layer (short_conv, delta_mixer) is batch-major as the model's rows: x [B, T, channels].

The delta rule, per head, from S_0 (zero or the carried state), with g_t = 0 for DeltaNet:

    a_t = exp(g_t)                                    (decay, in (0, 1])
    u_t = beta_t (v_t - a_t S_{t-1}^T k_t)            (the corrected value, d_v)
    S_t = a_t S_{t-1} + k_t u_t^T                     (d_k x d_v)
    o_t = S_t^T (s q_t),   s = d_k^(-1/2) by default  (the row reads the state after its write)

q and k enter as given: the mixer L2-normalises them before (fla does it in its kernels, its naive
functions leave it to the caller, docs/deltanet.md §3).
"""
import math

import torch
import torch.nn.functional as F

KINDS = ("deltanet", "gated_deltanet")
L2_EPS = 1e-6       # fla's l2norm_fwd: x / sqrt(sum x^2 + eps), eps inside the root
NORM_EPS = 1e-5     # the layers' norm_eps default (o_norm); fla's model configs use 1e-6


# --------------------------------------------------------------------------
# the delta rule, recurrent and chunked


def _check_rule_args(q, k, v, beta, g, initial_state):
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    assert k.shape == (B, H, T, dk), f"k {list(k.shape)} != q {list(q.shape)}"
    assert v.shape == (B, H, T, dv), f"v {list(v.shape)}: expected [B, H, T, d_v] = [{B}, {H}, {T}, d_v]"
    assert beta.shape == (B, H, T), f"beta {list(beta.shape)}: expected [B, H, T] = [{B}, {H}, {T}]"
    assert g is None or g.shape == (B, H, T), f"g {list(g.shape)}: expected [B, H, T]"
    assert initial_state is None or initial_state.shape == (B, H, dk, dv), \
        f"initial_state {list(initial_state.shape)}: expected [B, H, d_k, d_v] = [{B}, {H}, {dk}, {dv}]"
    return B, H, T, dk, dv


def delta_rule_recurrent(q, k, v, beta, g=None, initial_state=None, scale=None):
    """The delta rule token by token.

    q, k [B, H, T, d_k]; v [B, H, T, d_v]; beta [B, H, T]; g [B, H, T] the log-decay (Gated
    DeltaNet) or None (DeltaNet: g = 0); initial_state [B, H, d_k, d_v] or None (zero);
    scale: default 1/sqrt(d_k). Returns (o [B, H, T, d_v], S_T [B, H, d_k, d_v]).
    """
    B, H, T, dk, dv = _check_rule_args(q, k, v, beta, g, initial_state)
    s = dk ** -0.5 if scale is None else scale
    S = q.new_zeros(B, H, dk, dv) if initial_state is None else initial_state
    outs = []
    for t in range(T):
        q_t, k_t, v_t = q[:, :, t], k[:, :, t], v[:, :, t]           # [B, H, d]
        b_t = beta[:, :, t, None]                                   # [B, H, 1]
        if g is not None:
            S = torch.exp(g[:, :, t])[:, :, None, None] * S         # a_t S_{t-1}
        read = torch.einsum("bhkv,bhk->bhv", S, k_t)                # (a_t S_{t-1})^T k_t
        u_t = b_t * (v_t - read)                                    # [B, H, d_v]
        S = S + k_t[..., :, None] * u_t[..., None, :]               # + k_t u_t^T
        outs.append(torch.einsum("bhkv,bhk->bhv", S, s * q_t))      # S_t^T (s q_t)
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(B, H, 0, dv)
    return o, S


def delta_rule_chunked(q, k, v, beta, g=None, initial_state=None, scale=None, chunk_size=64):
    """The same function in the chunked WY / UT form (docs/deltanet.md §4).

    Arguments and result as delta_rule_recurrent; T need not be a multiple of chunk_size (the
    last chunk is shorter). Per head and chunk of C rows (K [C, d_k], V [C, d_v], beta, the
    in-chunk cumulative log-decay gam_r = sum_{i<=r} g_i, Gam_rs = exp(gam_r - gam_s) for r >= s
    and 0 above, S the state entering the chunk):

        L  = I + strict_tril(diag(beta) K K^T * Gam)         unit lower triangular, C x C
        W  = L^-1 diag(beta) diag(exp gam) K                  (a triangular solve, not an inverse)
        U  = L^-1 diag(beta) V
        V' = U - W S                                          row r: the corrected value u_r
        O  = s diag(exp gam) Q S + (s Q K^T * Gam * tril) V'
        S' = exp(gam_C) S + (diag(exp(gam_C - gam)) K)^T V'

    With g = None, gam = 0 and Gam = tril(ones): DeltaNet's form.
    """
    B, H, T, dk, dv = _check_rule_args(q, k, v, beta, g, initial_state)
    assert chunk_size >= 1, "chunk_size must be >= 1"
    s = dk ** -0.5 if scale is None else scale
    S = q.new_zeros(B, H, dk, dv) if initial_state is None else initial_state
    outs = []
    for c0 in range(0, T, chunk_size):
        c1 = min(c0 + chunk_size, T)
        C = c1 - c0
        Q, K, V = q[:, :, c0:c1], k[:, :, c0:c1], v[:, :, c0:c1]    # [B, H, C, d]
        b = beta[:, :, c0:c1]                                       # [B, H, C]
        tril = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
        strict = tril.clone().fill_diagonal_(False)
        if g is None:
            gam = q.new_zeros(B, H, C)
        else:
            gam = torch.cumsum(g[:, :, c0:c1], dim=-1)              # [B, H, C]
        # Gam_rs = exp(gam_r - gam_s) on and below the diagonal, 0 above (masked before exp:
        # above the diagonal the difference is positive and could overflow)
        diff = gam[..., :, None] - gam[..., None, :]
        Gam = torch.exp(diff.masked_fill(~tril, -math.inf))         # [B, H, C, C]

        KK = b[..., :, None] * (K @ K.transpose(-1, -2)) * Gam      # diag(beta) K K^T * Gam
        L = torch.eye(C, dtype=q.dtype, device=q.device) + KK.masked_fill(~strict, 0.0)
        rhs_w = (b * torch.exp(gam))[..., None] * K                 # diag(beta) diag(exp gam) K
        rhs_u = b[..., None] * V                                    # diag(beta) V
        W = torch.linalg.solve_triangular(L, rhs_w, upper=False, unitriangular=True)
        U = torch.linalg.solve_triangular(L, rhs_u, upper=False, unitriangular=True)
        Vc = U - W @ S                                              # V' [B, H, C, d_v]

        attn = (s * (Q @ K.transpose(-1, -2)) * Gam).masked_fill(~tril, 0.0)
        O = s * (torch.exp(gam)[..., None] * Q) @ S + attn @ Vc
        outs.append(O)
        gC = gam[..., -1]                                           # [B, H]
        Kd = torch.exp(gC[..., None] - gam)[..., None] * K          # diag(exp(gam_C - gam)) K
        S = torch.exp(gC)[..., None, None] * S + Kd.transpose(-1, -2) @ Vc
    o = torch.cat(outs, dim=2) if outs else v.new_zeros(B, H, 0, dv)
    return o, S


# --------------------------------------------------------------------------
# the layer's pieces


def short_conv(x, weight, state=None, activation=True):
    """Causal depthwise convolution of width W (fla's ShortConvolution without bias), then SiLU.

    x [B, T, C]; weight [C, W] (fla's q_conv1d.weight [C, 1, W] with the 1 dropped); state
    [B, W-1, C]: the last W-1 input rows before x (oldest first), or None (zeros: the start of a
    sequence). Channel c at row t: sum_j weight[c, j] x_{t-W+1+j}[c] (weight[c, W-1] multiplies
    the current row), then silu if activation. Returns (y [B, T, C], new_state [B, W-1, C]):
    the last W-1 rows of [state; x], which continue the convolution into the next segment.
    """
    B, T, C = x.shape
    assert weight.dim() == 2 and weight.shape[0] == C, f"weight {list(weight.shape)}: expected [C={C}, W]"
    Wd = weight.shape[1]
    if state is None:
        state = x.new_zeros(B, Wd - 1, C)
    assert state.shape == (B, Wd - 1, C), f"state {list(state.shape)}: expected [B, W-1, C] = [{B}, {Wd - 1}, {C}]"
    xx = torch.cat([state, x], dim=1)                               # [B, W-1+T, C]
    y = sum(weight[:, j] * xx[:, j:j + T] for j in range(Wd))       # row t of x is row t+W-1 of xx
    if activation:
        y = F.silu(y)
    return y, xx[:, xx.shape[1] - (Wd - 1):]


def l2_norm(x, eps=L2_EPS):
    """fla's l2norm over the last dimension: x / sqrt(sum_i x_i^2 + eps) (eps inside the root)."""
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gate_log_decay(a, A_log, dt_bias):
    """Gated DeltaNet's g = -exp(A_log) * softplus(a + dt_bias): a [..., H], A_log and dt_bias [H]."""
    return -torch.exp(A_log) * F.softplus(a + dt_bias)


def rms_norm(x, weight, eps=NORM_EPS):
    """RMSNorm over the last dimension (d_v of a head): x / sqrt(mean x^2 + eps) * weight."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm_gated(x, gate, weight, eps=NORM_EPS):
    """fla's FusedRMSNormGated (activation swish): rms_norm(x) * weight * silu(gate)."""
    return rms_norm(x, weight, eps) * F.silu(gate)


# --------------------------------------------------------------------------
# the whole mixer over one segment


def mixer_dims(params, kind):
    """(H, d_k, d_v, W) from the parameters' shapes (W = 0: no short convolution)."""
    assert kind in KINDS, f"kind {kind!r}: expected one of {KINDS}"
    H = params["b_proj.weight"].shape[0]
    key_dim = params["q_proj.weight"].shape[0]
    value_dim = params["v_proj.weight"].shape[0]
    assert key_dim % H == 0 and value_dim % H == 0, f"key_dim {key_dim} / value_dim {value_dim} not divisible by H {H}"
    W = params["q_conv1d.weight"].shape[-1] if "q_conv1d.weight" in params else 0
    return H, key_dim // H, value_dim // H, W


def init_state(params, kind, batch, dtype=torch.float64):
    """The state before the first segment: S zero [B, H, d_k, d_v], conv inputs zero [B, W-1, C]."""
    H, dk, dv, W = mixer_dims(params, kind)
    st = {"S": torch.zeros(batch, H, dk, dv, dtype=dtype)}
    if W:
        st["conv_q"] = torch.zeros(batch, W - 1, H * dk, dtype=dtype)
        st["conv_k"] = torch.zeros(batch, W - 1, H * dk, dtype=dtype)
        st["conv_v"] = torch.zeros(batch, W - 1, H * dv, dtype=dtype)
    return st


def gate_init(n_head, generator=None, dtype=torch.float64):
    """fla's draw of Gated DeltaNet's (A_log, dt_bias) [n_head]: A_log = log U(0, 16), dt_bias =
    softplus^-1(dt) with dt log-uniform in [0.001, 0.1] floored at 1e-4."""
    A = torch.rand(n_head, generator=generator, dtype=dtype) * 16
    u = torch.rand(n_head, generator=generator, dtype=dtype)
    dt = torch.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
    return torch.log(A), dt + torch.log(-torch.expm1(-dt))


def make_params(kind, d_model, n_head, d_k, d_v, conv_size=4, use_gate=None, std=0.02,
                generator=None, dtype=torch.float64):
    """Parameters under fla's names and shapes (docs/deltanet.md §5), drawn as fla's models do:
    Linear and Conv1d weights N(0, std), o_norm.weight ones; Gated DeltaNet's A_log and dt_bias
    by gate_init.
    use_gate: default off for DeltaNet, on for Gated DeltaNet (fla's layer defaults)."""
    assert kind in KINDS, f"kind {kind!r}: expected one of {KINDS}"
    if use_gate is None:
        use_gate = kind == "gated_deltanet"
    key_dim, value_dim = n_head * d_k, n_head * d_v

    def normal(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype) * std

    p = {}
    if kind == "gated_deltanet":
        p["A_log"], p["dt_bias"] = gate_init(n_head, generator, dtype)
    p["q_proj.weight"] = normal(key_dim, d_model)
    p["k_proj.weight"] = normal(key_dim, d_model)
    p["v_proj.weight"] = normal(value_dim, d_model)
    if kind == "gated_deltanet":
        p["a_proj.weight"] = normal(n_head, d_model)
    p["b_proj.weight"] = normal(n_head, d_model)
    if conv_size:
        p["q_conv1d.weight"] = normal(key_dim, 1, conv_size)
        p["k_conv1d.weight"] = normal(key_dim, 1, conv_size)
        p["v_conv1d.weight"] = normal(value_dim, 1, conv_size)
    if use_gate:
        p["g_proj.weight"] = normal(value_dim, d_model)
    p["o_norm.weight"] = torch.ones(d_v, dtype=dtype)
    p["o_proj.weight"] = normal(d_model, value_dim)
    return p


def delta_mixer(x, params, kind, state=None, form="recurrent", chunk_size=64, norm_eps=NORM_EPS):
    """One segment of the mixer from a carried state (fla's layer forward, docs/deltanet.md §1-2).

    x [B, T, d_model] (the mixer's input rows); params: fla's names (make_params); kind
    "deltanet" or "gated_deltanet"; state: init_state's dict {"S", "conv_q", "conv_k", "conv_v"}
    or None (a fresh sequence); form "recurrent" or "chunked" (chunk_size), or another
    implementation of the rule, called as form(q, k, v, beta, g, S) -> (o, S_T) with
    delta_rule_recurrent's layouts and scale (fla's, fla_naive.recurrent_rule). The options are
    fla's defaults: SiLU on the convolved q, k, v (DeltaNet's qk_activation silu), L2 norm of q
    and k, beta = sigmoid(b_proj x) (no allow_neg_eigval), one value head per q/k head (no
    GVA), the output RMSNorm per head, gated by silu(g_proj x) where g_proj is given.
    Returns (y [B, T, d_model], new_state).
    """
    H, dk, dv, W = mixer_dims(params, kind)
    B, T, _ = x.shape
    if state is None:
        state = init_state(params, kind, B, x.dtype)
    new_state = {}

    # 1. projections and the short convolutions (with SiLU), or SiLU alone without them
    q, k, v = x @ params["q_proj.weight"].T, x @ params["k_proj.weight"].T, x @ params["v_proj.weight"].T
    if W:
        q, new_state["conv_q"] = short_conv(q, params["q_conv1d.weight"][:, 0], state["conv_q"])
        k, new_state["conv_k"] = short_conv(k, params["k_conv1d.weight"][:, 0], state["conv_k"])
        v, new_state["conv_v"] = short_conv(v, params["v_conv1d.weight"][:, 0], state["conv_v"])
    else:
        q, k, v = F.silu(q), F.silu(k), F.silu(v)

    # 2. heads: [B, T, H*d] -> [B, H, T, d]; L2 norm of q and k per head
    def heads(z, d):
        return z.reshape(B, T, H, d).transpose(1, 2)

    q, k, v = l2_norm(heads(q, dk)), l2_norm(heads(k, dk)), heads(v, dv)

    # 3. beta and (Gated DeltaNet) the log-decay, from the layer's input x
    beta = torch.sigmoid(x @ params["b_proj.weight"].T).transpose(1, 2)        # [B, H, T]
    g = None
    if kind == "gated_deltanet":
        a = x @ params["a_proj.weight"].T                                       # [B, T, H]
        g = gate_log_decay(a, params["A_log"], params["dt_bias"]).transpose(1, 2)

    # 4. the delta rule from the carried S
    if callable(form):
        o, new_state["S"] = form(q, k, v, beta, g, state["S"])
    elif form == "recurrent":
        o, new_state["S"] = delta_rule_recurrent(q, k, v, beta, g, state["S"])
    elif form == "chunked":
        o, new_state["S"] = delta_rule_chunked(q, k, v, beta, g, state["S"], chunk_size=chunk_size)
    else:
        raise ValueError(f"form {form!r}: expected 'recurrent', 'chunked' or a function")

    # 5. output norm (and gate) per head over d_v, heads concatenated, o_proj
    o = o.transpose(1, 2)                                                       # [B, T, H, d_v]
    if "g_proj.weight" in params:
        gate = (x @ params["g_proj.weight"].T).reshape(B, T, H, dv)
        o = rms_norm_gated(o, gate, params["o_norm.weight"], norm_eps)
    else:
        o = rms_norm(o, params["o_norm.weight"], norm_eps)
    y = o.reshape(B, T, H * dv) @ params["o_proj.weight"].T
    return y, new_state

// The Backend's kernels (lib/core/backend.h), each declared once, here. No include guard: this
// file is an X-macro list, included where each row is expanded into something:
//   lib/core/backend.h           the pure virtual declaration in class Backend;
//   lib/core/cpu_backend.h       the CPU backend's override, defined where its body is;
//   lib/core/guarded_backend.cpp the checked forwarder (the buffer extents below, then the CPU's);
//   lib/core/packed_backend.h    the forwarder over the active runs' slices;
//   lib/cuda/driver_backend.h    the call of the CUDA driver of the same name.
// So a new kernel is a row here, its CPU body (CpuBackend::name, in lib/core/cpu_backend.cpp or a
// cpu_*.cpp of its family), its CUDA driver of the same name and arguments after the Exec
// (lib/cuda/kernels.h and its neighbours), and its tests.
//
// A row is
//   RMT_KERNEL(name, (parameters), (arguments), extents)
// the parameters as the declaration has them, the arguments the same names in the same order (the
// forwarders pass them on), and extents a list of
//   RMT_BUF(pointer, bytes)           the buffer a pointer argument must span, or
//   RMT_OPTIONAL_BUF(pointer, bytes)  the same for one that may be null,
// one for every pointer argument, in bytes: floats(n), int32s(n), doubles(n) and bytes(n) for n
// elements (n <= 0: nothing), strided(rows, cols, ld) for a row-major matrix of row stride ld.
// cpu-guarded checks every call against them (a buffer of the wrong backend or too small is an
// internal error there, not memory silently read past on a device).
//
// What reads back to the host or moves memory (allocate, fill, the copies, sum_squares) is
// declared by hand in backend.h: each wrapper treats the host side in its own way.
//
// Conventions: every kernel works on raw contiguous fp32 buffers with explicit sizes, all
// matrices row-major. "accumulate" kernels add into their outputs (gradients of shared
// parameters); everything else overwrites. Results are bit-identical for a fixed thread count (no
// atomics, fixed reduction order).

// C[M,N] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T. A is [M,K] (or [K,M] when
// trans_a), B is [K,N] (or [N,K] when trans_b). beta = 0 ignores C's old contents.
RMT_KERNEL(matmul,
           (float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
            bool trans_b, float alpha = 1.f, float beta = 0.f),
           (C, A, B, M, N, K, trans_a, trans_b, alpha, beta),
           RMT_BUF(C, floats(int64_t(M) * N)) RMT_BUF(A, floats(int64_t(M) * K))
           RMT_BUF(B, floats(int64_t(K) * N)))
// The same with explicit row strides ldc, lda, ldb (each at least its matrix's row length):
// products of column blocks, e.g. the key/value columns of the qkv projection.
RMT_KERNEL(matmul_strided,
           (float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
            int K, bool trans_a, bool trans_b, float alpha = 1.f, float beta = 0.f),
           (C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta),
           RMT_BUF(C, strided(M, N, ldc))
           RMT_BUF(A, trans_a ? strided(K, M, lda) : strided(M, K, lda))
           RMT_BUF(B, trans_b ? strided(N, K, ldb) : strided(K, N, ldb)))

// x[rows, cols] += bias[cols] broadcast over rows.
RMT_KERNEL(add_bias, (float* x, const float* bias, int rows, int cols), (x, bias, rows, cols),
           RMT_BUF(x, floats(int64_t(rows) * cols)) RMT_BUF(bias, floats(cols)))
// dbias[cols] += sum over rows of dy[rows, cols]   (accumulate)
RMT_KERNEL(bias_backward, (float* dbias, const float* dy, int rows, int cols),
           (dbias, dy, rows, cols),
           RMT_BUF(dbias, floats(cols)) RMT_BUF(dy, floats(int64_t(rows) * cols)))

// out[n, d] = table[ids[n], :] * scale
// (The table's rows are not an argument: only one row of it is checked.)
RMT_KERNEL(embedding_forward,
           (float* out, const int32_t* ids, const float* table, int n, int d, float scale),
           (out, ids, table, n, d, scale),
           RMT_BUF(out, floats(int64_t(n) * d)) RMT_BUF(ids, int32s(n)) RMT_BUF(table, floats(d)))
// dtable[ids[n], :] += dout[n, :] * scale   (accumulate; rows with repeated ids add up)
RMT_KERNEL(embedding_backward,
           (float* dtable, const float* dout, const int32_t* ids, int n, int d, float scale),
           (dtable, dout, ids, n, d, scale),
           RMT_BUF(dtable, floats(d)) RMT_BUF(dout, floats(int64_t(n) * d))
           RMT_BUF(ids, int32s(n)))

// x[rows, cols] = max(x + bias[cols], 0): add_bias, then relu_forward in place, in one pass
// (the feed-forward's first layer; fewer launches on a device).
RMT_KERNEL(add_bias_relu, (float* x, const float* bias, int rows, int cols),
           (x, bias, rows, cols),
           RMT_BUF(x, floats(int64_t(rows) * cols)) RMT_BUF(bias, floats(cols)))

// The residual connection and the LayerNorm after it in one pass: x[n, d] = (x + bias_x) +
// residual, in that order (bias_x [d] broadcast over rows; null: x + residual), kept in x (the
// LayerNorm's backward reads it); then layernorm_forward(out, mean, rstd, x, weight, bias, n,
// d). The same bits as add_bias, add_inplace and layernorm_forward called in turn. out may be
// residual (each row is summed before it is written).
RMT_KERNEL(add_layernorm_forward,
           (float* out, float* mean, float* rstd, float* x, const float* bias_x,
            const float* residual, const float* weight, const float* bias, int n, int d),
           (out, mean, rstd, x, bias_x, residual, weight, bias, n, d),
           RMT_BUF(out, floats(int64_t(n) * d)) RMT_BUF(mean, floats(n)) RMT_BUF(rstd, floats(n))
           RMT_BUF(x, floats(int64_t(n) * d)) RMT_OPTIONAL_BUF(bias_x, floats(d))
           RMT_BUF(residual, floats(int64_t(n) * d)) RMT_BUF(weight, floats(d))
           RMT_BUF(bias, floats(d)))

// Post-LN LayerNorm over the last dim (eps 1e-5, biased variance, as torch.nn.LayerNorm).
// Saves mean[n] and rstd[n] for backward.
RMT_KERNEL(layernorm_forward,
           (float* out, float* mean, float* rstd, const float* x, const float* weight,
            const float* bias, int n, int d),
           (out, mean, rstd, x, weight, bias, n, d),
           RMT_BUF(out, floats(int64_t(n) * d)) RMT_BUF(mean, floats(n)) RMT_BUF(rstd, floats(n))
           RMT_BUF(x, floats(int64_t(n) * d)) RMT_BUF(weight, floats(d)) RMT_BUF(bias, floats(d)))
// dx = overwrite; dweight, dbias accumulate.
RMT_KERNEL(layernorm_backward,
           (float* dx, float* dweight, float* dbias, const float* dout, const float* x,
            const float* mean, const float* rstd, const float* weight, int n, int d),
           (dx, dweight, dbias, dout, x, mean, rstd, weight, n, d),
           RMT_BUF(dx, floats(int64_t(n) * d)) RMT_BUF(dweight, floats(d))
           RMT_BUF(dbias, floats(d)) RMT_BUF(dout, floats(int64_t(n) * d))
           RMT_BUF(x, floats(int64_t(n) * d)) RMT_BUF(mean, floats(n)) RMT_BUF(rstd, floats(n))
           RMT_BUF(weight, floats(d)))

// out = max(x, 0) (out may alias x); dx = dout * (y > 0) where y is the ReLU output
// (dx may alias dout).
RMT_KERNEL(relu_forward, (float* out, const float* x, int64_t n), (out, x, n),
           RMT_BUF(out, floats(n)) RMT_BUF(x, floats(n)))
RMT_KERNEL(relu_backward, (float* dx, const float* dout, const float* y, int64_t n),
           (dx, dout, y, n),
           RMT_BUF(dx, floats(n)) RMT_BUF(dout, floats(n)) RMT_BUF(y, floats(n)))

// Inverted dropout: keep[i] = 1 with probability 1-p, out[i] = x[i] * keep[i] / (1-p) (out may
// be x). The mask is a pure function of (dropout_key(*seed.word, seed.tag, seed.layer), i), so
// results do not depend on the thread count; *seed.word is read when the call runs (DropoutSeed).
RMT_KERNEL(dropout_forward,
           (float* out, const float* x, uint8_t* keep, int64_t n, float p, DropoutSeed seed),
           (out, x, keep, n, p, seed),
           RMT_BUF(out, floats(n)) RMT_BUF(x, floats(n)) RMT_BUF(keep, bytes(n))
           RMT_BUF(seed.word, p > 0 ? bytes(sizeof(uint64_t)) : 0))
// dx[i] = dout[i] * keep[i] / (1-p) (dx may be dout).
RMT_KERNEL(dropout_backward,
           (float* dx, const float* dout, const uint8_t* keep, int64_t n, float p),
           (dx, dout, keep, n, p),
           RMT_BUF(dx, floats(n)) RMT_BUF(dout, floats(n)) RMT_BUF(keep, bytes(n)))

// Sinusoid relative position embedding, pos_seq = klen-1 .. 0:
// out[j, :] = [sin(p_j f_0..f_{d/2-1}), cos(p_j f_0..)] with p_j = klen-1-j,
// f_i = 1 / 10000^(2i/d). d is even.
RMT_KERNEL(positional_embedding, (float* out, int klen, int d), (out, klen, d),
           RMT_BUF(out, floats(int64_t(klen) * d)))

// Relative multi-head attention core (after the q/k/v and r projections).
//   qkv  [klen, B, 3*H*Dh]  q|k|v column blocks; the query of row t is taken from row
//                           mlen + t (cached rows give only keys and values). Only its first
//                           klen rows are read: incremental decoding attends over a prefix.
//   r    [klen, H*Dh]       r_net(pos_emb), row j = relative distance klen-1-j
//   u, v [H, Dh]            r_w_bias and r_r_bias
//   mask [qlen, klen]       1 = blocked; every row must keep at least one key
//   prob [B, H, qlen, klen] saved softmax probabilities
//   out  [qlen, B, H*Dh]
// score[i,j] = scale * ((q_i + u).k_j + rel_shift((q + v) r^T)[i,j]), with rel_shift exactly
// as Transformer-XL's _rel_shift (pad a zero column, reshape, drop a row): for j <= i+mlen
// it is row i, column j+qlen-1-i of the unshifted matrix; for j == i+mlen+1 it is 0; for
// j > i+mlen+1 it is row i+1, column j-i-mlen-2 (masked in plain causal use, seen by RMT's
// memory rows).
RMT_KERNEL(rel_attention_forward,
           (float* out, float* prob, const float* qkv, const float* r, const float* u,
            const float* v, const uint8_t* mask, const AttentionShape& s, float scale),
           (out, prob, qkv, r, u, v, mask, s, scale),
           RMT_BUF(out, floats(int64_t(s.qlen) * s.B * s.H * s.Dh))
           RMT_BUF(prob, floats(int64_t(s.B) * s.H * s.qlen * s.klen))
           RMT_BUF(qkv, floats(int64_t(s.klen) * s.B * 3 * s.H * s.Dh))
           RMT_BUF(r, floats(int64_t(s.klen) * s.H * s.Dh)) RMT_BUF(u, floats(int64_t(s.H) * s.Dh))
           RMT_BUF(v, floats(int64_t(s.H) * s.Dh)) RMT_BUF(mask, bytes(int64_t(s.qlen) * s.klen)))
// dqkv [klen, B, 3*H*Dh] overwrite (all klen rows: cached rows get key/value gradients too);
// dr, du, dv accumulate.
RMT_KERNEL(rel_attention_backward,
           (float* dqkv, float* dr, float* du, float* dv, const float* dout, const float* prob,
            const float* qkv, const float* r, const float* u, const float* v,
            const AttentionShape& s, float scale),
           (dqkv, dr, du, dv, dout, prob, qkv, r, u, v, s, scale),
           RMT_BUF(dqkv, floats(int64_t(s.klen) * s.B * 3 * s.H * s.Dh))
           RMT_BUF(dr, floats(int64_t(s.klen) * s.H * s.Dh))
           RMT_BUF(du, floats(int64_t(s.H) * s.Dh)) RMT_BUF(dv, floats(int64_t(s.H) * s.Dh))
           RMT_BUF(dout, floats(int64_t(s.qlen) * s.B * s.H * s.Dh))
           RMT_BUF(prob, floats(int64_t(s.B) * s.H * s.qlen * s.klen))
           RMT_BUF(qkv, floats(int64_t(s.klen) * s.B * 3 * s.H * s.Dh))
           RMT_BUF(r, floats(int64_t(s.klen) * s.H * s.Dh)) RMT_BUF(u, floats(int64_t(s.H) * s.Dh))
           RMT_BUF(v, floats(int64_t(s.H) * s.Dh)))

// out[i, b, :] = x[i, :] for b < B: rows [rows, width] broadcast over the batch into a
// time-major [rows, B, width] buffer (the learned memory entering the first segment).
RMT_KERNEL(broadcast_batch, (float* out, const float* x, int rows, int B, int width),
           (out, x, rows, B, width),
           RMT_BUF(out, floats(int64_t(rows) * B * width))
           RMT_BUF(x, floats(int64_t(rows) * width)))
// dx[i, :] += dout[i, b, :] for b = 0, 1, .., B-1 in that order   (accumulate)
RMT_KERNEL(broadcast_batch_backward, (float* dx, const float* dout, int rows, int B, int width),
           (dx, dout, rows, B, width),
           RMT_BUF(dx, floats(int64_t(rows) * width))
           RMT_BUF(dout, floats(int64_t(rows) * B * width)))

// Softmax cross-entropy over rows of logits [n, V]. loss[i] = -log softmax(logits_i)[t_i];
// dlogits[i] = (softmax(logits_i) - onehot(t_i)) * grad_scale. dlogits may be null
// (evaluation). Rows with target < 0 are ignored: loss 0, zero gradient.
RMT_KERNEL(cross_entropy,
           (float* loss, float* dlogits, const float* logits, const int32_t* targets, int n, int V,
            float grad_scale),
           (loss, dlogits, logits, targets, n, V, grad_scale),
           RMT_BUF(loss, floats(n)) RMT_OPTIONAL_BUF(dlogits, floats(int64_t(n) * V))
           RMT_BUF(logits, floats(int64_t(n) * V)) RMT_BUF(targets, int32s(n)))

// *out = sum_squares(x, n), left in this backend's memory (out: one double of it), so that a
// training step reads it with its loss in one download (lib/run/train_step.cpp).
RMT_KERNEL(sum_squares_to, (double* out, const float* x, int64_t n), (out, x, n),
           RMT_BUF(out, doubles(1)) RMT_BUF(x, floats(n)))
// *acc += x[0] + .. + x[n-1] in double (acc: one double of this backend's memory; the loss sum).
// The CPU adds in index order; a device backend adds the block's fixed tree to *acc.
RMT_KERNEL(accumulate_sum, (double* acc, const float* x, int64_t n), (acc, x, n),
           RMT_BUF(acc, doubles(1)) RMT_BUF(x, floats(n)))
// x *= alpha
RMT_KERNEL(scale, (float* x, int64_t n, float alpha), (x, n, alpha), RMT_BUF(x, floats(n)))
// y += x (residual connections)
RMT_KERNEL(add_inplace, (float* y, const float* x, int64_t n), (y, x, n),
           RMT_BUF(y, floats(n)) RMT_BUF(x, floats(n)))
// Adam (torch.optim.Adam, no weight decay), step t >= 1:
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
RMT_KERNEL(adam_update,
           (float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
            float beta2, float eps, int64_t t),
           (param, grad, m, v, n, lr, beta1, beta2, eps, t),
           RMT_BUF(param, floats(n)) RMT_BUF(grad, floats(n)) RMT_BUF(m, floats(n))
           RMT_BUF(v, floats(n)))

// ---- ARMT's associative memory (docs/armt.md; per-item arithmetic: lib/core/assoc_math.h).
// Per sample b a matrix A_b [Dk, d] and a normaliser z_b [Dk]: A is [B, Dk, d], z [B, Dk],
// Dk = 6 dm. Row buffers are time-major: row r of sample b is buffer row r*B + b ("rb").

// DPFP with nu = 3 over the rows of x [n, dm] (the authors' feature map, unnormalised):
// x' = [relu(x); relu(-x)] (2dm), out[n, 6dm] with out[j*2dm + i] = x'[i] x'[(i-j-1) mod 2dm].
RMT_KERNEL(dpfp_forward, (float* out, const float* x, int64_t n, int dm), (out, x, n, dm),
           RMT_BUF(out, floats(n * 6 * dm)) RMT_BUF(x, floats(n * dm)))
// dx [n, dm] overwrite (x' at 0 passes no gradient, as torch's relu).
RMT_KERNEL(dpfp_backward, (float* dx, const float* dout, const float* x, int64_t n, int dm),
           (dx, dout, x, n, dm),
           RMT_BUF(dx, floats(n * dm)) RMT_BUF(dout, floats(n * 6 * dm)) RMT_BUF(x, floats(n * dm)))
// The read of rows phi [rows, B, Dk] (features of queries or keys):
//   den[rb] = phi[rb] . z_b + eps;  out[rb, :] = phi[rb] A_b / den[rb]   (overwrite both)
RMT_KERNEL(assoc_read_forward,
           (float* out, float* den, const float* phi, const float* A, const float* z, int rows,
            int B, int Dk, int d, float eps),
           (out, den, phi, A, z, rows, B, Dk, d, eps),
           RMT_BUF(out, floats(int64_t(rows) * B * d)) RMT_BUF(den, floats(int64_t(rows) * B))
           RMT_BUF(phi, floats(int64_t(rows) * B * Dk)) RMT_BUF(A, floats(int64_t(B) * Dk * d))
           RMT_BUF(z, floats(int64_t(B) * Dk)))
// Its backward from dout [rows, B, d] and the forward's out and den:
// dphi [rows, B, Dk], dA [B, Dk, d] and dz [B, Dk] all accumulate.
RMT_KERNEL(assoc_read_backward,
           (float* dphi, float* dA, float* dz, const float* dout, const float* out,
            const float* den, const float* phi, const float* A, const float* z, int rows, int B,
            int Dk, int d),
           (dphi, dA, dz, dout, out, den, phi, A, z, rows, B, Dk, d),
           RMT_BUF(dphi, floats(int64_t(rows) * B * Dk)) RMT_BUF(dA, floats(int64_t(B) * Dk * d))
           RMT_BUF(dz, floats(int64_t(B) * Dk)) RMT_BUF(dout, floats(int64_t(rows) * B * d))
           RMT_BUF(out, floats(int64_t(rows) * B * d)) RMT_BUF(den, floats(int64_t(rows) * B))
           RMT_BUF(phi, floats(int64_t(rows) * B * Dk)) RMT_BUF(A, floats(int64_t(B) * Dk * d))
           RMT_BUF(z, floats(int64_t(B) * Dk)))
// The delta-rule write of m memory rows per sample: key [m, B, Dk], v and vbar [m, B, d],
// den [m*B] (vbar's denominators), blogit [m*B] (beta = sigmoid(blogit)):
//   A_out[b] = A_in[b] + sum_j beta_j key_j^T (v_j - vbar_j)
//   z_out[b] = z_in[b] + sum_j gamma_j key_j,  gamma_j = clip(1 - den_j / (|key_j|^2 + eps), 0, 1)
// A_in, z_in, vbar and den null: the first write (A = 0, z = 0, vbar = 0, gamma = 1).
// A_out, z_out overwrite (they must not alias A_in, z_in).
RMT_KERNEL(assoc_write_forward,
           (float* A_out, float* z_out, const float* A_in, const float* z_in, const float* key,
            const float* v, const float* vbar, const float* den, const float* blogit, int m, int B,
            int Dk, int d, float eps),
           (A_out, z_out, A_in, z_in, key, v, vbar, den, blogit, m, B, Dk, d, eps),
           RMT_BUF(A_out, floats(int64_t(B) * Dk * d)) RMT_BUF(z_out, floats(int64_t(B) * Dk))
           RMT_OPTIONAL_BUF(A_in, floats(int64_t(B) * Dk * d))
           RMT_OPTIONAL_BUF(z_in, floats(int64_t(B) * Dk))
           RMT_BUF(key, floats(int64_t(m) * B * Dk)) RMT_BUF(v, floats(int64_t(m) * B * d))
           RMT_OPTIONAL_BUF(vbar, floats(int64_t(m) * B * d))
           RMT_OPTIONAL_BUF(den, floats(int64_t(m) * B)) RMT_BUF(blogit, floats(int64_t(m) * B)))
// Its backward from dA_out, dz_out (gamma has no gradient): dkey [m, B, Dk], dv [m, B, d] and
// dblogit [m*B] overwrite. The gradient of vbar is -dv; those of A_in and z_in are dA_out and
// dz_out unchanged (the caller adds them).
RMT_KERNEL(assoc_write_backward,
           (float* dkey, float* dv, float* dblogit, const float* dA_out, const float* dz_out,
            const float* key, const float* v, const float* vbar, const float* den,
            const float* blogit, int m, int B, int Dk, int d, float eps),
           (dkey, dv, dblogit, dA_out, dz_out, key, v, vbar, den, blogit, m, B, Dk, d, eps),
           RMT_BUF(dkey, floats(int64_t(m) * B * Dk)) RMT_BUF(dv, floats(int64_t(m) * B * d))
           RMT_BUF(dblogit, floats(int64_t(m) * B)) RMT_BUF(dA_out, floats(int64_t(B) * Dk * d))
           RMT_BUF(dz_out, floats(int64_t(B) * Dk)) RMT_BUF(key, floats(int64_t(m) * B * Dk))
           RMT_BUF(v, floats(int64_t(m) * B * d)) RMT_OPTIONAL_BUF(vbar, floats(int64_t(m) * B * d))
           RMT_OPTIONAL_BUF(den, floats(int64_t(m) * B)) RMT_BUF(blogit, floats(int64_t(m) * B)))

// The delta rule of DeltaNet and Gated DeltaNet, token by token (lib/core/delta_math.h gives the
// equations; shapes DeltaShape, lib/core/backend.h): per head the state S_t = a_t S_{t-1} +
// k_t (beta_t (v_t - a_t S_{t-1}^T k_t))^T, a_t = exp(g_t) (g null: 1, DeltaNet), and
// o_t = scale S_t^T q_t. S_in null: S_0 = 0. S_out gets S_T; S_chunks (null in evaluation) the
// state entering every chunk of s.chunk rows, for the backward. s.wy: the chunked form
// (lib/core/delta_wy.h), work its s.heads() * s.forward_work_per_head() floats (else null).
RMT_KERNEL(delta_rule_forward,
           (float* o, float* S_out, float* S_chunks, float* work, const float* q, const float* k,
            const float* v, const float* beta, const float* g, const float* S_in,
            const DeltaShape& s, float scale),
           (o, S_out, S_chunks, work, q, k, v, beta, g, S_in, s, scale),
           RMT_BUF(o, floats(int64_t(s.T) * s.heads() * s.Dv))
           RMT_BUF(S_out, floats(s.heads() * s.state()))
           RMT_OPTIONAL_BUF(S_chunks, floats(s.chunks() * s.heads() * s.state()))
           RMT_OPTIONAL_BUF(work, floats(s.heads() * s.forward_work_per_head()))
           RMT_BUF(q, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(k, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(v, floats(int64_t(s.T) * s.heads() * s.Dv))
           RMT_BUF(beta, floats(int64_t(s.T) * s.heads()))
           RMT_OPTIONAL_BUF(g, floats(int64_t(s.T) * s.heads()))
           RMT_OPTIONAL_BUF(S_in, floats(s.heads() * s.state())))
// Its backward from dout [T, B, H, Dv] and dS_out (the gradient w.r.t. S_T; null: zero), the
// chunks' states recomputed from S_chunks: dq, dk, dv, dbeta, dg (with g) and dS_in (the
// gradient w.r.t. S_in) overwrite; work: s.heads() * s.work_per_head() floats of scratch.
RMT_KERNEL(delta_rule_backward,
           (float* dq, float* dk, float* dv, float* dbeta, float* dg, float* dS_in, float* work,
            const float* dout, const float* dS_out, const float* q, const float* k,
            const float* v, const float* beta, const float* g, const float* S_chunks,
            const DeltaShape& s, float scale),
           (dq, dk, dv, dbeta, dg, dS_in, work, dout, dS_out, q, k, v, beta, g, S_chunks, s,
            scale),
           RMT_BUF(dq, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(dk, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(dv, floats(int64_t(s.T) * s.heads() * s.Dv))
           RMT_BUF(dbeta, floats(int64_t(s.T) * s.heads()))
           RMT_OPTIONAL_BUF(dg, floats(int64_t(s.T) * s.heads()))
           RMT_BUF(dS_in, floats(s.heads() * s.state()))
           RMT_BUF(work, floats(s.heads() * s.work_per_head()))
           RMT_BUF(dout, floats(int64_t(s.T) * s.heads() * s.Dv))
           RMT_OPTIONAL_BUF(dS_out, floats(s.heads() * s.state()))
           RMT_BUF(q, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(k, floats(int64_t(s.T) * s.heads() * s.Dk))
           RMT_BUF(v, floats(int64_t(s.T) * s.heads() * s.Dv))
           RMT_BUF(beta, floats(int64_t(s.T) * s.heads()))
           RMT_OPTIONAL_BUF(g, floats(int64_t(s.T) * s.heads()))
           RMT_BUF(S_chunks, floats(s.chunks() * s.heads() * s.state())))

// The delta mixer's short convolution (ConvShape, lib/core/backend.h; lib/core/delta_math.h): y
// [T, B, C] = silu(causal depthwise conv of [state_in; x] with w [C, W]) (silu false: without it);
// state_in [W-1, B, C] may be null (zeros); state_out [W-1, B, C] gets the last W-1 rows of
// [state_in; x], the next segment's state_in.
RMT_KERNEL(short_conv_forward,
           (float* y, float* state_out, const float* x, const float* w, const float* state_in,
            const ConvShape& s, bool silu),
           (y, state_out, x, w, state_in, s, silu),
           RMT_BUF(y, floats(int64_t(s.T) * s.row()))
           RMT_OPTIONAL_BUF(state_out, floats(int64_t(s.W - 1) * s.row()))
           RMT_BUF(x, floats(int64_t(s.T) * s.row())) RMT_BUF(w, floats(int64_t(s.C) * s.W))
           RMT_OPTIONAL_BUF(state_in, floats(int64_t(s.W - 1) * s.row())))
// Its backward from dy and dstate_out (null: zero): dx and dstate_in (null: not wanted)
// overwrite, dw accumulates. The pre-activation is recomputed from x, w and state_in.
RMT_KERNEL(short_conv_backward,
           (float* dx, float* dw, float* dstate_in, const float* dy, const float* dstate_out,
            const float* x, const float* w, const float* state_in, const ConvShape& s, bool silu),
           (dx, dw, dstate_in, dy, dstate_out, x, w, state_in, s, silu),
           RMT_BUF(dx, floats(int64_t(s.T) * s.row())) RMT_BUF(dw, floats(int64_t(s.C) * s.W))
           RMT_OPTIONAL_BUF(dstate_in, floats(int64_t(s.W - 1) * s.row()))
           RMT_BUF(dy, floats(int64_t(s.T) * s.row()))
           RMT_OPTIONAL_BUF(dstate_out, floats(int64_t(s.W - 1) * s.row()))
           RMT_BUF(x, floats(int64_t(s.T) * s.row())) RMT_BUF(w, floats(int64_t(s.C) * s.W))
           RMT_OPTIONAL_BUF(state_in, floats(int64_t(s.W - 1) * s.row())))

// The delta mixer's per-row pieces (lib/core/delta_math.h). l2norm over rows of D (a head's q or
// k): y = x / sqrt(sum x^2 + eps), rstd [rows] saved; its backward dx overwrites.
RMT_KERNEL(l2norm_forward, (float* y, float* rstd, const float* x, int64_t rows, int D, float eps),
           (y, rstd, x, rows, D, eps),
           RMT_BUF(y, floats(rows * D)) RMT_BUF(rstd, floats(rows)) RMT_BUF(x, floats(rows * D)))
RMT_KERNEL(l2norm_backward,
           (float* dx, const float* dy, const float* y, const float* rstd, int64_t rows, int D),
           (dx, dy, y, rstd, rows, D),
           RMT_BUF(dx, floats(rows * D)) RMT_BUF(dy, floats(rows * D)) RMT_BUF(y, floats(rows * D))
           RMT_BUF(rstd, floats(rows)))
// The output norm over rows of D (a head's values): y = x / sqrt(mean x^2 + eps) * w [D], times
// silu(gate) [rows, D] when gate is not null (fla's FusedRMSNormGated); rstd [rows] saved. Its
// backward: dx and dgate (with a gate) overwrite, dw accumulates.
RMT_KERNEL(rms_norm_gated_forward,
           (float* y, float* rstd, const float* x, const float* w, const float* gate, int64_t rows,
            int D, float eps),
           (y, rstd, x, w, gate, rows, D, eps),
           RMT_BUF(y, floats(rows * D)) RMT_BUF(rstd, floats(rows)) RMT_BUF(x, floats(rows * D))
           RMT_BUF(w, floats(D)) RMT_OPTIONAL_BUF(gate, floats(rows * D)))
RMT_KERNEL(rms_norm_gated_backward,
           (float* dx, float* dw, float* dgate, const float* dy, const float* x, const float* rstd,
            const float* w, const float* gate, int64_t rows, int D),
           (dx, dw, dgate, dy, x, rstd, w, gate, rows, D),
           RMT_BUF(dx, floats(rows * D)) RMT_BUF(dw, floats(D))
           RMT_OPTIONAL_BUF(dgate, gate ? floats(rows * D) : 0) RMT_BUF(dy, floats(rows * D))
           RMT_BUF(x, floats(rows * D)) RMT_BUF(rstd, floats(rows)) RMT_BUF(w, floats(D))
           RMT_OPTIONAL_BUF(gate, floats(rows * D)))
// The write strength and the decay of rows [rows, H]: beta = sigmoid(b); with a (Gated DeltaNet)
// g = -exp(A_log[h]) softplus(a + dt_bias[h]) (softplus as torch's, linear above 20); a, g,
// A_log and dt_bias null for DeltaNet. Its backward: db (and da) overwrite, dA_log and dt_bias's
// gradient [H] accumulate over the rows in order.
RMT_KERNEL(delta_gates_forward,
           (float* beta, float* g, const float* b, const float* a, const float* A_log,
            const float* dt_bias, int64_t rows, int H),
           (beta, g, b, a, A_log, dt_bias, rows, H),
           RMT_BUF(beta, floats(rows * H)) RMT_OPTIONAL_BUF(g, floats(rows * H))
           RMT_BUF(b, floats(rows * H)) RMT_OPTIONAL_BUF(a, floats(rows * H))
           RMT_OPTIONAL_BUF(A_log, floats(H)) RMT_OPTIONAL_BUF(dt_bias, floats(H)))
RMT_KERNEL(delta_gates_backward,
           (float* db, float* da, float* dA_log, float* ddt_bias, const float* dbeta,
            const float* dg, const float* beta, const float* g, const float* a, const float* A_log,
            const float* dt_bias, int64_t rows, int H),
           (db, da, dA_log, ddt_bias, dbeta, dg, beta, g, a, A_log, dt_bias, rows, H),
           RMT_BUF(db, floats(rows * H)) RMT_OPTIONAL_BUF(da, floats(rows * H))
           RMT_OPTIONAL_BUF(dA_log, floats(H)) RMT_OPTIONAL_BUF(ddt_bias, floats(H))
           RMT_BUF(dbeta, floats(rows * H)) RMT_OPTIONAL_BUF(dg, floats(rows * H))
           RMT_BUF(beta, floats(rows * H)) RMT_OPTIONAL_BUF(g, floats(rows * H))
           RMT_OPTIONAL_BUF(a, floats(rows * H)) RMT_OPTIONAL_BUF(A_log, floats(H))
           RMT_OPTIONAL_BUF(dt_bias, floats(H)))

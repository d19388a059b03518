// ARMT's associative-memory kernels on the CPU backend (Backend::dpfp_forward ..
// assoc_write_backward, docs/armt.md): every forward against a literal double-precision
// reference written from the authors' equations (language_modeling.py), every backward against
// central finite differences of a random projection loss L = sum(w * out). The write's gamma
// carries no gradient (the authors' .detach()): its reference takes gamma as a fixed input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "tests/random_vectors.h"

using namespace rmt;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

namespace {

Backend& be() { return cpu_backend(); }

// |N(0, sd)| + lo: positive inputs (DPFP features are >= 0; z a sum of them).
Vec positive(size_t n, float sd, float lo, uint32_t seed) {
  Vec v = randn(n, sd, seed);
  for (auto& x : v) x = std::fabs(x) + lo;
  return v;
}
// Values kept at least `gap` away from 0 (the ReLUs' kink), for finite differences.
Vec away_from_zero(size_t n, float gap, uint32_t seed) {
  Vec v = randn(n, 1.f, seed);
  for (auto& x : v) x = x < 0 ? x - gap : x + gap;
  return v;
}

template <class A, class B>
double dot(const A& a, const B& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Central differences of loss() wrt every element of x (the rounded step in the denominator).
DVec fd(Vec& x, const std::function<double()>& loss, double h) {
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float save = x[i];
    x[i] = float(save + h);
    const double xp = x[i], lp = loss();
    x[i] = float(save - h);
    const double xm = x[i], lm = loss();
    x[i] = save;
    g[i] = (lp - lm) / (xp - xm);
  }
  return g;
}

template <class A>
void check_close(const std::string& what, const A& analytic, const DVec& numeric, double tol) {
  REQUIRE(analytic.size() == numeric.size());
  double err = 0, ref = 1e-3;
  for (size_t i = 0; i < numeric.size(); ++i) {
    err = std::max(err, std::fabs(double(analytic[i]) - numeric[i]));
    ref = std::max(ref, std::fabs(numeric[i]));
  }
  INFO(what << ": max err " << err << " / max ref " << ref);
  CHECK(err <= tol * ref);
}

// DPFP nu = 3, literally as the authors' dpfp (cat, roll, repeat), in double.
DVec dpfp_ref(const Vec& x, int n, int dm) {
  const int n2 = 2 * dm;
  DVec out(size_t(n) * 3 * n2);
  for (int r = 0; r < n; ++r) {
    DVec xp(n2);
    for (int i = 0; i < dm; ++i) {
      xp[i] = std::max(0.0, double(x[r * dm + i]));
      xp[dm + i] = std::max(0.0, -double(x[r * dm + i]));
    }
    for (int j = 1; j <= 3; ++j)
      for (int i = 0; i < n2; ++i)  // torch.roll(x, j)[i] = x[(i - j) mod n]
        out[size_t(r) * 3 * n2 + (j - 1) * n2 + i] = xp[i] * xp[((i - j) % n2 + n2) % n2];
  }
  return out;
}

// The read in double: out[rb] = phi A_b / (phi . z_b + eps).
DVec read_ref(const Vec& phi, const Vec& A, const Vec& z, int rows, int B, int Dk, int d) {
  DVec out(size_t(rows) * B * d);
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < B; ++b) {
      const size_t rb = size_t(r) * B + b;
      double den = 1e-5;
      for (int k = 0; k < Dk; ++k) den += double(phi[rb * Dk + k]) * z[size_t(b) * Dk + k];
      for (int t = 0; t < d; ++t) {
        double num = 0;
        for (int k = 0; k < Dk; ++k) num += double(phi[rb * Dk + k]) * A[(size_t(b) * Dk + k) * d + t];
        out[rb * d + t] = num / den;
      }
    }
  return out;
}

// The write in double with gamma given: A_out = A_in + sum_j sigmoid(bl_j) k_j^T (v_j - vbar_j),
// z_out = z_in + sum_j gamma_j k_j; returned as [A_out | z_out].
DVec write_ref(const Vec* A_in, const Vec* z_in, const Vec& key, const Vec& v, const Vec* vbar,
               const Vec& blogit, const DVec& gamma, int m, int B, int Dk, int d) {
  DVec out(size_t(B) * Dk * d + size_t(B) * Dk);
  double* Ao = out.data();
  double* zo = out.data() + size_t(B) * Dk * d;
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < Dk; ++k) {
      for (int t = 0; t < d; ++t) {
        const size_t i = (size_t(b) * Dk + k) * d + t;
        double acc = A_in ? (*A_in)[i] : 0.0;
        for (int j = 0; j < m; ++j) {
          const size_t jb = size_t(j) * B + b;
          const double beta = 1.0 / (1.0 + std::exp(-double(blogit[jb])));
          acc += beta * key[jb * Dk + k] * (double(v[jb * d + t]) - (vbar ? (*vbar)[jb * d + t] : 0.f));
        }
        Ao[i] = acc;
      }
      double acc = z_in ? (*z_in)[size_t(b) * Dk + k] : 0.0;
      for (int j = 0; j < m; ++j) acc += gamma[size_t(j) * B + b] * key[(size_t(j) * B + b) * Dk + k];
      zo[size_t(b) * Dk + k] = acc;
    }
  return out;
}

DVec gammas(const Vec& key, const Vec* den, int m, int B, int Dk) {
  DVec g(size_t(m) * B, 1.0);
  if (!den) return g;
  for (size_t jb = 0; jb < g.size(); ++jb) {
    double sq = 0;
    for (int k = 0; k < Dk; ++k) sq += double(key[jb * Dk + k]) * key[jb * Dk + k];
    g[jb] = std::clamp(1.0 - (*den)[jb] / (sq + 1e-5), 0.0, 1.0);
  }
  return g;
}

}  // namespace

TEST_CASE("armt kernels: dpfp forward is the authors' cat/roll/repeat, backward matches FD") {
  const int n = 5, dm = 4;  // 2dm = 8 < nu = 3 shifts wraps around: exercises the roll
  Vec x = away_from_zero(size_t(n) * dm, 0.05f, 1);
  Vec out(size_t(n) * 6 * dm);
  be().dpfp_forward(out.data(), x.data(), n, dm);
  const DVec ref = dpfp_ref(x, n, dm);
  double err = 0;
  for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::fabs(out[i] - ref[i]));
  CHECK(err < 1e-6);
  const Vec w = randn(out.size(), 1.f, 2);
  Vec dx(x.size(), NAN);
  be().dpfp_backward(dx.data(), w.data(), x.data(), n, dm);
  check_close("dpfp dx", dx, fd(x, [&] { return dot(dpfp_ref(x, n, dm), w); }, 1e-3), 1e-3);
  // a small dm (2dm = 2: every shift wraps more than once)
  Vec x1 = away_from_zero(3, 0.05f, 3);
  Vec o1(18), d1(3), w1 = randn(18, 1.f, 4);
  be().dpfp_forward(o1.data(), x1.data(), 3, 1);
  be().dpfp_backward(d1.data(), w1.data(), x1.data(), 3, 1);
  check_close("dpfp dm 1", d1, fd(x1, [&] { return dot(dpfp_ref(x1, 3, 1), w1); }, 1e-3), 1e-3);
}

TEST_CASE("armt kernels: the associative read against its reference and FD (phi, A, z)") {
  const int rows = 3, B = 2, Dk = 6, d = 5;
  Vec phi = positive(size_t(rows) * B * Dk, 1.f, 0.1f, 5), A = randn(size_t(B) * Dk * d, 1.f, 6),
      z = positive(size_t(B) * Dk, 1.f, 0.2f, 7);
  Vec out(size_t(rows) * B * d), den(size_t(rows) * B);
  be().assoc_read_forward(out.data(), den.data(), phi.data(), A.data(), z.data(), rows, B, Dk, d, 1e-5f);
  const DVec ref = read_ref(phi, A, z, rows, B, Dk, d);
  check_close("read forward", out, ref, 1e-5);
  const Vec w = randn(out.size(), 1.f, 8);
  // accumulate: start from known values and subtract them
  Vec dphi(phi.size(), 0.5f), dA(A.size(), -1.f), dz(z.size(), 2.f);
  be().assoc_read_backward(dphi.data(), dA.data(), dz.data(), w.data(), out.data(), den.data(),
                           phi.data(), A.data(), z.data(), rows, B, Dk, d);
  for (auto& g : dphi) g -= 0.5f;
  for (auto& g : dA) g += 1.f;
  for (auto& g : dz) g -= 2.f;
  auto loss = [&] { return dot(read_ref(phi, A, z, rows, B, Dk, d), w); };
  check_close("read dphi", dphi, fd(phi, loss, 1e-3), 2e-3);
  check_close("read dA", dA, fd(A, loss, 1e-3), 2e-3);
  check_close("read dz", dz, fd(z, loss, 1e-3), 2e-3);
}

TEST_CASE("armt kernels: the delta-rule write against its reference and FD, first and corrected") {
  const int m = 3, B = 2, Dk = 6, d = 4;
  for (bool first : {true, false}) {
    CAPTURE(first);
    Vec key = positive(size_t(m) * B * Dk, 1.f, 0.05f, 10), v = randn(size_t(m) * B * d, 1.f, 11),
        vbar = randn(size_t(m) * B * d, 1.f, 12), blogit = randn(size_t(m) * B, 1.f, 13),
        A_in = randn(size_t(B) * Dk * d, 1.f, 14), z_in = positive(size_t(B) * Dk, 1.f, 0.1f, 15);
    // denominators around half |k|^2: gamma inside (0, 1) for most rows, clipped for some
    Vec den(size_t(m) * B);
    for (size_t jb = 0; jb < den.size(); ++jb) {
      double sq = 0;
      for (int k = 0; k < Dk; ++k) sq += double(key[jb * Dk + k]) * key[jb * Dk + k];
      den[jb] = float(sq * (jb == 1 ? 1.5 : 0.2 + 0.15 * double(jb)));
    }
    const Vec* Ai = first ? nullptr : &A_in;
    const Vec* zi = first ? nullptr : &z_in;
    const Vec* vb = first ? nullptr : &vbar;
    const Vec* dn = first ? nullptr : &den;
    const DVec gamma = gammas(key, dn, m, B, Dk);
    if (!first) {
      CHECK(gamma[1] == 0.0);                      // clipped
      CHECK((gamma[0] > 0.0 && gamma[0] < 1.0));  // inside
    }
    Vec A_out(A_in.size()), z_out(z_in.size());
    be().assoc_write_forward(A_out.data(), z_out.data(), Ai ? Ai->data() : nullptr, zi ? zi->data() : nullptr,
                             key.data(), v.data(), vb ? vb->data() : nullptr, dn ? dn->data() : nullptr,
                             blogit.data(), m, B, Dk, d, 1e-5f);
    Vec got(A_out);
    got.insert(got.end(), z_out.begin(), z_out.end());
    check_close("write forward", got, write_ref(Ai, zi, key, v, vb, blogit, gamma, m, B, Dk, d), 1e-5);

    const Vec w = randn(got.size(), 1.f, 16);
    const Vec dA_out(w.begin(), w.begin() + long(A_out.size())), dz_out(w.begin() + long(A_out.size()), w.end());
    Vec dkey(key.size(), NAN), dv(v.size(), NAN), dbl(blogit.size(), NAN);
    be().assoc_write_backward(dkey.data(), dv.data(), dbl.data(), dA_out.data(), dz_out.data(), key.data(),
                              v.data(), vb ? vb->data() : nullptr, dn ? dn->data() : nullptr, blogit.data(),
                              m, B, Dk, d, 1e-5f);
    // gamma held at its value (no gradient), as the kernel defines
    auto loss = [&] { return dot(write_ref(Ai, zi, key, v, vb, blogit, gamma, m, B, Dk, d), w); };
    check_close("write dkey", dkey, fd(key, loss, 1e-3), 2e-3);
    check_close("write dv", dv, fd(v, loss, 1e-3), 2e-3);
    check_close("write dblogit", dbl, fd(blogit, loss, 1e-3), 2e-3);
    if (!first) {  // d vbar = -d v
      const DVec dvbar = fd(vbar, loss, 1e-3);
      Vec neg(dv);
      for (auto& g : neg) g = -g;
      check_close("write dvbar = -dv", neg, dvbar, 2e-3);
    }
  }
}

TEST_CASE("armt kernels: results do not depend on the thread count") {
  const int rows = 40, B = 3, dm = 8, Dk = 48, d = 32, m = 4;
  const Vec x = randn(size_t(rows) * B * dm, 1.f, 20), A = randn(size_t(B) * Dk * d, 1.f, 21),
            z = positive(size_t(B) * Dk, 1.f, 0.1f, 22), g = randn(size_t(rows) * B * d, 1.f, 23),
            v = randn(size_t(m) * B * d, 1.f, 24), bl = randn(size_t(m) * B, 1.f, 25);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Vec phi(size_t(rows) * B * Dk), out(size_t(rows) * B * d), den(size_t(rows) * B);
    be().dpfp_forward(phi.data(), x.data(), int64_t(rows) * B, dm);
    be().assoc_read_forward(out.data(), den.data(), phi.data(), A.data(), z.data(), rows, B, Dk, d, 1e-5f);
    Vec dphi(phi.size(), 0.f), dA(A.size(), 0.f), dz(z.size(), 0.f), dx(x.size());
    be().assoc_read_backward(dphi.data(), dA.data(), dz.data(), g.data(), out.data(), den.data(), phi.data(),
                             A.data(), z.data(), rows, B, Dk, d);
    be().dpfp_backward(dx.data(), dphi.data(), x.data(), int64_t(rows) * B, dm);
    Vec Ao(A.size()), zo(z.size()), dk(size_t(m) * B * Dk), dv(v.size()), db(bl.size());
    be().assoc_write_forward(Ao.data(), zo.data(), A.data(), z.data(), phi.data(), v.data(), out.data(),
                             den.data(), bl.data(), m, B, Dk, d, 1e-5f);
    be().assoc_write_backward(dk.data(), dv.data(), db.data(), A.data(), z.data(), phi.data(), v.data(),
                              out.data(), den.data(), bl.data(), m, B, Dk, d, 1e-5f);
    std::vector<Vec> all = {phi, out, den, dphi, dA, dz, dx, Ao, zo, dk, dv, db};
    return all;
  };
  const int before = num_threads();
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  CHECK(one == two);
}

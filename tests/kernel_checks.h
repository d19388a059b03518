#pragma once
// The CPU backend's kernel tests (tests/test_kernels_*.cpp): the backend under test, central
// finite differences of a loss, and the comparisons of a kernel's output with a reference
// (relative to the largest reference value, or absolute).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/backend.h"

using Vec = std::vector<float>;
using DVec = std::vector<double>;

inline rmt::Backend& be() { return rmt::cpu_backend(); }

template <class A, class B>
double dot(const A& a, const B& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double)a[i] * (double)b[i];
  return s;
}

// Central differences of loss() wrt every element of x. For float x the step actually taken
// (after rounding) is used in the denominator.
template <class T>
DVec fd(std::vector<T>& x, const std::function<double()>& loss, double h) {
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const T save = x[i];
    x[i] = (T)(save + h);
    const double xp = x[i], lp = loss();
    x[i] = (T)(save - h);
    const double xm = x[i], lm = loss();
    x[i] = save;
    g[i] = (lp - lm) / (xp - xm);
  }
  return g;
}

// max |analytic - numeric| relative to max |numeric| (or 1e-3, whichever is larger).
template <class A>
void check_close(const char* what, const A& analytic, const DVec& numeric, double tol) {
  REQUIRE(analytic.size() == numeric.size());
  double err = 0, ref = 1e-3;
  bool finite = true;  // std::max would pass over a NaN (an output the kernel never wrote)
  for (size_t i = 0; i < numeric.size(); ++i) {
    finite = finite && std::isfinite((double)analytic[i]);
    err = std::max(err, std::fabs((double)analytic[i] - numeric[i]));
    ref = std::max(ref, std::fabs(numeric[i]));
  }
  INFO(std::string(what) << ": max err " << err << " / max ref " << ref);
  CHECK(finite);
  CHECK(err <= tol * ref);
}

// Elementwise |a - b| <= tol (absolute).
template <class A, class B>
void check_abs(const char* what, const A& a, const B& b, double tol) {
  REQUIRE(a.size() == b.size());
  double err = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs((double)a[i] - (double)b[i]));
  INFO(std::string(what) << ": max abs err " << err);
  CHECK(err <= tol);
}

inline Vec minus(const Vec& a, float c) {
  Vec r(a);
  for (auto& x : r) x -= c;
  return r;
}

//===- Compare.cpp - Compare an output with its expected value ------------===//
#include "Compare.h"

#include <cmath>
#include <cstdio>

namespace tofu::nodetest {

namespace {

std::string dimsString(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k)
    s += (k ? "x" : "") + std::to_string(dims[k]);
  return s + "]";
}

/// The multi-dimensional index of flat element `flat` of `dims`.
std::string indexString(const std::vector<int64_t> &dims, int64_t flat) {
  std::vector<int64_t> index(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    index[k] = dims[k] ? flat % dims[k] : 0;
    flat = dims[k] ? flat / dims[k] : 0;
  }
  std::string s = "[";
  for (size_t k = 0; k < index.size(); ++k)
    s += (k ? ", " : "") + std::to_string(index[k]);
  return s + "]";
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

} // namespace

std::string compareTensors(const TensorData &actual, const TensorData &expected,
                           const std::string &what, Tolerance tol) {
  if (actual.type.elem != expected.type.elem)
    return what + ": element type " + elemTypeString(actual.type.elem) +
           ", expected " + elemTypeString(expected.type.elem);
  if (actual.type.dims != expected.type.dims)
    return what + ": shape " + dimsString(actual.type.dims) + ", expected " +
           dimsString(expected.type.dims);
  bool isFloat = tdl::isFloatElem(expected.type.elem);
  int64_t n = expected.numElements();
  int64_t worst = -1, mismatches = 0;
  double worstExcess = 0; // how far past the allowed difference (inf: NaN/inf)
  for (int64_t k = 0; k < n; ++k) {
    double a = actual.valueAt(k), e = expected.valueAt(k);
    double excess = 0;
    if (!isFloat) {
      excess = a == e ? 0 : std::fabs(a - e);
    } else if (std::isnan(e) || std::isnan(a)) {
      excess = std::isnan(e) && std::isnan(a) ? 0 : INFINITY;
    } else if (std::isinf(e) || std::isinf(a)) {
      excess = a == e ? 0 : INFINITY;
    } else {
      double diff = std::fabs(a - e);
      double allowed = tol.atol + tol.rtol * std::fabs(e);
      excess = diff > allowed ? diff - allowed : 0;
    }
    if (excess > 0) {
      ++mismatches;
      if (worst < 0 || excess > worstExcess) {
        worst = k;
        worstExcess = excess;
      }
    }
  }
  if (worst < 0)
    return "";
  double a = actual.valueAt(worst), e = expected.valueAt(worst);
  std::string msg = what + ": " + std::to_string(mismatches) + " of " +
                    std::to_string(n) + " elements differ; worst at " +
                    indexString(expected.type.dims, worst) + ": got " +
                    number(a) + ", expected " + number(e);
  if (isFloat && std::isfinite(a) && std::isfinite(e))
    msg += " (|diff| " + number(std::fabs(a - e)) + " > " +
           number(tol.atol + tol.rtol * std::fabs(e)) + ")";
  return msg;
}

} // namespace tofu::nodetest

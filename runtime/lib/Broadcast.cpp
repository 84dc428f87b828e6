//===- Broadcast.cpp - ONNX broadcasting on local boxes -------------------===//

#include "Broadcast.h"

using namespace tofu::runtime;

bool tofu::runtime::sameBox(const TensorView &out, const TensorView &in) {
  return in.shape == out.shape && in.lo == out.lo &&
         in.globalShape == out.globalShape;
}

std::string
tofu::runtime::broadcastDimOffsets(const TensorView &out, const TensorView &in,
                                   std::vector<std::vector<int64_t>> &contrib) {
  const size_t ro = out.shape.size(), ri = in.shape.size();
  if (ri > ro)
    return "input of rank " + std::to_string(ri) +
           " cannot broadcast to an output of rank " + std::to_string(ro);
  if (out.globalShape.size() != ro || in.globalShape.size() != ri ||
      out.lo.size() != ro || in.lo.size() != ri)
    return "operand global shape or position has the wrong rank";
  // contrib[i][k]: flat-offset contribution of output local index k in dim i.
  contrib.assign(ro, {});
  int64_t stride = 1;
  for (size_t jj = ri; jj-- > 0;) {
    size_t i = jj + (ro - ri);
    int64_t gi = in.globalShape[jj], go = out.globalShape[i];
    if (gi != go && gi != 1)
      return "global extents " + std::to_string(gi) + " and " +
             std::to_string(go) + " are not broadcast-compatible (dimension " +
             std::to_string(i) + ")";
    contrib[i].resize(out.shape[i]);
    for (int64_t k = 0; k < out.shape[i]; ++k) {
      int64_t local = (gi == 1 && go != 1) ? -in.lo[jj]
                                           : out.lo[i] + k - in.lo[jj];
      if (local < 0 || local >= in.shape[jj])
        return "the input's local box [" + std::to_string(in.lo[jj]) + ", " +
               std::to_string(in.lo[jj] + in.shape[jj]) +
               ") of dimension " + std::to_string(jj) +
               " lacks global index " + std::to_string(local + in.lo[jj]) +
               " needed by the output";
      contrib[i][k] = local * stride;
    }
    stride *= in.shape[jj];
  }
  for (size_t i = 0; i < ro - ri; ++i)
    contrib[i].assign(out.shape[i], 0);
  return "";
}

std::string tofu::runtime::broadcastOffsets(const TensorView &out,
                                            const TensorView &in,
                                            std::vector<int64_t> &offsets) {
  std::vector<std::vector<int64_t>> contrib;
  if (std::string err = broadcastDimOffsets(out, in, contrib); !err.empty())
    return err;
  const size_t ro = out.shape.size();
  int64_t n = out.numElements();
  offsets.assign(n, 0);
  if (n == 0)
    return "";
  std::vector<int64_t> idx(ro, 0);
  int64_t cur = 0;
  for (size_t i = 0; i < ro; ++i)
    cur += contrib[i][0];
  for (int64_t e = 0; e < n; ++e) {
    offsets[e] = cur;
    for (size_t i = ro; i-- > 0;) {
      cur -= contrib[i][idx[i]];
      if (++idx[i] < out.shape[i]) {
        cur += contrib[i][idx[i]];
        break;
      }
      idx[i] = 0;
      cur += contrib[i][0];
    }
  }
  return "";
}

//===- PlanHtmlWriter.cpp - the plan as a self-contained HTML page --------===//
//
// `tofuc --dump-plan=html`: one page with inline CSS and SVG (no script, no
// network) that draws, like Figure 11 of the Tofu paper, each weight and
// activation tensor as a grid of tiles coloured by the device that owns them
// (TileGeometry's ownedBox), with the bytes each op moves per recursion step,
// the per-step totals, per-device peak memory and a legend. The page layout
// and its limits are documented in docs/PlanHtml.md.
//
// The output is deterministic: everything is emitted in plan order or in an
// order with explicit tie-breaks. The search time is the only value that
// changes between runs; it sits alone on the line marked
// `id="search-time"` so that comparisons can drop that line.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Target/PlanPrinter.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;

namespace tofu {
namespace {

/// Largest side of a drawn tensor, and the thinnest side drawn (so that a
/// [1024, 1] tensor still shows its tiles).
constexpr int kMaxSide = 220;
constexpr int kMinSide = 24;
/// At most this many tiles (SVG rects) are drawn on the page in all; the
/// number of tensor drawings per section follows from it and k.
constexpr int64_t kTileBudget = 12000;
constexpr int64_t kMaxDrawingsPerSection = 48;
constexpr int64_t kMinDrawingsPerSection = 4;
/// At most this many rows in the table of ops.
constexpr size_t kMaxOpRows = 150;
/// Up to this many devices the legend has one row per device; above, one
/// row per class of devices with equal peak memory (as the text form), with
/// the swatches of its first kClassSwatches devices and at most
/// kClassRanges ranges of device ids.
constexpr int64_t kListedLegendDevices = 16;
constexpr size_t kClassSwatches = 8;
constexpr size_t kClassRanges = 16;

/// Ten well-separated colours for the first devices (Tableau 10), then
/// evenly spaced hues at alternating lightness.
std::string deviceColor(int64_t device, int64_t numDevices) {
  static const char *kFixed[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                 "#bcbd22", "#17becf"};
  if (numDevices <= 10)
    return kFixed[device];
  double hue = 360.0 * static_cast<double>(device) / numDevices;
  double lightness = device % 2 ? 0.38 : 0.58, saturation = 0.7;
  double c = (1 - std::fabs(2 * lightness - 1)) * saturation;
  double h = hue / 60.0;
  double x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  if (h < 1)
    r = c, g = x;
  else if (h < 2)
    r = x, g = c;
  else if (h < 3)
    g = c, b = x;
  else if (h < 4)
    g = x, b = c;
  else if (h < 5)
    r = x, b = c;
  else
    r = c, b = x;
  double m = lightness - c / 2;
  auto channel = [&](double v) {
    return std::clamp(static_cast<int>(std::lround((v + m) * 255)), 0, 255);
  };
  return llvm::formatv("#{0:x-2}{1:x-2}{2:x-2}", channel(r), channel(g),
                       channel(b))
      .str();
}

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// "1.50 MiB" style, exact bytes for small values.
std::string humanBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:f2} {1}", value, units[unit]).str();
}

int64_t tensorBytes(const plan::TensorInfo &tensor) {
  int64_t bytes = static_cast<int64_t>(plan::dtypeSize(tensor.dtype));
  for (int64_t d : tensor.shape)
    bytes *= d;
  return bytes;
}

/// Which two dimensions a tensor is drawn on: rows and columns (-1: a single
/// row or column). 2-D tensors are drawn as they are; N-D tensors on the
/// plane of their first two distinct cut dimensions, completed with the
/// lowest uncut dimensions (docs/PlanHtml.md).
std::pair<int, int> drawnAxes(const plan::TensorInfo &tensor) {
  int rank = tensor.shape.size();
  if (rank == 0)
    return {-1, -1};
  if (rank == 1)
    return {-1, 0};
  if (rank == 2)
    return {0, 1};
  std::vector<int> axes;
  for (const plan::Cut &cut : tensor.tiling)
    if (std::find(axes.begin(), axes.end(), cut.dim) == axes.end() &&
        axes.size() < 2)
      axes.push_back(cut.dim);
  for (int d = 0; d < rank && axes.size() < 2; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end())
      axes.push_back(d);
  std::sort(axes.begin(), axes.end());
  return {axes[0], axes[1]};
}

/// Tensors drawn once for several tensors of the same role, shape, element
/// type and tiling (the paper's "×N").
struct TensorGroup {
  std::vector<int32_t> members; ///< indices into plan.tensors, in plan order
  int64_t bytes = 0;            ///< of one member
};

class PlanHtmlWriter {
public:
  PlanHtmlWriter(func::FuncOp func, const plan::Plan &plan,
                 const StepPrediction *prediction)
      : ctx(func.getContext()), plan(plan), prediction(prediction),
        summary(summarizePlan(func, plan)) {
    grid.steps = summary.grid;
    if (grid.steps.empty())
      grid.steps = {static_cast<int64_t>(plan.numDevices)};
    numDevices = grid.numDevices();
    int64_t perSection = kTileBudget / (3 * std::max<int64_t>(numDevices, 1));
    drawingsPerSection = std::clamp(perSection, kMinDrawingsPerSection,
                                    kMaxDrawingsPerSection);
  }

  std::string write();

private:
  void writeHead();
  void writeSummary();
  void writeLegend();
  void writeSteps();
  void writeTimeline();
  void writeTensorSection(llvm::StringRef id, llvm::StringRef title,
                          llvm::StringRef note,
                          llvm::ArrayRef<plan::TensorRole> roles, bool open);
  void writeTensor(const TensorGroup &group);
  void writeOps();

  std::string coordinatesOf(int64_t device) const {
    std::string s;
    for (int64_t c : grid.coordinates(device))
      s += (s.empty() ? "" : ",") + std::to_string(c);
    return "(" + s + ")";
  }

  MLIRContext *ctx;
  const plan::Plan &plan;
  const StepPrediction *prediction;
  PlanSummary summary;
  DeviceGrid grid;
  int64_t numDevices = 1;
  int64_t drawingsPerSection = kMaxDrawingsPerSection;
  std::string out;
};

void PlanHtmlWriter::writeHead() {
  out += R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tofu plan</title>
<style>
body { font: 13px/1.4 sans-serif; margin: 12px 16px; color: #222; background: #fff; }
h1 { font-size: 18px; margin: 0 0 6px; }
h2 { font-size: 15px; margin: 14px 0 6px; }
table { border-collapse: collapse; }
td, th { padding: 2px 8px; text-align: left; border-bottom: 1px solid #ddd; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; }
.legend span.swatch { display: inline-block; width: 14px; height: 14px; vertical-align: -2px; margin-right: 4px; }
.tensors { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: flex-start; }
figure.tensor { margin: 0; max-width: 240px; }
figure.tensor figcaption { font-size: 11px; word-break: break-all; }
figure.tensor svg { display: block; }
.bar { display: inline-block; height: 10px; background: #888; }
.timeline { position: relative; height: 14px; width: 720px; background: #f4f4f4; margin: 2px 0; }
.timeline span { position: absolute; top: 0; height: 14px; }
.timeline .compute { background: #4a7fc1; } .timeline .copy { background: #e0a030; } .timeline .comm { background: #c0504d; }
.note { color: #666; font-size: 12px; }
details > summary { cursor: pointer; }
</style>
</head>
<body>
)";
}

void PlanHtmlWriter::writeSummary() {
  std::string gridText;
  for (int64_t k : summary.grid)
    gridText += (gridText.empty() ? "" : " &times; ") + std::to_string(k);
  out += llvm::formatv("<h1>tofu plan: {0} devices, partitioner {1}</h1>\n",
                       plan.numDevices, escape(plan.partitioner));
  out += "<table class=\"summary\">\n";
  out += llvm::formatv("<tr><th>device grid</th><td>{0} ({1} recursion "
                       "step{2})</td></tr>\n",
                       gridText, summary.grid.size(),
                       summary.grid.size() == 1 ? "" : "s");
  out += llvm::formatv("<tr><th>communication</th><td>{0} bytes per training "
                       "step ({1})</td></tr>\n",
                       plan.commBytes, humanBytes(plan.commBytes));
  out += llvm::formatv("<tr><th>batch, optimizer</th><td>{0}, {1} lr "
                       "{2}</td></tr>\n",
                       plan.batchSize, escape(plan.optimizer.kind),
                       plan.optimizer.learningRate);
  out += llvm::formatv("<tr><th>tensors, ops</th><td>{0}, {1}</td></tr>\n",
                       plan.tensors.size(), summary.ops.size());
  out += "</table>\n";
  // The one line that differs between runs (see the file comment).
  out += llvm::formatv("<p class=\"note\" id=\"search-time\">search time "
                       "(partition phase, wall): {0:f4} s</p>\n",
                       plan.searchSeconds);
}

void PlanHtmlWriter::writeLegend() {
  out += "<h2>Devices</h2>\n<div class=\"legend\" id=\"legend\">\n";
  auto peakOf = [&](int64_t d) -> uint64_t {
    return d < static_cast<int64_t>(plan.devices.size())
               ? plan.devices[d].peakBytes
               : 0;
  };
  auto swatch = [&](int64_t d) {
    return llvm::formatv("<span class=\"swatch\" data-device=\"{0}\" "
                         "style=\"background:{1}\"></span>",
                         d, deviceColor(d, numDevices))
        .str();
  };
  if (numDevices <= kListedLegendDevices) {
    for (int64_t d = 0; d < numDevices; ++d)
      out += llvm::formatv("<div>{0}device {1} {2}: peak {3}</div>\n",
                           swatch(d), d, coordinatesOf(d),
                           humanBytes(peakOf(d)));
  } else {
    // A thousand rows say little: one row per class of devices with equal
    // peak memory, ascending (as the text form), with the swatches of its
    // first devices and its devices as ranges (--dump-plan=json lists every
    // device; every tile's hover text names its device).
    std::map<uint64_t, std::vector<int64_t>> devicesWithPeak;
    for (int64_t d = 0; d < numDevices; ++d)
      devicesWithPeak[peakOf(d)].push_back(d);
    for (const auto &[peak, devices] : devicesWithPeak) {
      std::string swatches, ranges;
      for (size_t i = 0; i < devices.size() && i < kClassSwatches; ++i)
        swatches += swatch(devices[i]);
      size_t numRanges = 0;
      for (size_t i = 0; i < devices.size();) {
        size_t j = i;
        while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1)
          ++j;
        if (numRanges++ == kClassRanges) {
          ranges += ", …";
          break;
        }
        ranges += (i ? ", " : "") + std::to_string(devices[i]) +
                  (j > i ? "-" + std::to_string(devices[j]) : "");
        i = j + 1;
      }
      out += llvm::formatv(
          "<div data-peak=\"{0}\" data-devices=\"{1}\">{2}{1} device{3} "
          "({4}): peak {5}</div>\n",
          peak, devices.size(), swatches, devices.size() == 1 ? "" : "s",
          ranges, humanBytes(peak));
    }
  }
  out += "</div>\n";
  out += "<p class=\"note\">Device d has grid coordinates (c1, ..., cm), c1 "
         "the most significant: at recursion step i it belongs to group ci of "
         "k_i. Peak = the static memory arena of the device. A tile owned by "
         "several devices (replicated, or cut along a dimension not drawn) is "
         "drawn as stripes, one per device.";
  if (numDevices > kListedLegendDevices)
    out += llvm::formatv(" Above {0} devices, devices with equal peak memory "
                         "share one row (the swatches of its first {1}); "
                         "--dump-plan=json lists every device.",
                         kListedLegendDevices, kClassSwatches)
               .str();
  out += "</p>\n";
}

void PlanHtmlWriter::writeSteps() {
  out += "<h2>Bytes per recursion step</h2>\n<table id=\"steps\">\n"
         "<tr><th>step</th><th class=\"num\">groups</th><th "
         "class=\"num\">bytes</th><th></th><th class=\"num\">across its "
         "links</th></tr>\n";
  int64_t maxBytes = 1;
  for (int64_t b : summary.bytesPerStep)
    maxBytes = std::max(maxBytes, b);
  for (size_t s = 0; s < summary.bytesPerStep.size(); ++s)
    out += llvm::formatv(
        "<tr><td>{0}</td><td class=\"num\">{1}</td><td "
        "class=\"num\">{2}</td><td><span class=\"bar\" "
        "style=\"width:{3}px\"></span> {4}</td><td "
        "class=\"num\">{5}</td></tr>\n",
        s + 1, summary.grid[s], summary.bytesPerStep[s],
        summary.bytesPerStep[s] * 200 / maxBytes,
        humanBytes(summary.bytesPerStep[s]), summary.bytesPerLink[s]);
  out += llvm::formatv("<tr><th>total</th><td></td><th class=\"num\">{0}</th>"
                       "<td>{1}</td><td></td></tr>\n</table>\n",
                       summary.bytes, humanBytes(summary.bytes));
  out += "<p class=\"note\">Bytes of step i: the cost on the grid of the "
         "first i steps minus the cost on the grid of the first i-1 (what the "
         "partitioner minimizes, docs/Partitioning.md). Across its links: the "
         "same bytes charged to the step whose interconnect each one crosses, "
         "the first step at which the device that needs it and its nearest "
         "holder are in different groups.</p>\n";
}

/// The predicted step (StepPrediction::timeline) as one bar per device:
/// each seq level's compute, copies and transfers at their predicted start,
/// as a share of the step. Spans narrower than kMinSpanShare of the step
/// are counted, not drawn.
void PlanHtmlWriter::writeTimeline() {
  if (!prediction || prediction->stepSeconds <= 0)
    return;
  constexpr double kMinSpanShare = 0.0005;
  const StepPrediction &p = *prediction;
  out += llvm::formatv(
      "<h2>Predicted timeline</h2>\n<p id=\"predicted\">step {0:e3} s on "
      "{1} ({2}): compute {3:e3} s, transfers {4:e3} s, copies {5:e3} s, "
      "step overhead {7:e3} s (not drawn); {6:f1} samples/s</p>\n",
      p.stepSeconds, escape(p.device),
      p.sharedHost ? "one shared host: the devices' work adds up"
                   : "side by side: each seq level waits for its slowest "
                     "device",
      p.computeSeconds, p.commSeconds(), p.copySeconds, p.samplesPerSecond,
      p.overheadSeconds);
  out += "<div class=\"legend\"><div><span class=\"swatch\" "
         "style=\"background:#4a7fc1\"></span>compute</div><div><span "
         "class=\"swatch\" style=\"background:#e0a030\"></span>copies "
         "(fetch and reduce, local)</div><div><span class=\"swatch\" "
         "style=\"background:#c0504d\"></span>transfers</div></div>\n";
  out += "<table id=\"timeline\">\n";
  int64_t shown = std::min<int64_t>(
      static_cast<int64_t>(p.devices.size()), StepPrediction::kTimelineDevices);
  int64_t hidden = 0;
  // The bars draw the instructions: the step less its overhead.
  const double drawn = p.stepSeconds - p.overheadSeconds > 0
                           ? p.stepSeconds - p.overheadSeconds
                           : p.stepSeconds;
  for (int64_t d = 0; d < shown; ++d) {
    out += llvm::formatv("<tr><td>device {0}</td><td><div class=\"timeline\" "
                         "data-device=\"{0}\">",
                         d);
    for (const StepPrediction::Span &span : p.timeline) {
      if (span.device != d)
        continue;
      double at = span.start;
      for (auto [seconds, kind] :
           {std::pair<double, const char *>{span.compute, "compute"},
            {span.copy, "copy"},
            {span.comm, "comm"}}) {
        double share = seconds / drawn;
        if (seconds > 0 && share < kMinSpanShare)
          ++hidden;
        if (seconds > 0 && share >= kMinSpanShare)
          out += llvm::formatv(
              "<span class=\"{0}\" style=\"left:{1:f3}%;width:{2:f3}%\" "
              "title=\"seq {3} {4}: {0} {5:e2} s\"></span>",
              kind, 100 * at / drawn, 100 * share, span.seq,
              escape(span.op), seconds);
        at += seconds;
      }
    }
    out += "</div></td></tr>\n";
  }
  out += "</table>\n";
  out += llvm::formatv(
      "<p class=\"note\">The step predicted from the device description "
      "(docs/DeviceModel.md, \"Prediction\"), its instructions from 0 at "
      "the left to {0:e3} s at the right (the step overhead is not drawn); "
      "hover a span for its seq level, op and seconds. {1} spans under {2}% "
      "of the drawn step are not drawn.{3}</p>\n",
      drawn, hidden, kMinSpanShare * 100,
      static_cast<int64_t>(p.devices.size()) > shown
          ? llvm::formatv(" Devices {0} to {1} are not drawn "
                          "(--dump-plan=json has every device's times).",
                          shown, p.devices.size() - 1)
                .str()
          : std::string());
}

void PlanHtmlWriter::writeTensor(const TensorGroup &group) {
  const plan::TensorInfo &tensor = plan.tensors[group.members.front()];
  auto [rowAxis, colAxis] = drawnAxes(tensor);
  int64_t rows = rowAxis < 0 ? 1 : tensor.shape[rowAxis];
  int64_t cols = colAxis < 0 ? 1 : tensor.shape[colAxis];
  // Linear along each axis; both sides scaled alike unless one would be
  // thinner than kMinSide.
  double scale = static_cast<double>(kMaxSide) /
                 std::max<int64_t>(std::max(rows, cols), 1);
  int width = std::max<int>(kMinSide, std::lround(cols * scale));
  int height = std::max<int>(kMinSide, std::lround(rows * scale));
  if (rowAxis < 0)
    height = kMinSide;
  if (colAxis < 0)
    width = kMinSide;
  auto xOf = [&](int64_t c) {
    return cols ? static_cast<int>(c * width / cols) : 0;
  };
  auto yOf = [&](int64_t r) {
    return rows ? static_cast<int>(r * height / rows) : 0;
  };

  SmallVector<int64_t> dims;
  SmallVector<int64_t> parts;
  for (const plan::Cut &cut : tensor.tiling) {
    dims.push_back(cut.dim);
    parts.push_back(cut.parts);
  }
  TilingAttr tiling = TilingAttr::get(ctx, dims, parts);
  // Devices by projected rectangle (row lo, row hi, col lo, col hi).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>,
           std::vector<int64_t>>
      tiles;
  std::vector<int64_t> empty;
  for (int64_t d = 0; d < numDevices; ++d) {
    tdl::Box box = ownedBox(grid, tensor.shape, tiling, d);
    if (isEmpty(box)) {
      empty.push_back(d);
      continue;
    }
    tdl::Range rowRange = rowAxis < 0 ? tdl::Range{0, 1} : box[rowAxis];
    tdl::Range colRange = colAxis < 0 ? tdl::Range{0, 1} : box[colAxis];
    tiles[{rowRange.lo, rowRange.hi, colRange.lo, colRange.hi}].push_back(d);
  }

  std::string name = tensor.name;
  out += llvm::formatv("<figure class=\"tensor\" data-tensor=\"{0}\">\n",
                       escape(name));
  out += llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" shape-rendering=\"crispEdges\">\n",
      width + 2, height + 2);
  out += "<g transform=\"translate(1,1)\">\n";
  for (const auto &[rect, devices] : tiles) {
    auto [r0, r1, c0, c1] = rect;
    int x0 = xOf(c0), x1 = xOf(c1), y0 = yOf(r0), y1 = yOf(r1);
    // Several devices on one rectangle: vertical stripes, one per device.
    size_t n = devices.size();
    for (size_t i = 0; i < n; ++i) {
      int sx0 = x0 + static_cast<int>((x1 - x0) * i / n);
      int sx1 = x0 + static_cast<int>((x1 - x0) * (i + 1) / n);
      std::string where;
      if (rowAxis >= 0)
        where += llvm::formatv(" dim{0} {1}:{2}", rowAxis, r0, r1).str();
      if (colAxis >= 0)
        where += llvm::formatv(" dim{0} {1}:{2}", colAxis, c0, c1).str();
      out += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                           "height=\"{3}\" fill=\"{4}\"><title>device "
                           "{5}{6}</title></rect>\n",
                           sx0, y0, std::max(sx1 - sx0, 1),
                           std::max(y1 - y0, 1),
                           deviceColor(devices[i], numDevices), devices[i],
                           where);
    }
  }
  // Tile borders on top, so that one-device tiles stay distinguishable.
  for (const auto &[rect, devices] : tiles) {
    auto [r0, r1, c0, c1] = rect;
    out += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                         "height=\"{3}\" fill=\"none\" stroke=\"#fff\"/>\n",
                         xOf(c0), yOf(r0), std::max(xOf(c1) - xOf(c0), 1),
                         std::max(yOf(r1) - yOf(r0), 1));
  }
  // With several recursion steps, the blocks held by the step-1 groups are
  // outlined, so that the recursion shows (a group's devices share c1).
  if (grid.steps.size() > 1) {
    std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> outlined;
    for (int64_t d = 0; d < numDevices; ++d) {
      tdl::Box box = groupOwnedBox(grid, tensor.shape, tiling, d, 1);
      tdl::Range rowRange = rowAxis < 0 ? tdl::Range{0, 1} : box[rowAxis];
      tdl::Range colRange = colAxis < 0 ? tdl::Range{0, 1} : box[colAxis];
      if (isEmpty(box) ||
          !outlined
               .insert({rowRange.lo, rowRange.hi, colRange.lo, colRange.hi})
               .second)
        continue;
      out += llvm::formatv(
          "<rect class=\"group\" x=\"{0}\" y=\"{1}\" width=\"{2}\" "
          "height=\"{3}\" fill=\"none\" stroke=\"#222\" "
          "stroke-width=\"2\"/>\n",
          xOf(colRange.lo), yOf(rowRange.lo),
          std::max(xOf(colRange.hi) - xOf(colRange.lo), 1),
          std::max(yOf(rowRange.hi) - yOf(rowRange.lo), 1));
    }
  }
  out += "</g>\n</svg>\n<figcaption>";
  if (group.members.size() > 1)
    out += llvm::formatv("<b>&times;{0}</b> ", group.members.size());
  out += "<b>" + escape(name) + "</b><br>" + formatShape(tensor.shape) + " " +
         dtypeName(tensor.dtype) + ", " + escape(formatTiling(tensor.tiling)) +
         ", " + humanBytes(group.bytes);
  if (tensor.shape.size() > 2)
    out += llvm::formatv("<br>drawn: rows = dim{0}, columns = dim{1}",
                         rowAxis, colAxis);
  if (!empty.empty())
    out += llvm::formatv("<br>{0} device(s) own no tile", empty.size());
  if (group.members.size() > 1) {
    out += "<details><summary>all " + std::to_string(group.members.size()) +
           "</summary>";
    for (int32_t m : group.members)
      out += escape(plan.tensors[m].name) + "<br>";
    out += "</details>";
  }
  out += "</figcaption>\n</figure>\n";
}

void PlanHtmlWriter::writeTensorSection(llvm::StringRef id,
                                        llvm::StringRef title,
                                        llvm::StringRef note,
                                        llvm::ArrayRef<plan::TensorRole> roles,
                                        bool open) {
  // Group equal (role, shape, dtype, tiling) tensors; order groups by size,
  // largest first, then by first appearance.
  std::map<std::tuple<int, std::vector<int64_t>, int,
                      std::vector<std::pair<int32_t, int32_t>>>,
           size_t>
      groupOf;
  std::vector<TensorGroup> groups;
  int64_t numTensors = 0;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const plan::TensorInfo &tensor = plan.tensors[t];
    if (std::find(roles.begin(), roles.end(), tensor.role) == roles.end())
      continue;
    ++numTensors;
    std::vector<std::pair<int32_t, int32_t>> cuts;
    for (const plan::Cut &cut : tensor.tiling)
      cuts.push_back({cut.dim, cut.parts});
    auto key = std::make_tuple(static_cast<int>(tensor.role), tensor.shape,
                               static_cast<int>(tensor.dtype), cuts);
    auto [it, inserted] = groupOf.try_emplace(key, groups.size());
    if (inserted)
      groups.push_back({{}, tensorBytes(tensor)});
    groups[it->second].members.push_back(t);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const TensorGroup &a, const TensorGroup &b) {
                     return a.bytes > b.bytes;
                   });
  out += llvm::formatv("<details id=\"{0}\"{1}><summary><h2 "
                       "style=\"display:inline\">{2}</h2> ({3} tensors, {4} "
                       "drawings)</summary>\n",
                       id, open ? " open" : "", title, numTensors,
                       groups.size());
  out += "<p class=\"note\">" + note.str() + "</p>\n";
  out += "<div class=\"tensors\">\n";
  size_t drawn = std::min<size_t>(groups.size(), drawingsPerSection);
  for (size_t g = 0; g < drawn; ++g)
    writeTensor(groups[g]);
  out += "</div>\n";
  if (drawn < groups.size()) {
    int64_t rest = 0;
    for (size_t g = drawn; g < groups.size(); ++g)
      rest += groups[g].members.size();
    out += llvm::formatv("<p class=\"note\">{0} smaller drawings ({1} "
                         "tensors) left out to keep the page small; "
                         "--dump-plan=json lists every tensor.</p>\n",
                         groups.size() - drawn, rest);
  }
  out += "</details>\n";
}

void PlanHtmlWriter::writeOps() {
  std::vector<size_t> order(summary.ops.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return summary.ops[a].bytes > summary.ops[b].bytes;
  });
  int64_t maxBytes = 1;
  for (const OpSummary &op : summary.ops)
    maxBytes = std::max(maxBytes, op.bytes);
  size_t numSteps = summary.grid.size();
  out += llvm::formatv("<details id=\"ops\" open><summary><h2 "
                       "style=\"display:inline\">Bytes each op moves</h2> "
                       "({0} ops, most bytes first)</summary>\n",
                       summary.ops.size());
  out += "<table>\n<tr><th>op</th><th>kind</th>";
  for (size_t s = 0; s < numSteps; ++s)
    out += llvm::formatv("<th>step {0} strategy</th>", s + 1);
  for (size_t s = 0; s < numSteps; ++s)
    out += llvm::formatv("<th class=\"num\">step {0} bytes</th>", s + 1);
  out += "<th class=\"num\">bytes</th><th></th></tr>\n";
  size_t shown = std::min(order.size(), kMaxOpRows);
  for (size_t i = 0; i < shown; ++i) {
    const OpSummary &op = summary.ops[order[i]];
    out += "<tr><td>" + escape(op.name) + "</td><td>" + escape(op.kind) +
           "</td>";
    for (size_t s = 0; s < numSteps; ++s) {
      std::string strategies;
      for (const std::string &strategy : op.stepStrategies[s])
        strategies += (strategies.empty() ? "" : "<br>") + escape(strategy);
      out += "<td>" + strategies + "</td>";
    }
    for (size_t s = 0; s < numSteps; ++s)
      out += llvm::formatv("<td class=\"num\">{0}</td>", op.bytesPerStep[s]);
    out += llvm::formatv("<td class=\"num\">{0}</td><td><span class=\"bar\" "
                         "style=\"width:{1}px\"></span></td></tr>\n",
                         op.bytes, op.bytes * 160 / maxBytes);
  }
  out += "</table>\n";
  if (shown < order.size()) {
    int64_t rest = 0;
    for (size_t i = shown; i < order.size(); ++i)
      rest += summary.ops[order[i]].bytes;
    out += llvm::formatv("<p class=\"note\">{0} more ops moving {1} bytes in "
                         "all; --dump-plan=json lists every op.</p>\n",
                         order.size() - shown, rest);
  }
  out += "</details>\n";
}

std::string PlanHtmlWriter::write() {
  writeHead();
  writeSummary();
  writeLegend();
  writeSteps();
  writeTimeline();
  writeTensorSection(
      "weights", "Weight tensors",
      "Parameters, largest first; equal shapes and tilings are drawn once "
      "(&times;N). Rows are the first dimension.",
      {plan::TensorRole::Param}, /*open=*/true);
  writeTensorSection("activations", "Activation and data tensors",
                     "Inputs, labels, activations and the loss, largest "
                     "first. Rows are the first (batch) dimension.",
                     {plan::TensorRole::Input, plan::TensorRole::Label,
                      plan::TensorRole::Activation, plan::TensorRole::Loss},
                     /*open=*/true);
  writeTensorSection("gradients", "Gradient and updated tensors",
                     "Gradients and the updated parameters, largest first.",
                     {plan::TensorRole::Gradient, plan::TensorRole::Updated},
                     /*open=*/false);
  writeOps();
  out += "</body>\n</html>\n";
  return std::move(out);
}

} // namespace

std::string formatPlanHtml(func::FuncOp func, const plan::Plan &plan,
                           const StepPrediction *prediction) {
  return PlanHtmlWriter(func, plan, prediction).write();
}

} // namespace tofu

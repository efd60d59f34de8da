#include "sim/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr double kWidth = 960;
constexpr double kLeft = 80;
constexpr double kRight = 20;
constexpr double kTop = 40;
constexpr double kPanel = 130;  // plot height of one panel
constexpr double kGap = 45;     // between panels (title and axis labels)
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                   "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

// Maps time and bytes into one panel.
struct Frame {
  double top = 0;
  double duration = 1;
  double y_max = 1;
  double X(double t) const { return kLeft + (kWidth - kLeft - kRight) * t / duration; }
  double Y(double v) const { return top + kPanel - kPanel * std::clamp(v / y_max, 0.0, 1.05); }
};

std::string Polyline(const Frame& f, const std::vector<double>& t, const std::vector<double>& v,
                     const std::string& color, const std::string& extra) {
  std::string points;
  for (size_t i = 0; i < t.size() && i < v.size(); ++i) {
    absl::StrAppend(&points, i == 0 ? "" : " ", absl::StrFormat("%.1f,%.1f", f.X(t[i]), f.Y(v[i])));
  }
  return absl::StrFormat(
      "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" %s points=\"%s\"/>\n", color,
      extra, points);
}

std::string Axes(const Frame& f, const std::string& title) {
  std::string out;
  const double right = kWidth - kRight;
  absl::StrAppend(&out, absl::StrFormat(
                            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"13\" font-weight=\"bold\">%s</text>\n",
                            kLeft, f.top - 8, XmlEscape(title)));
  absl::StrAppend(&out, absl::StrFormat("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
                                        "fill=\"none\" stroke=\"#999\"/>\n",
                                        kLeft, f.top, right - kLeft, kPanel));
  for (double frac : {0.0, 0.5, 1.0}) {
    const double v = frac * f.y_max;
    absl::StrAppend(&out, absl::StrFormat("<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" "
                                          "stroke=\"#eee\"/>\n",
                                          kLeft, right, f.Y(v), f.Y(v)));
    absl::StrAppend(&out, absl::StrFormat("<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" "
                                          "text-anchor=\"end\">%s</text>\n",
                                          kLeft - 6, f.Y(v) + 4, FormatBytes(v)));
  }
  // Time ticks at a round number of minutes, about six of them.
  const double minutes = f.duration / 60;
  double step = 1;
  for (double s : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0}) {
    step = s;
    if (minutes / s <= 8) break;
  }
  for (double m = 0; m <= minutes + 1e-9; m += step) {
    const double x = f.X(m * 60);
    absl::StrAppend(&out, absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
                                          "text-anchor=\"middle\">%gm</text>\n",
                                          x, f.top + kPanel + 14, m));
  }
  return out;
}

}  // namespace

std::string XmlEscape(const std::string& text) {
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

std::string RenderSvg(const Scenario& scenario, const RunResult& run) {
  const Series& s = run.series;
  const size_t guests = s.actual.size();
  const double height = kTop + (guests + 1) * (kPanel + kGap) + 10;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);
  absl::StrAppend(&out, absl::StrFormat(
                            "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
                            kLeft, XmlEscape(absl::StrCat(scenario.name, ": policy ", run.policy,
                                                          " (solid: actual, dashed: target)"))));
  double top = kTop + 12;
  for (size_t i = 0; i < guests; ++i) {
    const GuestSpec& g = scenario.guests[i];
    Frame f{top, std::max(1.0, run.duration), g.max};
    const std::string color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    absl::StrAppend(&out, Axes(f, absl::StrCat("guest ", g.name, " (max ", FormatBytes(g.max),
                                               ", ", BehaviourName(g.behaviour), ")")));
    absl::StrAppend(&out, Polyline(f, s.t, s.target[i], color, "stroke-dasharray=\"6,4\""));
    absl::StrAppend(&out, Polyline(f, s.t, s.actual[i], color, ""));
    top += kPanel + kGap;
  }
  double sum_max = 0;
  for (const GuestSpec& g : scenario.guests) sum_max += g.max;
  Frame host{top, std::max(1.0, run.duration), sum_max};
  absl::StrAppend(&out, Axes(host, "host: guests' total (solid), budget (dashed red)"));
  absl::StrAppend(&out, Polyline(host, s.t, s.budget, "#d62728", "stroke-dasharray=\"6,4\""));
  absl::StrAppend(&out, Polyline(host, s.t, s.sum_actual, "#333", ""));
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace plimsoll::sim

// An SVG plot of one run, written by hand (no plotting library): a panel per guest with its
// balloon target (dashed) and actual size (solid) over time, and a host panel with the guests'
// total against the budget. Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_SVG_PLOT_H_
#define PLIMSOLL_SIM_SVG_PLOT_H_

#include <string>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

// A complete SVG document.
std::string RenderSvg(const Scenario& scenario, const RunResult& run);

// `text` with &, <, > and " escaped for XML.
std::string XmlEscape(const std::string& text);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_SVG_PLOT_H_

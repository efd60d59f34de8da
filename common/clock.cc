#include "common/clock.h"

namespace plimsoll {

RealClock* RealClock::Get() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace plimsoll

// smartdev from C++17: the C API through smartdev.h (extern "C"), with the controller owned by a
// std::unique_ptr and text fetched into a std::string sized by the library (the `needed` size query).
// Build: see CMakeLists.txt.  Run it in an empty folder: it writes simulation_files/ there.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <smartdev.h>

namespace {

const char *const CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: simulation_files\n"
    "  Devices:\n"
    "    - {Name: Pump Box, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pool Pump}]}\n";

// Closes the controller when the owning pointer goes (sd_close takes the address of the pointer).
struct Closer {
  void operator()(sd_controller *ctl) const { sd_close(&ctl); }
};
using Controller = std::unique_ptr<sd_controller, Closer>;

// The last failure on this thread, as an exception naming the call and the code.
std::runtime_error failure(const char *what, sd_result code) {
  size_t needed = 0;
  sd_last_error_message(nullptr, 0, &needed);
  std::string msg(needed, '\0');
  if (needed > 0 && sd_last_error_message(msg.data(), msg.size(), &needed) == SD_OK) {
    msg.resize(needed - 1);
  }
  return std::runtime_error(std::string(what) + " failed (" + sd_result_name(code) + "): " + msg);
}

void check(const char *what, sd_result code) {
  if (code != SD_OK) throw failure(what, code);
}

// Any of the (buf, len, needed) functions, asked for its size first, then called with a buffer that fits.
template <typename Fill>
std::string text(const char *what, Fill fill) {
  size_t needed = 0;
  sd_result r = fill(nullptr, 0, &needed);
  if (r != SD_INSUFFICIENT_SIZE) check(what, r);
  std::string out(needed, '\0');
  check(what, fill(out.data(), out.size(), &needed));
  out.resize(needed - 1);  // needed counts the final NUL
  return out;
}

}  // namespace

int main() {
  try {
    std::printf("smartdev %s (header %s)\n", sd_version(), SMARTDEV_VERSION);
    sd_controller *raw = nullptr;
    check("sd_open_yaml", sd_open_yaml(CONFIG, nullptr, &raw));
    Controller ctl(raw);

    bool on = false, changed = false;
    check("sd_toggle_output", sd_toggle_output(ctl.get(), "Pool Pump", 0, &on, &changed));
    bool state = false;
    check("sd_output_state", sd_output_state(ctl.get(), "Pool Pump", 0, &state));
    if (state != on) throw std::runtime_error("sd_output_state disagrees with sd_toggle_output");
    std::printf("Pool Pump is now %s (%s)\n", on ? "on" : "off", changed ? "changed" : "unchanged");

    sd_meter_reading meter{};
    check("sd_meter", sd_meter(ctl.get(), nullptr, 1, &meter));
    std::printf("power %s\n", meter.has_power ? std::to_string(meter.power).c_str() : "not reported");

    std::puts(text("sd_device", [&](char *buf, size_t len, size_t *needed) {
                return sd_device(ctl.get(), "Pump Box", 0, buf, len, needed);
              }).c_str());
    std::puts(text("sd_print_device_status", [&](char *buf, size_t len, size_t *needed) {
                return sd_print_device_status(ctl.get(), buf, len, needed);
              }).c_str());

    // A name that is not configured: the error code and message come back through the exception.
    try {
      check("sd_output_state", sd_output_state(ctl.get(), "No Such Output", 0, &state));
      throw std::logic_error("an unknown output was found");
    } catch (const std::runtime_error &e) {
      std::printf("as expected: %s\n", e.what());
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

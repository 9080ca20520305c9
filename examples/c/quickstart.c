/* smartdev from C: open an installation of simulated devices, switch an output, print the status.
 * Build: make (uses pkg-config; see bindings/c/install.sh).  Run: ./quickstart */
#include <stdio.h>
#include <stdlib.h>

#include <smartdev.h>

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: simulation_files\n"
    "  Devices:\n"
    "    - {Name: Pump Box, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pool Pump}]}\n";

static int fail(const char *what) {
  char msg[1024];
  size_t n = 0;
  sd_last_error_message(msg, sizeof msg, &n);
  fprintf(stderr, "%s failed: %s\n", what, msg);
  return 1;
}

int main(void) {
  sd_controller *ctl = NULL;
  if (sd_open_yaml(CONFIG, NULL, &ctl) != SD_OK) return fail("sd_open_yaml");

  bool on = false, changed = false;
  if (sd_toggle_output(ctl, "Pool Pump", 0, &on, &changed) != SD_OK) {
    sd_close(&ctl);
    return fail("sd_toggle_output");
  }
  printf("Pool Pump is now %s (%s)\n", on ? "on" : "off", changed ? "changed" : "unchanged");

  char text[8192];
  size_t needed = 0;
  if (sd_print_device_status(ctl, text, sizeof text, &needed) == SD_OK) puts(text);
  sd_close(&ctl);
  return 0;
}

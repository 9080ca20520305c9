/* The MAC rule through the C API: "Kitchen" is configured with MAC A8:03:2A:B1:23:45, but the emulated device at
 * its port is 11:22:33:44:55:66. Switching it fails with SD_WRONG_DEVICE, the message names both MACs, and the
 * emulated relay stays off (the harness checks it after the run). */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 1.5\n"
    "  RetryCount: 0\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Channel: http\n"
    "  FollowMoves: false\n"
    "  Devices:\n"
    "    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, MAC: a8-03-2a-b1-23-45, Outputs: [{Name: Lamp}]}\n";

int main(void) {
  char yaml[1024];
  sd_controller *ctl = NULL;
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_EMU_PORT_0"));
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  bool state = false, changed = false;
  CHECK_RC(sd_change_output(ctl, "Lamp", 0, true, &state, &changed), SD_WRONG_DEVICE);
  char buf[1024];
  size_t needed = 0;
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "11:22:33:44:55:66") != NULL);
  CHECK(strstr(buf, "A8:03:2A:B1:23:45") != NULL);
  CHECK_RC(sd_toggle_output(ctl, "Lamp", 0, &state, &changed), SD_WRONG_DEVICE);
  CHECK_RC(sd_read_device(ctl, "Kitchen", 0), SD_WRONG_DEVICE);
  CHECK(strcmp(sd_result_name(SD_WRONG_DEVICE), "SD_WRONG_DEVICE") == 0);

  sd_close(&ctl);
  return sd_summary();
}

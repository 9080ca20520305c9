/* Firmware through the C API: sd_check_firmware's JSON (unknown is null), an update followed through the
 * device's restart to its new version, nothing on offer (SD_FIRMWARE), a bad channel. The harness starts a
 * Gen2+ device running 1.4.4 with 1.5.0 on offer, and one with nothing on offer. */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 0.4\n"
    "  RetryCount: 2\n"
    "  RetryDelay: 0.05\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Hall, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n";

int main(void) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_EMU_PORT_0"), sd_env("SD_EMU_PORT_1"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  char buf[4096];
  size_t needed = 0;
  CHECK_RC(sd_check_firmware(ctl, "Kitchen", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Current\":\"1.4.4\"") != NULL);
  CHECK(strstr(buf, "\"Stable\":\"1.5.0\"") != NULL);
  CHECK(strstr(buf, "\"Beta\":null") != NULL);
  /* The size query reports what the object needs. */
  CHECK_RC(sd_check_firmware(ctl, "Kitchen", 0, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed == strlen(buf) + 1);

  CHECK_RC(sd_update_firmware(ctl, "Kitchen", 0, 7, false, 30.0), SD_INVALID_PARAMETER);
  CHECK_RC(sd_update_firmware(ctl, "Kitchen", 0, SD_FIRMWARE_STABLE, false, 30.0), SD_OK);
  CHECK_RC(sd_check_firmware(ctl, NULL, 1, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Current\":\"1.5.0\"") != NULL && strstr(buf, "\"Stable\":null") != NULL);
  CHECK_RC(sd_device(ctl, "Kitchen", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Firmware\":\"1.5.0\"") != NULL && strstr(buf, "\"Online\":true") != NULL);

  CHECK_RC(sd_update_firmware(ctl, "Hall", 0, SD_FIRMWARE_BETA, false, 0.0), SD_FIRMWARE);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "no newer beta version") != NULL && strstr(buf, "Hall (ID: 2)") != NULL);
  CHECK(strcmp(sd_result_name(SD_FIRMWARE), "SD_FIRMWARE") == 0);

  sd_close(&ctl);
  return sd_summary();
}

/* A program written against the 0.1.0 header: it uses only the names of that release (sd_get_device,
 * sd_get_device_component, sd_get_devices, sd_get_device_online, sd_get_input_state, sd_get_output_state,
 * sd_get_meter). It must compile against today's header with deprecation warnings only (the harness builds it
 * with -Werror -Wno-error=deprecated-declarations and checks the warnings name the replacements) and run
 * against today's shared library (libsmartdev.so.<ABI>), with the 0.1.0 meanings. */
#define _POSIX_C_SOURCE 200809L
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - Name: Garage\n"
    "      Model: ShellyPlus2PM\n"
    "      Simulate: true\n"
    "      Outputs: [{Name: Door Light}, {Name: Compressor}]\n"
    "      Meters: [{Name: Door Meter, MockRate: 1}, {Name: Compressor Meter}]\n";

int main(void) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_TEST_DIR"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();
  static char buf[65536];
  size_t needed = 0;

  /* sd_get_device (0.1.0: reads the device now and writes its object). */
  CHECK_RC(sd_get_device(ctl, "Garage", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Name\":\"Garage\"") != NULL && strstr(buf, "\"Online\":true") != NULL);
  CHECK(needed == strlen(buf) + 1);

  bool state = true, changed = false;
  CHECK_RC(sd_change_output(ctl, "Door Light", 0, true, &state, &changed), SD_OK);
  CHECK(state && changed);

  /* sd_get_devices = sd_devices. */
  CHECK_RC(sd_get_devices(ctl, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  CHECK_RC(sd_get_devices(ctl, buf, sizeof buf, &needed), SD_OK);
  CHECK(buf[0] == '[' && strstr(buf, "\"Name\":\"Garage\"") != NULL);

  /* sd_get_device_component = sd_component. */
  CHECK_RC(sd_get_device_component(ctl, SD_KIND_OUTPUT, "Door Light", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"State\":true") != NULL);

  /* The typed getters (last known state, no device I/O). */
  state = false;
  CHECK_RC(sd_get_output_state(ctl, "Door Light", 0, &state), SD_OK);
  CHECK(state);
  CHECK_RC(sd_get_output_state(ctl, "Compressor", 0, &state), SD_OK);
  CHECK(!state);
  CHECK_RC(sd_get_input_state(ctl, NULL, 1, &state), SD_OK);
  CHECK(!state);
  bool online = false;
  CHECK_RC(sd_get_device_online(ctl, "Garage", 0, &online), SD_OK);
  CHECK(online);
  struct sd_meter_reading m;
  CHECK_RC(sd_get_meter(ctl, "Compressor Meter", 0, &m), SD_OK);

  /* The old names check their arguments as the new ones do. */
  CHECK_RC(sd_get_output_state(ctl, "Nowhere", 0, &state), SD_NOT_FOUND);
  CHECK_RC(sd_get_meter(ctl, "Compressor Meter", 0, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_get_device_online(NULL, "Garage", 0, &online), SD_NULL_PARAMETER);

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

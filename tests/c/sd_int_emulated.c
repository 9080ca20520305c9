/* Emulated devices over real HTTP through the C API: switching, meters with validity flags, a device error,
 * a device that stops answering (SD_TIMEOUT) and an address where nothing listens (SD_DEVICE: the code covers
 * connection failures too). The harness passes the emulator's ports and a closed port. */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 0.3\n"
    "  RetryCount: 1\n"
    "  RetryDelay: 0.05\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Hall, Model: Shelly2PMG3, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Dead, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Locked, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Password: wrong}\n"
    "    - {Name: Gone, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n";

int main(void) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_EMU_PORT_0"), sd_env("SD_EMU_PORT_1"), sd_env("SD_EMU_PORT_2"),
           sd_env("SD_CLOSED_PORT"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  bool state = false, changed = false;
  CHECK_RC(sd_change_output(ctl, NULL, 2, true, &state, &changed), SD_OK);
  CHECK(state && changed);
  CHECK_RC(sd_change_output(ctl, NULL, 2, true, &state, &changed), SD_OK);
  CHECK(state && !changed);

  char buf[16384];
  size_t needed = 0;
  CHECK_RC(sd_read_device(ctl, "Hall", 0), SD_OK);
  CHECK_RC(sd_device(ctl, "Hall", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Protocol\":\"RPC\"") != NULL);
  struct sd_meter_reading m;
  CHECK_RC(sd_meter(ctl, NULL, 2, &m), SD_OK);
  CHECK(m.has_power && m.has_voltage && m.has_energy);
  CHECK(m.power > 0.0);

  /* The second device is blackholed by the harness: a timeout after the retries. */
  CHECK_RC(sd_read_device(ctl, "Dead", 0), SD_TIMEOUT);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "Dead (ID: 2)") != NULL && strstr(buf, "2 attempts") != NULL);
  bool online = true;
  CHECK_RC(sd_read_device_online(ctl, "Dead", 0, &online), SD_OK);
  CHECK(!online);
  /* A wrong password is its own kind of error, and the device stays online (it answered). */
  CHECK_RC(sd_read_device(ctl, "Locked", 0), SD_AUTH);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "wrong password") != NULL && strstr(buf, "Locked (ID: 3)") != NULL);
  CHECK_RC(sd_is_device_online(ctl, "Locked", 0, &online), SD_OK);
  CHECK(online);
  /* Nothing listens: the connection is refused, which is SD_DEVICE (as documented), not SD_OFFLINE. */
  CHECK_RC(sd_read_device(ctl, "Gone", 0), SD_DEVICE);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "connection refused") != NULL && strstr(buf, "Gone (ID: 4)") != NULL);
  /* *failures is written on failure too: the documented exception to "out-parameters only on SD_OK". */
  size_t failures = 0;
  CHECK_RC(sd_refresh_all(ctl, &failures), SD_TIMEOUT);
  CHECK(failures == 3);

  sd_close(&ctl);
  return sd_summary();
}

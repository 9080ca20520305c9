/* Energy history through the C API: a Pro EM's records as JSON in the caller's buffer, the size query and
 * sd_energy_history_last (no second device read), a meter without history (SD_NO_HISTORY), an empty range
 * (SD_INVALID_PARAMETER). The harness starts a Pro EM-50 on a manual clock moved two hours on, and a Plus 1PM;
 * SD_FROM is a whole hour with records after it. */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 2\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Channel: http\n"
    "  Devices:\n"
    "    - {Name: Mains, Model: ShellyProEM50, Hostname: 127.0.0.1, Port: %s, Meters: [{Name: House}, {Name: Car}]}\n"
    "    - {Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Meters: [{Name: Pump Meter}]}\n";

int main(void) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_EMU_PORT_0"), sd_env("SD_EMU_PORT_1"));
  long long from = atoll(sd_env("SD_FROM"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  size_t needed = 0;
  /* Size query: the device is read once and the document kept for this thread. */
  CHECK_RC(sd_energy_history(ctl, "House", 0, from, from + 600, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed > 100);
  char *doc = malloc(needed);
  CHECK_RC(sd_energy_history_last(doc, needed, &needed), SD_OK);
  CHECK(strstr(doc, "\"Meter\":\"House\"") != NULL);
  CHECK(strstr(doc, "\"Kind\":\"Record\"") != NULL);
  CHECK(strstr(doc, "\"Period\":60") != NULL);
  CHECK(strstr(doc, "\"Kind\":\"Gap\"") == NULL);
  free(doc);

  char buf[1024];
  CHECK_RC(sd_energy_history(ctl, "Pump Meter", 0, from, from + 600, buf, sizeof buf, &needed), SD_NO_HISTORY);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "keeps no history") != NULL);
  CHECK(strcmp(sd_result_name(SD_NO_HISTORY), "SD_NO_HISTORY") == 0);
  /* The failed read left no document behind. */
  CHECK_RC(sd_energy_history_last(buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK_RC(sd_energy_history(ctl, "House", 0, from, from, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_energy_history(ctl, "Nowhere", 0, from, from + 60, buf, sizeof buf, &needed), SD_NOT_FOUND);

  sd_close(&ctl);
  return sd_summary();
}

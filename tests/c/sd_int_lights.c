/* Lights through the C API: a simulated Plus RGBW PM in its rgbw profile and a simulated Duo Bulb Gen3 set with
 * sd_set_light (only the parts whose set_* flag is true), the light written back as JSON, refusals with their
 * messages (range, missing capability, empty change, a relay), and misuse (NULL pointers). */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Strip, Model: ShellyPlusRGBWPM, Profile: rgbw, Simulate: true, Outputs: [{Name: Shelf}]}\n"
    "    - {Name: Bulb, Model: ShellyDuoBulbG3, Simulate: true, Outputs: [{Name: Bulb Light}]}\n"
    "    - {Name: Plug, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pump}]}\n";

int main(void) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_TEST_DIR"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  char buf[4096];
  size_t needed = 0;
  sd_light_change ch;
  memset(&ch, 0, sizeof ch);
  ch.set_on = true;
  ch.on = true;
  ch.set_brightness = true;
  ch.brightness = 60.0;
  ch.set_rgb = true;
  ch.rgb[0] = 255;
  ch.rgb[1] = 120;
  ch.rgb[2] = 0;
  ch.set_white = true;
  ch.white = 20.0;
  CHECK_RC(sd_set_light(ctl, "Shelf", 0, &ch, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Brightness\":60.0") != NULL);
  CHECK(strstr(buf, "\"Rgb\":[255,120,0]") != NULL);
  CHECK(strstr(buf, "\"White\":20.0") != NULL);
  CHECK(strstr(buf, "\"ColorTemperature\":null") != NULL);
  CHECK(strstr(buf, "\"State\":true") != NULL);

  /* A tunable-white bulb: kelvin within its range; colour is a capability it lacks. */
  memset(&ch, 0, sizeof ch);
  ch.set_temperature = true;
  ch.temperature = 3000;
  CHECK_RC(sd_set_light(ctl, "Bulb Light", 0, &ch, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"ColorTemperature\":3000.0") != NULL);
  ch.temperature = 9000;
  CHECK_RC(sd_set_light(ctl, "Bulb Light", 0, &ch, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "use 2700 to 6500 K") != NULL);
  memset(&ch, 0, sizeof ch);
  ch.set_rgb = true;
  CHECK_RC(sd_set_light(ctl, "Bulb Light", 0, &ch, buf, sizeof buf, &needed), SD_UNSUPPORTED);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "ShellyDuoBulbG3") != NULL && strstr(buf, "RGB") != NULL);

  /* Out of range, nothing set, a relay. */
  memset(&ch, 0, sizeof ch);
  CHECK_RC(sd_set_light(ctl, "Shelf", 0, &ch, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  ch.set_brightness = true;
  ch.brightness = 101.0;
  CHECK_RC(sd_set_light(ctl, "Shelf", 0, &ch, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "0 to 100 %") != NULL);
  ch.brightness = 10.0;
  CHECK_RC(sd_set_light(ctl, "Pump", 0, &ch, buf, sizeof buf, &needed), SD_UNSUPPORTED);

  /* Misuse. */
  CHECK_RC(sd_set_light(NULL, "Shelf", 0, &ch, buf, sizeof buf, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_set_light(ctl, "Shelf", 0, NULL, buf, sizeof buf, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_set_light(ctl, "Shelf", 0, &ch, buf, sizeof buf, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_set_light(ctl, "Nope", 0, &ch, buf, sizeof buf, &needed), SD_NOT_FOUND);

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

/* Covers and sensors through the C API: a simulated Shelly 2PM Gen3 in cover profile (read, open, close,
 * position, stop; uncalibrated after a simulation-file edit), a simulated H&T Gen3 (built-in sensors, unknown
 * until the file has values), a device that was never reached (unknown states are SD_UNKNOWN, never false),
 * and misuse (NULL pointers, out-of-range positions, wrong kinds and names). */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  ResponseTimeout: 1\n"
    "  RetryCount: 0\n"
    "  Devices:\n"
    "    - {Name: Shutter, Model: Shelly2PMG3, Simulate: true, Profile: cover, Covers: [{Name: Blind}]}\n"
    "    - {Name: Bath, Model: ShellyHTG3, Simulate: true,\n"
    "       Sensors: [{Name: Bath Temperature}, {Name: Bath Humidity}]}\n"
    "    - {Name: Far, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Outputs: [{Name: Far Lamp}]}\n";

/* Replaces a simulation file with `text` (smartdev merges it into the device at the next read). */
static void write_file(const char *dir, const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

int main(void) {
  const char *dir = sd_env("SD_TEST_DIR");
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, dir, sd_env("SD_CLOSED_PORT"));

  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  char buf[16384];
  size_t needed = 0;
  struct sd_cover_reading c;
  memset(&c, 0, sizeof c);

  /* A new simulated cover starts closed and calibrated. */
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_CLOSED);
  CHECK(c.has_position && c.position == 0.0);
  CHECK(c.has_calibrated && c.calibrated);
  CHECK_RC(sd_component(ctl, SD_KIND_COVER, NULL, 1, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Name\":\"Blind\"") != NULL);
  CHECK(strstr(buf, "\"State\":\"closed\"") != NULL);
  CHECK(strstr(buf, "\"ObjectType\":\"cover\"") != NULL);
  CHECK_RC(sd_device(ctl, "Shutter", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Profile\":\"cover\"") != NULL);
  CHECK(strstr(buf, "\"Outputs\":[]") != NULL); /* in cover profile the 2PM has no outputs */

  /* Open, position, stop, close: a simulated cover moves at once. */
  CHECK_RC(sd_open_cover(ctl, "Blind", 0), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_OPEN && c.has_position && c.position == 100.0);
  CHECK_RC(sd_set_cover_position(ctl, NULL, 1, 40), SD_OK);
  CHECK_RC(sd_cover(ctl, NULL, 1, &c), SD_OK);
  CHECK(c.state == SD_COVER_STOPPED && c.has_position && c.position == 40.0);
  CHECK_RC(sd_stop_cover(ctl, "Blind", 0), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_STOPPED && c.position == 40.0);
  CHECK_RC(sd_close_cover(ctl, "Blind", 0), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_CLOSED && c.has_position && c.position == 0.0);
  CHECK_RC(sd_set_cover_position(ctl, "Blind", 0, 100), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_OPEN && c.position == 100.0);

  /* Out of range: refused before anything is sent; the cover stays where it is. */
  CHECK_RC(sd_set_cover_position(ctl, "Blind", 0, 101), SD_INVALID_PARAMETER);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "0 (closed) to 100 (open)") != NULL);
  CHECK_RC(sd_set_cover_position(ctl, "Blind", 0, 255), SD_INVALID_PARAMETER);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_OPEN && c.position == 100.0);

  /* Uncalibrated (edited in the simulation file): no position, and positions are refused; open/close work. */
  write_file(dir, "Shutter.json", "{\"Covers\": [{\"ComponentIndex\": 0, \"Calibrated\": false}]}");
  CHECK_RC(sd_read_device(ctl, "Shutter", 0), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.has_calibrated && !c.calibrated);
  CHECK(!c.has_position);
  CHECK_RC(sd_set_cover_position(ctl, "Blind", 0, 50), SD_UNSUPPORTED);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "not calibrated") != NULL);
  CHECK_RC(sd_close_cover(ctl, "Blind", 0), SD_OK);
  CHECK_RC(sd_cover(ctl, "Blind", 0, &c), SD_OK);
  CHECK(c.state == SD_COVER_CLOSED && !c.has_position);

  /* Built-in sensors of an H&T: unknown until the device reports a value, never 0. */
  double value = -1.0;
  CHECK_RC(sd_sensor_value(ctl, "Bath Temperature", 0, &value), SD_UNKNOWN);
  CHECK(value == -1.0); /* untouched on failure */
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "Bath Temperature") != NULL && strstr(buf, "unknown") != NULL);
  CHECK_RC(sd_component(ctl, SD_KIND_SENSOR, "Bath Humidity", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Value\":null") != NULL);
  CHECK(strstr(buf, "\"Quantity\":\"humidity\"") != NULL);
  CHECK(strstr(buf, "\"BuiltIn\":true") != NULL);
  write_file(dir, "Bath.json",
             "{\"Sensors\": [{\"ComponentIndex\": 0, \"Value\": 21.5}, {\"ComponentIndex\": 1, \"Value\": 48}]}");
  CHECK_RC(sd_read_device(ctl, "Bath", 0), SD_OK);
  CHECK_RC(sd_sensor_value(ctl, "Bath Temperature", 0, &value), SD_OK);
  CHECK(value == 21.5);
  CHECK_RC(sd_sensor_value(ctl, NULL, 2, &value), SD_OK);
  CHECK(value == 48.0);
  CHECK_RC(sd_component(ctl, SD_KIND_SENSOR, NULL, 2, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Unit\":\"%RH\"") != NULL);

  /* A device never reached: its output state is unknown (SD_UNKNOWN), never false. */
  bool online = true, state = true;
  CHECK_RC(sd_is_device_online(ctl, "Far", 0, &online), SD_OK);
  CHECK(!online);
  CHECK_RC(sd_output_state(ctl, "Far Lamp", 0, &state), SD_UNKNOWN);
  CHECK(state == true); /* untouched */
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "Far Lamp") != NULL);
  CHECK_RC(sd_input_state(ctl, NULL, 3, &state), SD_UNKNOWN); /* Far's input (the Shutter has inputs 1 and 2) */
  CHECK_RC(sd_component(ctl, SD_KIND_OUTPUT, "Far Lamp", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"State\":null") != NULL);
  CHECK(strcmp(sd_result_name(SD_UNKNOWN), "SD_UNKNOWN") == 0);

  /* Misuse. */
  CHECK_RC(sd_cover(NULL, "Blind", 0, &c), SD_NULL_PARAMETER);
  CHECK_RC(sd_cover(ctl, "Blind", 0, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_sensor_value(NULL, "Bath Temperature", 0, &value), SD_NULL_PARAMETER);
  CHECK_RC(sd_sensor_value(ctl, "Bath Temperature", 0, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_open_cover(NULL, "Blind", 0), SD_NULL_PARAMETER);
  CHECK_RC(sd_close_cover(NULL, "Blind", 0), SD_NULL_PARAMETER);
  CHECK_RC(sd_stop_cover(NULL, "Blind", 0), SD_NULL_PARAMETER);
  CHECK_RC(sd_set_cover_position(NULL, "Blind", 0, 10), SD_NULL_PARAMETER);
  CHECK_RC(sd_open_cover(ctl, "Nope", 0), SD_NOT_FOUND);
  CHECK_RC(sd_open_cover(ctl, NULL, 99), SD_NOT_FOUND);
  CHECK_RC(sd_cover(ctl, "Bath Temperature", 0, &c), SD_NOT_FOUND); /* a sensor is not a cover */
  CHECK_RC(sd_sensor_value(ctl, "Blind", 0, &value), SD_NOT_FOUND);
  CHECK_RC(sd_stop_cover(ctl, "\xc3\x28", 0), SD_INVALID_PARAMETER);
  CHECK_RC(sd_component(ctl, 6, NULL, 1, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  char tiny[4];
  CHECK_RC(sd_component(ctl, SD_KIND_COVER, "Blind", 0, tiny, sizeof tiny, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed > sizeof tiny);

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

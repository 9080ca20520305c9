/* sd_get_device, the spec's get_device: it reads the device (I/O) and writes its object; on failure it returns
 * the device's error code AND writes the object ("Online":false, "LastError"). Checked on a simulated device
 * (a file edit is seen only through the read; a file saying Online: false gives SD_OFFLINE with the object),
 * a healthy emulated device, an emulated device that never answers (SD_TIMEOUT) and a closed loopback port
 * (SD_DEVICE). A too-small buffer gives SD_INSUFFICIENT_SIZE with *needed after the read, and sd_device then
 * returns the object just read. sd_get_device_component is sd_component under the spec's name. */
#define _POSIX_C_SOURCE 200809L
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  ResponseTimeout: 1\n"
    "  RetryCount: 0\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Channel: http\n"
    "  Devices:\n"
    "    - {Name: Garden, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pool Pump}]}\n"
    "    - {Name: Hall, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Outputs: [{Name: Hall Light}]}\n"
    "    - {Name: Attic, Model: Shelly1PMG3, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n";

static sd_controller *ctl;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

/* sd_get_device into a large buffer; checks that *needed is the object's size when it was written. */
static enum sd_result get_device(const char *name, char *buf, size_t len) {
  size_t needed = 0;
  memset(buf, 'x', len);
  enum sd_result rc = sd_get_device(ctl, name, 0, buf, len, &needed);
  if (rc == SD_OK || (rc >= 300 && rc < 400)) CHECK(needed == strlen(buf) + 1);
  return rc;
}

int main(void) {
  const char *dir = sd_env("SD_TEST_DIR");
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, dir, sd_env("SD_EMU_PORT_0"), sd_env("SD_EMU_PORT_1"),
           sd_env("SD_CLOSED_PORT"));
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();
  static char buf[65536];
  static char other[65536];
  size_t needed = 0;

  /* Simulated: the object as read, SD_OK. */
  CHECK_RC(get_device("Garden", buf, sizeof buf), SD_OK);
  CHECK(strstr(buf, "\"Name\":\"Garden\"") != NULL);
  CHECK(strstr(buf, "\"Online\":true") != NULL);
  CHECK(strstr(buf, "\"State\":false") != NULL);

  /* It reads the device: a file edit shows in sd_get_device, not in sd_device before it. */
  char path[1024];
  snprintf(path, sizeof path, "%s/Garden.json", dir);
  write_file(path, "{\"Outputs\": [{\"ComponentIndex\": 0, \"State\": true}]}");
  CHECK_RC(sd_device(ctl, "Garden", 0, other, sizeof other, &needed), SD_OK);
  CHECK(strstr(other, "\"State\":false") != NULL); /* last known: not read yet */
  CHECK_RC(get_device("Garden", buf, sizeof buf), SD_OK);
  CHECK(strstr(buf, "\"State\":true") != NULL);
  bool on = false;
  CHECK_RC(sd_output_state(ctl, "Pool Pump", 0, &on), SD_OK);
  CHECK(on);

  /* A too-small buffer: the device is read once, SD_INSUFFICIENT_SIZE with *needed; sd_device then gives the
   * object just read (no second read). */
  write_file(path, "{\"Outputs\": [{\"ComponentIndex\": 0, \"State\": false}]}");
  needed = 0;
  CHECK_RC(sd_get_device(ctl, "Garden", 0, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed > 1);
  char msg[1024];
  size_t msg_needed = 0;
  CHECK_RC(sd_last_error_message(msg, sizeof msg, &msg_needed), SD_OK);
  CHECK(strstr(msg, "call sd_device") != NULL && strstr(msg, "the device was read") != NULL);
  char *exact = malloc(needed);
  CHECK(exact != NULL);
  if (exact != NULL) {
    size_t again = 0;
    CHECK_RC(sd_device(ctl, "Garden", 0, exact, needed, &again), SD_OK);
    CHECK(again == needed);
    CHECK(strstr(exact, "\"State\":false") != NULL); /* what the size query read */
    free(exact);
  }

  /* A simulated device whose file says Online: false: SD_OFFLINE and its object. */
  write_file(path, "{\"Online\": false}");
  CHECK_RC(get_device("Garden", buf, sizeof buf), SD_OFFLINE);
  CHECK(strstr(buf, "\"Name\":\"Garden\"") != NULL && strstr(buf, "\"Online\":false") != NULL);
  CHECK_RC(sd_last_error_message(msg, sizeof msg, &msg_needed), SD_OK);
  CHECK(strstr(msg, "Garden") != NULL);
  write_file(path, "{\"Online\": true}");
  CHECK_RC(get_device("Garden", buf, sizeof buf), SD_OK);
  CHECK(strstr(buf, "\"Online\":true") != NULL);

  /* A healthy emulated device. */
  CHECK_RC(get_device("Hall", buf, sizeof buf), SD_OK);
  CHECK(strstr(buf, "\"Online\":true") != NULL && strstr(buf, "\"LastError\":null") != NULL);

  /* An emulated device that never answers: SD_TIMEOUT and its object. */
  CHECK_RC(get_device("Attic", buf, sizeof buf), SD_TIMEOUT);
  CHECK(strstr(buf, "\"Name\":\"Attic\"") != NULL);
  CHECK(strstr(buf, "\"Online\":false") != NULL);
  CHECK(strstr(buf, "\"LastError\":\"") != NULL && strstr(buf, "timed out") != NULL);
  CHECK_RC(sd_last_error_message(msg, sizeof msg, &msg_needed), SD_OK);
  CHECK(strstr(msg, "Attic") != NULL && strstr(msg, "timed out") != NULL);

  /* A closed port (connection refused): SD_DEVICE and its object, by ID too. */
  CHECK_RC(sd_get_device(ctl, NULL, 4, buf, sizeof buf, &needed), SD_DEVICE);
  CHECK(needed == strlen(buf) + 1);
  CHECK(strstr(buf, "\"Name\":\"Shed\"") != NULL);
  CHECK(strstr(buf, "\"Online\":false") != NULL);
  CHECK(strstr(buf, "\"LastError\":\"GET /shelly: connection refused") != NULL);
  CHECK(strstr(buf, "\"State\":null") != NULL); /* never reported: unknown, not off */
  bool online = true;
  CHECK_RC(sd_is_device_online(ctl, "Shed", 0, &online), SD_OK);
  CHECK(!online);

  /* Too small while the read fails: SD_INSUFFICIENT_SIZE, the message says how the read went. */
  CHECK_RC(sd_get_device(ctl, "Shed", 0, buf, 8, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed > 8);
  CHECK_RC(sd_last_error_message(msg, sizeof msg, &msg_needed), SD_OK);
  CHECK(strstr(msg, "the read failed (SD_DEVICE") != NULL && strstr(msg, "call sd_device") != NULL);
  CHECK_RC(sd_device(ctl, "Shed", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Online\":false") != NULL && strstr(buf, "connection refused") != NULL);

  /* Arguments: nothing is written, no device is read. */
  memset(buf, 'x', 16);
  CHECK_RC(sd_get_device(ctl, "Nowhere", 0, buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK(buf[0] == 'x');
  CHECK_RC(sd_get_device(ctl, "Garden", 0, buf, sizeof buf, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_get_device(ctl, "Garden", 0, NULL, 10, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_get_device(NULL, "Garden", 0, buf, sizeof buf, &needed), SD_NULL_PARAMETER);
  CHECK(buf[0] == 'x');

  /* sd_get_device_component is sd_component (last known, no I/O). */
  CHECK_RC(sd_get_device_component(ctl, SD_KIND_OUTPUT, "Pool Pump", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK_RC(sd_component(ctl, SD_KIND_OUTPUT, "Pool Pump", 0, other, sizeof other, &needed), SD_OK);
  CHECK(strcmp(buf, other) == 0);
  CHECK(strstr(buf, "\"Name\":\"Pool Pump\"") != NULL);
  CHECK_RC(sd_get_device_component(ctl, SD_KIND_OUTPUT, "Hall Light", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK_RC(sd_get_device_component(ctl, 99, "Hall Light", 0, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_get_device_component(ctl, SD_KIND_OUTPUT, "Nowhere", 0, buf, sizeof buf, &needed), SD_NOT_FOUND);

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

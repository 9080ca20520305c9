/* Misuse suite: NULL everywhere, bad UTF-8, tiny buffers, unknown identities, closing twice. Nothing may
 * crash; every call returns a clear code. */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Box, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Lamp}]}\n";

/* A log callback that must not run (the test fails if it does). */
static void never_called(void *user, int level, const char *message) {
  (void)user;
  (void)level;
  (void)message;
  sd_failed++;
}

int main(void) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_TEST_DIR"));

  sd_controller *ctl = NULL;
  char buf[4096];
  size_t needed = 0;
  bool state = false, changed = false;

  /* NULL arguments. */
  CHECK_RC(sd_open(NULL, NULL, &ctl), SD_NULL_PARAMETER);
  CHECK_RC(sd_open_yaml(yaml, NULL, NULL), SD_NULL_PARAMETER);
  CHECK(ctl == NULL);
  CHECK_RC(sd_device(NULL, "Box", 0, buf, sizeof buf, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_change_output(NULL, "Lamp", 0, true, &state, &changed), SD_NULL_PARAMETER);
  CHECK_RC(sd_pull_event(NULL, buf, sizeof buf, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_open_options_init(NULL), SD_NULL_PARAMETER);
  CHECK(sd_wake_fd(NULL) == -1);
  CHECK_RC(sd_wake_clear(NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_refresh_all(NULL, NULL), SD_NULL_PARAMETER);
  size_t untouched = 7;
  CHECK_RC(sd_refresh_all(NULL, &untouched), SD_NULL_PARAMETER);
  CHECK(untouched == 7); /* a refused call writes no out-parameter, *failures included */
  sd_close(NULL);

  /* Bad YAML, bad UTF-8. */
  CHECK_RC(sd_open_yaml("SmartDevices: [", NULL, &ctl), SD_CONFIG);
  CHECK_RC(sd_open_yaml("\xff\xfe", NULL, &ctl), SD_INVALID_PARAMETER);
  CHECK_RC(sd_open("/no/such/file.yaml", NULL, &ctl), SD_CONFIG);
  CHECK(ctl == NULL);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "/no/such/file.yaml") != NULL);

  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  CHECK(ctl != NULL);

  /* NULL out-parameters with a valid controller. */
  CHECK_RC(sd_change_output(ctl, "Lamp", 0, true, NULL, &changed), SD_NULL_PARAMETER);
  CHECK_RC(sd_change_output(ctl, "Lamp", 0, true, &state, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_device(ctl, "Box", 0, buf, sizeof buf, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_device(ctl, "Box", 0, NULL, 10, &needed), SD_NULL_PARAMETER);
  CHECK_RC(sd_meter(ctl, NULL, 1, NULL), SD_NULL_PARAMETER);
  CHECK_RC(sd_print_model_library(ctl, NULL, NULL, buf, sizeof buf, &needed), SD_NULL_PARAMETER);

  /* Invalid UTF-8 names, unknown kinds and modes. */
  CHECK_RC(sd_device(ctl, "\xc3\x28", 0, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_component(ctl, 42, NULL, 1, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_component(ctl, -1, NULL, 1, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_print_model_library(ctl, "verbose", NULL, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  /* Discovery: out-of-range timeouts are refused before any network use; nothing to repeat yet. */
  CHECK_RC(sd_discover(NULL, 0, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_discover(ctl, 600001, buf, sizeof buf, &needed), SD_INVALID_PARAMETER);
  CHECK_RC(sd_discovered(buf, sizeof buf, &needed), SD_NOT_FOUND);

  /* Unknown identities. */
  CHECK_RC(sd_device(ctl, "Nope", 0, buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK_RC(sd_device(ctl, NULL, 999, buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK_RC(sd_change_output(ctl, NULL, -5, true, &state, &changed), SD_NOT_FOUND);
  CHECK_RC(sd_output_state(ctl, "Nope", 0, &state), SD_NOT_FOUND);
  CHECK_RC(sd_print_model_library(ctl, "brief", "NoSuchModel", buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "NoSuchModel") != NULL);
  /* This device has no covers or sensors. */
  struct sd_cover_reading cover;
  double value = 0.0;
  CHECK_RC(sd_cover(ctl, NULL, 1, &cover), SD_NOT_FOUND);
  CHECK_RC(sd_sensor_value(ctl, NULL, 1, &value), SD_NOT_FOUND);
  CHECK_RC(sd_open_cover(ctl, "Lamp", 0), SD_NOT_FOUND);
  CHECK_RC(sd_set_cover_position(ctl, NULL, 1, 200), SD_INVALID_PARAMETER); /* the range is checked first */

  /* Tiny buffers: the size needed is reported and a second call succeeds. */
  char tiny[4];
  CHECK_RC(sd_devices(ctl, tiny, sizeof tiny, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed > sizeof tiny);
  size_t want = needed;
  CHECK_RC(sd_devices(ctl, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  CHECK(needed == want);
  char *big = malloc(want);
  CHECK_RC(sd_devices(ctl, big, want, &needed), SD_OK);
  CHECK(strlen(big) + 1 == want);
  free(big);
  /* The message of a failure survives a too-small request for it. */
  CHECK_RC(sd_device(ctl, "Nope", 0, buf, sizeof buf, &needed), SD_NOT_FOUND);
  CHECK_RC(sd_last_error_message(tiny, sizeof tiny, &needed), SD_INSUFFICIENT_SIZE);
  CHECK_RC(sd_last_error_message(buf, needed, &needed), SD_OK);
  CHECK(strstr(buf, "Nope") != NULL);
  /* Out-parameters stay untouched on failure. */
  state = true;
  CHECK_RC(sd_output_state(ctl, "Nope", 0, &state), SD_NOT_FOUND);
  CHECK(state == true);

  /* No events queued; the wake descriptor exists and a zero-time wait times out. */
  CHECK_RC(sd_pull_event(ctl, buf, sizeof buf, &needed), SD_NO_EVENT);
  CHECK(sd_wake_fd(ctl) >= 0);
  CHECK_RC(sd_wake_wait(ctl, 0), SD_TIMEOUT);

  /* Result names. */
  CHECK(strcmp(sd_result_name(SD_TIMEOUT), "SD_TIMEOUT") == 0);
  CHECK(strcmp(sd_result_name(SD_UNKNOWN), "SD_UNKNOWN") == 0);
  CHECK(strcmp(sd_result_name(12345), "SD_UNRECOGNISED") == 0); /* not a code: not mistaken for SD_UNKNOWN */
  CHECK(strcmp(sd_version(), SMARTDEV_VERSION) == 0);

  /* Closing twice through the same variable is harmless. */
  sd_close(&ctl);
  CHECK(ctl == NULL);
  sd_close(&ctl);
  sd_close(NULL);

  /* Another logger owns the process (here the Files block of a controller opened without a callback): a log
   * callback could never be called, so asking for one fails with SD_LOGGER naming the cause. */
  char with_files[2048];
  snprintf(with_files, sizeof with_files,
           "%sFiles: {LogfileName: '%s/sd.log', LogfileVerbosity: detailed, ConsoleVerbosity: none}\n", yaml,
           sd_env("SD_TEST_DIR"));
  CHECK_RC(sd_open_yaml(with_files, NULL, &ctl), SD_OK);
  sd_close(&ctl);
  struct sd_open_options opts;
  CHECK_RC(sd_open_options_init(&opts), SD_OK);
  opts.log_callback = never_called;
  CHECK_RC(sd_open_yaml(yaml, &opts, &ctl), SD_LOGGER);
  CHECK(ctl == NULL);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "another logger") != NULL);
  CHECK_RC(sd_set_log_callback(never_called, NULL, SD_LOG_INFO), SD_LOGGER);
  return sd_summary();
}

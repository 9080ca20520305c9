/* Firmware through the C API: sd_check_firmware's JSON (unknown is null), an update followed through the
 * device's restart to its new version, nothing on offer (SD_FIRMWARE), a bad channel, and
 * sd_update_firmware_progress: its steps in order on the calling thread (the download's percents as the device
 * tells them over its push channel), and a NULL callback. The harness
 * starts Gen2+ devices running 1.4.4 with 1.5.0 on offer (Kitchen, Attic with a long restart, Cellar), and one
 * with nothing on offer (Hall). */
#include "sd_test.h"

/* What the progress callback saw. */
typedef struct {
  int count;
  int steps[16];
  char from[16][32]; /* "(null)" for NULL */
  char to[16][32];
  int percent[16];
  int off_thread; /* calls not on the thread that called the update */
} progress_log;

/* Set on the thread that calls the update: the callback must run there. */
static _Thread_local int updating_here = 0;

static void copy_version(char *dst, const char *v) {
  snprintf(dst, 32, "%s", v == NULL ? "(null)" : v);
}

static void on_progress(void *user_data, int step, const char *from, const char *to, int percent) {
  progress_log *log = user_data;
  if (!updating_here) log->off_thread++;
  if (log->count < 16) {
    log->steps[log->count] = step;
    log->percent[log->count] = percent;
    copy_version(log->from[log->count], from);
    copy_version(log->to[log->count], to);
  }
  log->count++;
}

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 0.4\n"
    "  RetryCount: 2\n"
    "  RetryDelay: 0.05\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Hall, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Attic, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Cellar, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n";

int main(void) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_EMU_PORT_0"), sd_env("SD_EMU_PORT_1"), sd_env("SD_EMU_PORT_2"),
           sd_env("SD_EMU_PORT_3"));
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

  /* Progress: Started (from 1.4.4 to 1.5.0), Downloading with each new percent the device tells over its
   * WebSocket (and maybe once with -1, from a look), Restarting, Back with 1.5.0, in that order. */
  progress_log seen = {0};
  updating_here = 1;
  CHECK_RC(sd_update_firmware_progress(ctl, "Attic", 0, SD_FIRMWARE_STABLE, false, 30.0, on_progress, &seen),
           SD_OK);
  updating_here = 0;
  CHECK(seen.off_thread == 0);
  CHECK(seen.count >= 4 && seen.count <= 16);
  if (seen.count >= 4 && seen.count <= 16) {
    int last = seen.count - 1;
    CHECK(seen.steps[0] == SD_UPDATE_STARTED);
    CHECK(strcmp(seen.from[0], "1.4.4") == 0 && strcmp(seen.to[0], "1.5.0") == 0);
    CHECK(seen.percent[0] == -1 && seen.percent[last - 1] == -1 && seen.percent[last] == -1);
    int known = 0, highest = -1;
    for (int i = 1; i < last - 1; i++) {
      CHECK(seen.steps[i] == SD_UPDATE_DOWNLOADING);
      CHECK(seen.percent[i] >= -1 && seen.percent[i] <= 100);
      if (seen.percent[i] >= 0) {
        CHECK(seen.percent[i] > highest); /* each told once, rising */
        highest = seen.percent[i];
        known++;
      }
    }
    CHECK(known >= 1);
    CHECK(seen.steps[last - 1] == SD_UPDATE_RESTARTING);
    CHECK(strcmp(seen.from[last - 1], "(null)") == 0 && strcmp(seen.to[last - 1], "(null)") == 0);
    CHECK(seen.steps[last] == SD_UPDATE_BACK);
    CHECK(strcmp(seen.from[last], "(null)") == 0 && strcmp(seen.to[last], "1.5.0") == 0);
  } else {
    fprintf(stderr, "progress: %d steps, first %d\n", seen.count, seen.steps[0]);
  }
  CHECK_RC(sd_check_firmware(ctl, "Attic", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Current\":\"1.5.0\"") != NULL);

  /* A NULL callback: sd_update_firmware. A refused update calls nothing. */
  CHECK_RC(sd_update_firmware_progress(ctl, "Cellar", 0, SD_FIRMWARE_STABLE, false, 30.0, NULL, NULL), SD_OK);
  CHECK_RC(sd_check_firmware(ctl, "Cellar", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Current\":\"1.5.0\"") != NULL);
  progress_log refused = {0};
  CHECK_RC(sd_update_firmware_progress(ctl, "Hall", 0, SD_FIRMWARE_STABLE, false, 0.0, on_progress, &refused),
           SD_FIRMWARE);
  CHECK_RC(sd_update_firmware_progress(ctl, "Hall", 0, 7, false, 0.0, on_progress, &refused),
           SD_INVALID_PARAMETER);
  CHECK(refused.count == 0);

  sd_close(&ctl);
  return sd_summary();
}

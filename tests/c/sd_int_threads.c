/* One controller used from eight threads at once: every toggle lands exactly once. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "sd_test.h"

#define THREADS 8
#define TOGGLES 50

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: A, Model: Shelly2PMG3, Simulate: true}\n"
    "    - {Name: B, Model: Shelly2PMG3, Simulate: true}\n";

static sd_controller *ctl;
static int errors = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  long t = (long)arg;
  for (int i = 0; i < TOGGLES; i++) {
    int64_t output = 1 + (t + i) % 4; /* outputs 1..4 */
    bool state, changed;
    if (sd_toggle_output(ctl, NULL, output, &state, &changed) != SD_OK || !changed) {
      pthread_mutex_lock(&lock);
      errors++;
      pthread_mutex_unlock(&lock);
    }
  }
  return NULL;
}

int main(void) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_TEST_DIR"));
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  CHECK(errors == 0);
  /* Each output was toggled THREADS * TOGGLES / 4 = 100 times: an even number, so all are off again. */
  for (int64_t output = 1; output <= 4; output++) {
    bool state = true;
    CHECK_RC(sd_output_state(ctl, NULL, output, &state), SD_OK);
    CHECK(!state);
  }
  sd_close(&ctl);
  return sd_summary();
}

/* Log callbacks, written from the header's lifetime rules alone:
 * - two controllers with their own callbacks: each callback gets its own controller's records only, also while
 *   both work at the same time;
 * - after sd_close returns (or after an sd_open that failed) the callback's `user` is freed at once: a later
 *   call is a heap-use-after-free under AddressSanitizer, and is counted through a list of freed pointers
 *   without it;
 * - the process-wide callback (sd_set_log_callback) gets the records of controllers without their own, never
 *   those of a controller with one, and nothing once it is removed. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: %s, Model: ShellyPlus1PM, Simulate: true}\n";

/* What one callback saw. `own` is the device name only its controller has, `foreign` another's. */
typedef struct {
  const char *own;
  const char *foreign;
  atomic_int calls;
  atomic_int own_hits;
  atomic_int foreign_hits;
} sink;

/* `user` pointers already freed; a call with one of them is counted before the pointer is read. Without ASan
 * an address can be reused by a later sink, so this list catches calls after free only until then; ASan's
 * quarantine keeps freed addresses out of use and catches every one. */
static _Atomic(void *) freed[8];
static atomic_int nfreed;
static atomic_int calls_after_free;

static void on_log(void *user, int level, const char *message) {
  (void)level;
  int n = atomic_load(&nfreed);
  for (int i = 0; i < n; i++) {
    if (atomic_load(&freed[i]) == user) atomic_fetch_add(&calls_after_free, 1);
  }
  sink *s = user; /* under ASan, reading a freed sink aborts here */
  atomic_fetch_add(&s->calls, 1);
  if (strstr(message, s->own) != NULL) atomic_fetch_add(&s->own_hits, 1);
  if (s->foreign != NULL && strstr(message, s->foreign) != NULL) atomic_fetch_add(&s->foreign_hits, 1);
}

static sink *new_sink(const char *own, const char *foreign) {
  sink *s = calloc(1, sizeof *s);
  if (s == NULL) exit(2);
  /* malloc may hand out a freed address again (not under ASan): it is a live sink now. */
  for (int i = 0; i < atomic_load(&nfreed); i++) {
    if (atomic_load(&freed[i]) == (void *)s) atomic_store(&freed[i], NULL);
  }
  s->own = own;
  s->foreign = foreign;
  return s;
}

/* Frees a sink, remembering its address. */
static void free_sink(sink *s) {
  int i = atomic_load(&nfreed);
  if (i < 8) {
    atomic_store(&freed[i], (void *)s);
    atomic_store(&nfreed, i + 1);
  }
  free(s);
}

static const char *dir;

static sd_controller *open_one(const char *device, sink *s) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, CONFIG, dir, device);
  struct sd_open_options opts;
  CHECK_RC(sd_open_options_init(&opts), SD_OK);
  if (s != NULL) {
    opts.log_callback = on_log;
    opts.log_user = s;
    opts.log_level = SD_LOG_INFO;
  }
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, &opts, &ctl), SD_OK);
  return ctl;
}

static void set_online(const char *device, bool online) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.json", dir, device);
  FILE *f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "{\"Online\": %s}", online ? "true" : "false");
  fclose(f);
}

/* Takes the device offline and back through its simulation file: two logged transitions on its worker. */
static void flip(sd_controller *ctl, const char *device) {
  set_online(device, false);
  (void)sd_refresh_all(ctl, NULL);
  set_online(device, true);
  (void)sd_refresh_all(ctl, NULL);
}

struct job {
  sd_controller *ctl;
  const char *device;
};

static void *flip_thrice(void *arg) {
  struct job *j = arg;
  for (int i = 0; i < 3; i++) flip(j->ctl, j->device);
  return NULL;
}

int main(void) {
  dir = sd_env("SD_TEST_DIR");

  /* Two controllers, two callbacks, working at the same time. */
  sink *a = new_sink("AlphaBox", "BravoBox");
  sink *b = new_sink("BravoBox", "AlphaBox");
  sd_controller *ca = open_one("AlphaBox", a);
  sd_controller *cb = open_one("BravoBox", b);
  if (ca == NULL || cb == NULL) return sd_summary();
  pthread_t ta, tb;
  struct job ja = {ca, "AlphaBox"}, jb = {cb, "BravoBox"};
  CHECK(pthread_create(&ta, NULL, flip_thrice, &ja) == 0);
  CHECK(pthread_create(&tb, NULL, flip_thrice, &jb) == 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK(atomic_load(&a->own_hits) >= 6);
  CHECK(atomic_load(&b->own_hits) >= 6);
  CHECK(atomic_load(&a->foreign_hits) == 0);
  CHECK(atomic_load(&b->foreign_hits) == 0);

  /* Close A and free its user pointer at once; B goes on logging to its own callback only. */
  sd_close(&ca);
  free_sink(a);
  int before = atomic_load(&b->own_hits);
  flip(cb, "BravoBox");
  CHECK(atomic_load(&b->own_hits) >= before + 2);
  CHECK(atomic_load(&calls_after_free) == 0);

  /* Close B too: a third controller without a callback calls nobody's. */
  sd_close(&cb);
  free_sink(b);
  sd_controller *cc = open_one("CharlieBox", NULL);
  if (cc != NULL) flip(cc, "CharlieBox");
  sd_close(&cc);
  CHECK(atomic_load(&calls_after_free) == 0);

  /* A failed open leaves nothing installed. */
  sink *f = new_sink("DeltaBox", NULL);
  struct sd_open_options opts;
  CHECK_RC(sd_open_options_init(&opts), SD_OK);
  opts.log_callback = on_log;
  opts.log_user = f;
  sd_controller *bad = NULL;
  CHECK_RC(sd_open_yaml("SmartDevices: [", &opts, &bad), SD_CONFIG);
  CHECK(bad == NULL);
  free_sink(f);
  sd_controller *cd = open_one("DeltaBox", NULL);
  if (cd != NULL) flip(cd, "DeltaBox");
  sd_close(&cd);
  CHECK(atomic_load(&calls_after_free) == 0);

  /* The process-wide callback: records of controllers without their own callback, and only those. */
  sink *g = new_sink("FoxtrotBox", "EchoBox");
  CHECK_RC(sd_set_log_callback(on_log, g, SD_LOG_INFO), SD_OK);
  sink *e = new_sink("EchoBox", "FoxtrotBox");
  sd_controller *ce = open_one("EchoBox", e);
  sd_controller *cf = open_one("FoxtrotBox", NULL);
  if (ce != NULL && cf != NULL) {
    flip(ce, "EchoBox");
    flip(cf, "FoxtrotBox");
  }
  CHECK(atomic_load(&g->own_hits) >= 2);
  CHECK(atomic_load(&g->foreign_hits) == 0);
  CHECK(atomic_load(&e->own_hits) >= 2);
  CHECK(atomic_load(&e->foreign_hits) == 0);
  sd_close(&ce);
  free_sink(e);
  /* Removing the process-wide callback: from then on it is never called, so its user may be freed. */
  CHECK_RC(sd_set_log_callback(NULL, NULL, 0), SD_OK);
  free_sink(g);
  if (cf != NULL) flip(cf, "FoxtrotBox");
  sd_close(&cf);
  CHECK(atomic_load(&calls_after_free) == 0);
  return sd_summary();
}

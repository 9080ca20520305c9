/* A device that cannot be reached still has its object through the C API: sd_device gives "Online":false and
 * its "LastError" after open, after a failed sd_read_device, and while another thread waits on the device;
 * the size query (NULL, 0) answers at once, without device I/O. "Shed" is a closed port (connection refused);
 * "Attic" is a socket opened here that accepts connections and never answers (timeouts). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 1.5\n"
    "  RetryCount: 0\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  Devices:\n"
    "    - {Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}\n"
    "    - {Name: Attic, Model: Shelly1PMG3, Hostname: 127.0.0.1, Port: %d}\n";

static sd_controller *ctl;
static enum sd_result attic_read = SD_OK;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A listening socket on 127.0.0.1 that is never accepted from: the kernel completes the handshake, nobody
 * answers. Returns its port (the descriptor stays open for the program's life). */
static int silent_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &n) != 0) {
    fprintf(stderr, "cannot open a local socket\n");
    exit(2);
  }
  return ntohs(a.sin_port);
}

static void *read_attic(void *arg) {
  (void)arg;
  attic_read = sd_read_device(ctl, "Attic", 0);
  return NULL;
}

/* sd_device for `name` with a buffer of exactly the size the size query asked for. Returns the JSON (malloc'd)
 * and the seconds the size query took. */
static char *device_json(const char *name, double *query_s) {
  size_t needed = 0;
  double t0 = now();
  CHECK_RC(sd_device(ctl, name, 0, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  *query_s = now() - t0;
  CHECK(needed > 1);
  char *buf = malloc(needed);
  size_t again = 0;
  CHECK(buf != NULL);
  if (buf == NULL) return NULL;
  CHECK_RC(sd_device(ctl, name, 0, buf, needed, &again), SD_OK);
  CHECK(again == needed);
  return buf;
}

int main(void) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml, CONFIG, sd_env("SD_CLOSED_PORT"), silent_port());
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  /* After open: the first contact failed, the object says so. */
  double query_s = 0;
  char *shed = device_json("Shed", &query_s);
  if (shed != NULL) {
    CHECK(strstr(shed, "\"Name\":\"Shed\"") != NULL);
    CHECK(strstr(shed, "\"Model\":\"ShellyPlus1PM\"") != NULL);
    CHECK(strstr(shed, "\"Online\":false") != NULL);
    CHECK(strstr(shed, "\"LastError\":\"GET /shelly: connection refused") != NULL);
    CHECK(strstr(shed, "\"State\":null") != NULL); /* never reported: unknown, not off */
    free(shed);
  }
  CHECK(query_s < 0.5);
  bool online = true;
  CHECK_RC(sd_is_device_online(ctl, "Shed", 0, &online), SD_OK);
  CHECK(!online);

  /* A read fails with its error; the object stays available. */
  CHECK_RC(sd_read_device(ctl, NULL, 1), SD_DEVICE);
  shed = device_json("Shed", &query_s);
  if (shed != NULL) {
    CHECK(strstr(shed, "\"Online\":false") != NULL && strstr(shed, "connection refused") != NULL);
    free(shed);
  }

  /* While another thread waits on the silent device, its object and size query answer at once. */
  pthread_t reader;
  CHECK(pthread_create(&reader, NULL, read_attic, NULL) == 0);
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  double t0 = now();
  char *attic = device_json("Attic", &query_s);
  double whole_s = now() - t0;
  CHECK(query_s < 0.5);
  CHECK(whole_s < 0.5);
  if (attic != NULL) {
    CHECK(strstr(attic, "\"Online\":false") != NULL);
    CHECK(strstr(attic, "timed out") != NULL); /* from the open's first contact */
    free(attic);
  }
  size_t needed = 0;
  CHECK_RC(sd_devices(ctl, NULL, 0, &needed), SD_INSUFFICIENT_SIZE);
  pthread_join(reader, NULL);
  CHECK(attic_read == SD_TIMEOUT);
  attic = device_json("Attic", &query_s);
  if (attic != NULL) {
    CHECK(strstr(attic, "\"Online\":false") != NULL && strstr(attic, "timed out after 1 attempt") != NULL);
    free(attic);
  }

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

/* Simulated devices through the C API: open with a schema extension, status, switching with did_change,
 * simulation-file edits seen after a refresh, custom attributes in JSON, typed getters, and a webhook that
 * makes the wake descriptor readable for poll(). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  SimulationFileFolder: %s\n"
    "  RefreshInterval: 0\n"
    "  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n"
    "  Devices:\n"
    "    - Name: Garage\n"
    "      Model: ShellyPlus2PM\n"
    "      Simulate: true\n"
    "      Outputs: [{Name: Door Light, Group: Lights}, {Name: Compressor, Group: Tools}]\n"
    "      Meters: [{Name: Door Meter, MockRate: 1}, {Name: Compressor Meter}]\n";

static const char *SCHEMA =
    "SmartDevices:\n"
    "  type: dict\n"
    "  schema:\n"
    "    Devices:\n"
    "      type: list\n"
    "      schema:\n"
    "        type: dict\n"
    "        schema:\n"
    "          Outputs:\n"
    "            type: list\n"
    "            schema:\n"
    "              type: dict\n"
    "              schema:\n"
    "                Group: {type: string}\n";

static int logged = 0;
static void on_log(void *user, int level, const char *message) {
  (void)level;
  (void)message;
  *(int *)user += 1;
}

/* Sends one GET to the listener at "ip:port"; returns the HTTP status. */
static int send_hook(const char *addr, const char *target) {
  char host[64];
  snprintf(host, sizeof host, "%s", addr);
  char *colon = strrchr(host, ':');
  if (colon == NULL) return -1;
  *colon = '\0';
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)atoi(colon + 1));
  inet_pton(AF_INET, host, &sa.sin_addr);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) return -1;
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target);
  if (write(s, req, (size_t)n) != n) return -1;
  char answer[512] = {0};
  ssize_t got = read(s, answer, sizeof answer - 1);
  close(s);
  if (got < 12) return -1;
  return atoi(answer + 9);
}

int main(void) {
  const char *dir = sd_env("SD_TEST_DIR");
  char yaml[2048];
  snprintf(yaml, sizeof yaml, CONFIG, dir);

  struct sd_open_options opts;
  CHECK_RC(sd_open_options_init(&opts), SD_OK);
  opts.schema_yaml = SCHEMA;
  opts.log_callback = on_log;
  opts.log_user = &logged;
  opts.log_level = SD_LOG_INFO;

  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, &opts, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();
  CHECK(logged > 0);

  char buf[16384];
  size_t needed = 0;
  CHECK_RC(sd_read_device(ctl, "Garage", 0), SD_OK);
  CHECK_RC(sd_device(ctl, "Garage", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Name\":\"Garage\"") != NULL);
  CHECK(strstr(buf, "\"Online\":true") != NULL);
  CHECK(strstr(buf, "\"Group\":\"Lights\"") != NULL);
  CHECK_RC(sd_component(ctl, SD_KIND_OUTPUT, "Compressor", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Group\":\"Tools\"") != NULL);
  CHECK(strstr(buf, "\"State\":false") != NULL);
  CHECK_RC(sd_print_device_status(ctl, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "Garage (ID: 1)") != NULL);
  CHECK_RC(sd_print_model_library(NULL, "detailed", "ShellyPlus2PM", buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "Shelly models (1):") != NULL && strstr(buf, "2 (switch)") != NULL);

  /* Switching. */
  bool state = false, changed = false;
  CHECK_RC(sd_change_output(ctl, "Door Light", 0, true, &state, &changed), SD_OK);
  CHECK(state && changed);
  CHECK_RC(sd_change_output(ctl, NULL, 1, true, &state, &changed), SD_OK);
  CHECK(state && !changed);
  CHECK_RC(sd_toggle_output(ctl, "Compressor", 0, &state, &changed), SD_OK);
  CHECK(state && changed);
  CHECK_RC(sd_output_state(ctl, NULL, 2, &state), SD_OK);
  CHECK(state);

  /* MockRate meter on an output that is on: energy and power are reported. */
  struct sd_meter_reading m;
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  CHECK_RC(sd_refresh_all(ctl, NULL), SD_OK);
  CHECK_RC(sd_meter(ctl, "Door Meter", 0, &m), SD_OK);
  CHECK(m.has_power && m.power == 3600.0);
  CHECK(m.has_energy && m.energy > 0.0);
  CHECK(!m.has_voltage);

  /* A simulation-file edit is seen after a refresh: switch the compressor off and flip an input. */
  char path[1024];
  snprintf(path, sizeof path, "%s/Garage.json", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs("{\"Outputs\": [{\"ComponentIndex\": 1, \"State\": false}],"
          " \"Inputs\": [{\"ComponentIndex\": 0, \"State\": true}]}", f);
    fclose(f);
  }
  size_t failures = 99;
  CHECK_RC(sd_refresh_all(ctl, &failures), SD_OK);
  CHECK(failures == 0);
  CHECK_RC(sd_output_state(ctl, "Compressor", 0, &state), SD_OK);
  CHECK(!state);
  CHECK_RC(sd_input_state(ctl, NULL, 1, &state), SD_OK);
  CHECK(state);
  bool online = false;
  CHECK_RC(sd_is_device_online(ctl, "Garage", 0, &online), SD_OK);
  CHECK(online);
  CHECK_RC(sd_read_device_online(ctl, NULL, 1, &online), SD_OK);
  CHECK(online);

  /* Webhook → wake descriptor readable → event pulled → clear → not readable. */
  char addr[64];
  CHECK_RC(sd_webhook_address(ctl, addr, sizeof addr, &needed), SD_OK);
  int fd = sd_wake_fd(ctl);
  CHECK(fd >= 0);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK(poll(&p, 1, 0) == 0);
  CHECK(send_hook(addr, "/shelly/webhook?Event=switch.on&DeviceID=1&ObjectType=output&ComponentID=1") == 200);
  CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
  CHECK_RC(sd_wake_wait(ctl, 0), SD_OK);
  CHECK_RC(sd_wake_clear(ctl), SD_OK);
  p.revents = 0;
  CHECK(poll(&p, 1, 0) == 0);
  /* An event larger than the buffer is kept for the next call. */
  char small[16];
  CHECK_RC(sd_pull_event(ctl, small, sizeof small, &needed), SD_INSUFFICIENT_SIZE);
  CHECK_RC(sd_pull_event(ctl, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Event\":\"switch.on\"") != NULL);
  CHECK(strstr(buf, "\"Component\":\"Door Light\"") != NULL);
  CHECK_RC(sd_pull_event(ctl, buf, sizeof buf, &needed), SD_NO_EVENT);
  CHECK(send_hook(addr, "/shelly/webhook?Event=nope") == 400);
  /* Readable exactly while the flag is set: draining the events does not clear it, sd_wake_clear does. */
  CHECK(send_hook(addr, "/shelly/webhook?Event=switch.off&DeviceID=1&ObjectType=output&ComponentID=1") == 200);
  p.revents = 0;
  CHECK(poll(&p, 1, 5000) == 1);
  int pulled = 0;
  while (sd_pull_event(ctl, buf, sizeof buf, &needed) == SD_OK) pulled++;
  CHECK(pulled == 1);
  p.revents = 0;
  CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
  CHECK_RC(sd_wake_clear(ctl), SD_OK);
  p.revents = 0;
  CHECK(poll(&p, 1, 0) == 0);

  sd_close(&ctl);
  CHECK(ctl == NULL);
  return sd_summary();
}

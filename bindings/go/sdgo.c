/* C helpers of the Go binding; see sdgo.h for why each sd_ call is wrapped. */
#include "sdgo.h"

#include <errno.h>
#include <poll.h>

#include "_cgo_export.h"

/* The calling thread's last-error message as a malloc'd string (NULL when there is none or memory is short). */
static char *last_error(void) {
  size_t needed = 0;
  sd_last_error_message(NULL, 0, &needed);
  if (needed <= 1) return NULL;
  char *msg = malloc(needed);
  if (msg == NULL) return NULL;
  if (sd_last_error_message(msg, needed, &needed) != SD_OK) {
    free(msg);
    return NULL;
  }
  return msg;
}

/* Records the message of a failed call (not for the two codes the binding handles itself). */
static sd_result done(sd_result r, char **err) {
  if (r != SD_OK && r != SD_INSUFFICIENT_SIZE && r != SD_NO_EVENT && err != NULL) *err = last_error();
  return r;
}

/* Forwards a controller's log record to Go; the cgo.Handle travels through the `user` pointer. */
static void log_trampoline(void *user, int level, const char *message) {
  sdgoLog((uintptr_t)user, level, (char *)message);
}

sd_result sdgo_open(int from_yaml, const char *source, const char *schema_path, const char *schema_yaml,
                    const char *models_path, uintptr_t log_handle, int log_level, bool wake, sd_controller **out,
                    char **err) {
  sd_open_options o;
  sd_result r = sd_open_options_init(&o);
  if (r != SD_OK) return done(r, err);
  o.schema_path = schema_path;
  o.schema_yaml = schema_yaml;
  o.models_path = models_path;
  o.wake = wake;
  if (log_handle != 0) {
    o.log_callback = log_trampoline;
    o.log_user = (void *)log_handle;
    o.log_level = log_level;
  }
  return done(from_yaml ? sd_open_yaml(source, &o, out) : sd_open(source, &o, out), err);
}

sd_result sdgo_device(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                          size_t *needed, char **err) {
  return done(sd_device(c, name, id, buf, len, needed), err);
}

/* sd_get_device keeps the message for every code but SD_OK: with SD_INSUFFICIENT_SIZE it says how the one read
 * went, and the binding must not read the device again to learn it. */
sd_result sdgo_get_device(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                          size_t *needed, char **err) {
  sd_result r = sd_get_device(c, name, id, buf, len, needed);
  if (r != SD_OK && err != NULL) *err = last_error();
  return r;
}

sd_result sdgo_get_device_component(const sd_controller *c, int kind, const char *name, int64_t id, char *buf,
                                    size_t len, size_t *needed, char **err) {
  return done(sd_get_device_component(c, kind, name, id, buf, len, needed), err);
}

sd_result sdgo_read_device(const sd_controller *c, const char *name, int64_t id, char **err) {
  return done(sd_read_device(c, name, id), err);
}

sd_result sdgo_devices(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_devices(c, buf, len, needed), err);
}

sd_result sdgo_component(const sd_controller *c, int kind, const char *name, int64_t id, char *buf,
                                    size_t len, size_t *needed, char **err) {
  return done(sd_component(c, kind, name, id, buf, len, needed), err);
}

sd_result sdgo_change_output(const sd_controller *c, const char *name, int64_t id, bool desired, bool *state,
                             bool *did_change, char **err) {
  return done(sd_change_output(c, name, id, desired, state, did_change), err);
}

sd_result sdgo_toggle_output(const sd_controller *c, const char *name, int64_t id, bool *state,
                             bool *did_change, char **err) {
  return done(sd_toggle_output(c, name, id, state, did_change), err);
}

sd_result sdgo_refresh_all(const sd_controller *c, size_t *failures, char **err) {
  return done(sd_refresh_all(c, failures), err);
}

sd_result sdgo_read_device_online(const sd_controller *c, const char *name, int64_t id, bool *online, char **err) {
  return done(sd_read_device_online(c, name, id, online), err);
}

sd_result sdgo_pull_event(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_pull_event(c, buf, len, needed), err);
}

sd_result sdgo_wake_clear(const sd_controller *c, char **err) { return done(sd_wake_clear(c), err); }

sd_result sdgo_webhook_address(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_webhook_address(c, buf, len, needed), err);
}

sd_result sdgo_print_device_status(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_print_device_status(c, buf, len, needed), err);
}

sd_result sdgo_print_model_library(const sd_controller *c, const char *mode, const char *model, char *buf,
                                   size_t len, size_t *needed, char **err) {
  return done(sd_print_model_library(c, mode, model, buf, len, needed), err);
}

sd_result sdgo_output_state(const sd_controller *c, const char *name, int64_t id, bool *state, char **err) {
  return done(sd_output_state(c, name, id, state), err);
}

sd_result sdgo_input_state(const sd_controller *c, const char *name, int64_t id, bool *state, char **err) {
  return done(sd_input_state(c, name, id, state), err);
}

sd_result sdgo_meter(const sd_controller *c, const char *name, int64_t id, sd_meter_reading *reading,
                         char **err) {
  return done(sd_meter(c, name, id, reading), err);
}

sd_result sdgo_sensor_value(const sd_controller *c, const char *name, int64_t id, double *value, char **err) {
  return done(sd_sensor_value(c, name, id, value), err);
}

sd_result sdgo_open_cover(const sd_controller *c, const char *name, int64_t id, char **err) {
  return done(sd_open_cover(c, name, id), err);
}

sd_result sdgo_close_cover(const sd_controller *c, const char *name, int64_t id, char **err) {
  return done(sd_close_cover(c, name, id), err);
}

sd_result sdgo_stop_cover(const sd_controller *c, const char *name, int64_t id, char **err) {
  return done(sd_stop_cover(c, name, id), err);
}

sd_result sdgo_set_cover_position(const sd_controller *c, const char *name, int64_t id, uint8_t position,
                                  char **err) {
  return done(sd_set_cover_position(c, name, id, position), err);
}

sd_result sdgo_is_device_online(const sd_controller *c, const char *name, int64_t id, bool *online, char **err) {
  return done(sd_is_device_online(c, name, id, online), err);
}

int sdgo_wait_readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
  int n = poll(&p, 1, timeout_ms);
  if (n < 0) return errno == EINTR ? 0 : -1;
  if (n == 0) return 0;
  if (p.revents & (POLLERR | POLLNVAL)) return -1;
  return (p.revents & POLLIN) ? 1 : 0;
}

sd_result sdgo_discover(const sd_controller *c, uint32_t timeout_ms, char *buf, size_t len, size_t *needed,
                        char **err) {
  return done(sd_discover(c, timeout_ms, buf, len, needed), err);
}

sd_result sdgo_discovered(char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_discovered(buf, len, needed), err);
}

sd_result sdgo_set_light(const sd_controller *c, const char *name, int64_t id, const sd_light_change *change,
                         char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_set_light(c, name, id, change, buf, len, needed), err);
}

sd_result sdgo_check_firmware(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                              size_t *needed, char **err) {
  return done(sd_check_firmware(c, name, id, buf, len, needed), err);
}

sd_result sdgo_energy_history(const sd_controller *c, const char *name, int64_t id, int64_t from, int64_t to,
                              char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_energy_history(c, name, id, from, to, buf, len, needed), err);
}

sd_result sdgo_energy_history_last(char *buf, size_t len, size_t *needed, char **err) {
  return done(sd_energy_history_last(buf, len, needed), err);
}

/* Forwards a firmware update's step to Go; the cgo.Handle travels through `user_data`. */
static void progress_trampoline(void *user_data, int step, const char *from, const char *to, int percent) {
  sdgoUpdateProgress((uintptr_t)user_data, step, (char *)from, (char *)to, percent);
}

sd_result sdgo_update_firmware_progress(const sd_controller *c, const char *name, int64_t id, int channel,
                                        bool allow_concurrent, double timeout_seconds, uintptr_t progress_handle,
                                        char **err) {
  sd_update_callback cb = progress_handle != 0 ? progress_trampoline : NULL;
  return done(sd_update_firmware_progress(c, name, id, channel, allow_concurrent, timeout_seconds, cb,
                                          (void *)progress_handle),
              err);
}

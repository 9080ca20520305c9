/*
 * sdgo.h — C helpers of the Go binding (internal; not part of the smartdev C API).
 *
 * Why these wrappers exist: sd_last_error_message() reports the last failure *of the calling OS thread*.
 * Two separate cgo calls from one goroutine may run on two different OS threads (the Go scheduler moves
 * goroutines between threads at any call boundary), so calling sd_last_error_message() in a second cgo call
 * could read another thread's message, or an empty one. Every sdgo_ wrapper therefore performs exactly one
 * sd_ call and, when it fails, copies the message in the same C function -- necessarily on the same thread,
 * with no Go code in between that could call the library -- into a malloc'd string stored in *err. The Go
 * side turns that string into an *Error and frees it.
 */
#ifndef SDGO_H
#define SDGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "smartdev.h"

sd_result sdgo_open(int from_yaml, const char *source, const char *schema_path, const char *schema_yaml,
                    const char *models_path, uintptr_t log_handle, int log_level, bool wake, sd_controller **out,
                    char **err);
sd_result sdgo_device(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                          size_t *needed, char **err);
sd_result sdgo_get_device(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                          size_t *needed, char **err);
sd_result sdgo_get_device_component(const sd_controller *c, int kind, const char *name, int64_t id, char *buf,
                                    size_t len, size_t *needed, char **err);
sd_result sdgo_read_device(const sd_controller *c, const char *name, int64_t id, char **err);
sd_result sdgo_devices(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_discover(const sd_controller *c, uint32_t timeout_ms, char *buf, size_t len, size_t *needed,
                        char **err);
sd_result sdgo_discovered(char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_component(const sd_controller *c, int kind, const char *name, int64_t id, char *buf,
                                    size_t len, size_t *needed, char **err);
sd_result sdgo_change_output(const sd_controller *c, const char *name, int64_t id, bool desired, bool *state,
                             bool *did_change, char **err);
sd_result sdgo_toggle_output(const sd_controller *c, const char *name, int64_t id, bool *state,
                             bool *did_change, char **err);
sd_result sdgo_refresh_all(const sd_controller *c, size_t *failures, char **err);
sd_result sdgo_read_device_online(const sd_controller *c, const char *name, int64_t id, bool *online, char **err);
sd_result sdgo_pull_event(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_wake_clear(const sd_controller *c, char **err);
sd_result sdgo_webhook_address(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_print_device_status(const sd_controller *c, char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_print_model_library(const sd_controller *c, const char *mode, const char *model, char *buf,
                                   size_t len, size_t *needed, char **err);
sd_result sdgo_output_state(const sd_controller *c, const char *name, int64_t id, bool *state, char **err);
sd_result sdgo_input_state(const sd_controller *c, const char *name, int64_t id, bool *state, char **err);
sd_result sdgo_meter(const sd_controller *c, const char *name, int64_t id, sd_meter_reading *reading,
                         char **err);
sd_result sdgo_sensor_value(const sd_controller *c, const char *name, int64_t id, double *value, char **err);
sd_result sdgo_open_cover(const sd_controller *c, const char *name, int64_t id, char **err);
sd_result sdgo_close_cover(const sd_controller *c, const char *name, int64_t id, char **err);
sd_result sdgo_stop_cover(const sd_controller *c, const char *name, int64_t id, char **err);
sd_result sdgo_set_cover_position(const sd_controller *c, const char *name, int64_t id, uint8_t position,
                                  char **err);
sd_result sdgo_is_device_online(const sd_controller *c, const char *name, int64_t id, bool *online, char **err);

sd_result sdgo_set_light(const sd_controller *c, const char *name, int64_t id, const sd_light_change *change,
                         char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_check_firmware(const sd_controller *c, const char *name, int64_t id, char *buf, size_t len,
                              size_t *needed, char **err);
/* progress_handle: a cgo.Handle of the call's progressListener, or 0 for no callback. */
sd_result sdgo_update_firmware_progress(const sd_controller *c, const char *name, int64_t id, int channel,
                                        bool allow_concurrent, double timeout_seconds, uintptr_t progress_handle,
                                        char **err);

sd_result sdgo_energy_history(const sd_controller *c, const char *name, int64_t id, int64_t from, int64_t to,
                              char *buf, size_t len, size_t *needed, char **err);
sd_result sdgo_energy_history_last(char *buf, size_t len, size_t *needed, char **err);

/* Waits up to timeout_ms for fd to become readable: 1 readable, 0 not (timeout or EINTR), -1 error. */
int sdgo_wait_readable(int fd, int timeout_ms);

#endif

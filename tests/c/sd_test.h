/* Minimal test helpers for the C harness: count checks, print a summary, exit non-zero on failure. */
#ifndef SD_TEST_H
#define SD_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smartdev.h"

static int sd_passed = 0;
static int sd_failed = 0;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (cond) {                                                                      \
      sd_passed++;                                                                   \
    } else {                                                                         \
      sd_failed++;                                                                   \
      char msg_[1024];                                                               \
      size_t n_ = 0;                                                                 \
      sd_last_error_message(msg_, sizeof msg_, &n_);                                 \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,        \
              __LINE__, #cond, msg_);                                                \
    }                                                                                \
  } while (0)

/* Checks that a call returns the expected code. */
#define CHECK_RC(call, want)                                                         \
  do {                                                                               \
    enum sd_result rc_ = (call);                                                     \
    if (rc_ == (want)) {                                                             \
      sd_passed++;                                                                   \
    } else {                                                                         \
      sd_failed++;                                                                   \
      char msg_[1024];                                                               \
      size_t n_ = 0;                                                                 \
      sd_last_error_message(msg_, sizeof msg_, &n_);                                 \
      fprintf(stderr, "%s:%d: %s returned %s, wanted %s (last error: %s)\n",         \
              __FILE__, __LINE__, #call, sd_result_name(rc_), sd_result_name(want),  \
              msg_);                                                                 \
    }                                                                                \
  } while (0)

static int sd_summary(void) {
  printf("%d passed, %d failed\n", sd_passed, sd_failed);
  return sd_failed == 0 ? 0 : 1;
}

/* A required environment variable. */
static const char *sd_env(const char *name) {
  const char *v = getenv(name);
  if (v == NULL) {
    fprintf(stderr, "environment variable %s is not set (run through cargo test --test c_harness)\n", name);
    exit(2);
  }
  return v;
}

#endif

/* Shared by the C API's test files: checks that print what failed and count it. */
#ifndef TRACER_TESTS_CAPI_CHECK_H
#define TRACER_TESTS_CAPI_CHECK_H
#include <stdio.h>

#include "tracer/tracer.h"

extern int capi_failures;
#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++capi_failures;                                                       \
    }                                                                        \
  } while (0)
#define CHECK_OK(S, call)                                                                                \
  do {                                                                                                   \
    tracer_status st_ = (call);                                                                          \
    if (st_ != TRACER_OK) {                                                                              \
      fprintf(stderr, "%s:%d: %s gave %s: %s\n", __FILE__, __LINE__, #call, tracer_status_name(st_),    \
              (S) ? tracer_last_error(S) : "");                                                          \
      ++capi_failures;                                                                                   \
    }                                                                                                    \
  } while (0)

/* tests/capi/test_capi_interop.c */
void test_dlpack(void);
void test_native_ops(void);
void test_two_states(void);
void test_release_after_close(void);
void test_memory_limit(void);
void test_job(void);

#endif

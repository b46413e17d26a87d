// Internal invariants: a failed check is a bug in memfit, not a user error, so
// it prints the file, line and condition and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MEMFIT_CHECK(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "memfit: internal check failed at %s:%d: %s\n", __FILE__,    \
                   __LINE__, #cond);                                                    \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

// The fingerprint of a Sluice build: the version, the compiler and the flags
// that change the engine's ABI. A job library (sluice_add_job) carries the
// fingerprint of the headers it was compiled with; a cluster process refuses
// a library whose fingerprint differs from its own, since the two would not
// agree on the layout of the engine's types.
//
// A macro, so that each side evaluates it with its own compile flags.
#pragma once

// Brings in the standard library configuration (_GLIBCXX_USE_CXX11_ABI).
#include <cstddef>

#define SLUICE_VERSION_STRING "0.1.0"

#define SLUICE_FP_STR2(x) #x
#define SLUICE_FP_STR(x) SLUICE_FP_STR2(x)

#ifdef NDEBUG
#define SLUICE_FP_NDEBUG "release"
#else
#define SLUICE_FP_NDEBUG "assertions"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_FP_ASAN "asan"
#else
#define SLUICE_FP_ASAN "no-asan"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define SLUICE_FP_ABI "cxx11-abi"
#else
#define SLUICE_FP_ABI "old-abi"
#endif

#define SLUICE_BUILD_FINGERPRINT                   \
  "sluice " SLUICE_VERSION_STRING "; " __VERSION__ \
  "; C++ " SLUICE_FP_STR(__cplusplus) "; " SLUICE_FP_NDEBUG "; " SLUICE_FP_ASAN "; " SLUICE_FP_ABI

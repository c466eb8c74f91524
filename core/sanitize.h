/* sanitize.h: FT_ASAN is 1 in a translation unit built with AddressSanitizer (gcc says so with
 * __SANITIZE_ADDRESS__, clang with __has_feature), else 0. The code that maps its own memory or
 * handles its own faults steps aside for the sanitizer where it is 1. */
#ifndef FT_CORE_SANITIZE_H
#define FT_CORE_SANITIZE_H

#if defined(__SANITIZE_ADDRESS__)
#define FT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FT_ASAN 1
#endif
#endif
#ifndef FT_ASAN
#define FT_ASAN 0
#endif

#endif

/* fatal.h -- how demux-server gives up: one line on stderr, then exit. */
#ifndef DEMUX_FATAL_H
#define DEMUX_FATAL_H

/* A fatal error: "demux-server: ..." on stderr, exit status 1. */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Bad input: one line, exit status 2 (docs/CONTRACTS.md §1). */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

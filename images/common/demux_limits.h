/* demux_limits.h -- what demux-server and demux-client accept: the single source of truth.
 *
 * The binaries compile these in; the experiment spec checks (src/demuxlab/limits.py) read this file, so
 * a spec is refused exactly when a binary would refuse the arguments its points become. Keep the format:
 * one "#define DEMUX_<NAME> <decimal integer>" per line; the Python side parses nothing else.
 */
#ifndef DEMUX_LIMITS_H
#define DEMUX_LIMITS_H

#define DEMUX_MAX_THREADS 1024          /* server threads of any pattern (--list's max_threads) */
#define DEMUX_MAX_WORK_US 1000000       /* server --work-us, microseconds */
#define DEMUX_MAX_MSG_SIZE 1048576      /* server --msg-size, bytes */
#define DEMUX_MAX_SLOTS 1048576         /* server connections (--max-conns) */
#define DEMUX_MAX_STALL_MS 3600000      /* server --stall-ms, milliseconds */
#define DEMUX_DEFAULT_STALL_MS 5000     /* server --stall-ms when not given */
#define DEMUX_MAX_CPUS 1024             /* CPUs in a --cpus list (both) */
#define DEMUX_CLIENT_MAX_THREADS 1024   /* client --threads (and at most --connections) */
#define DEMUX_CLIENT_MAX_CONNS 1000000  /* client --connections */
#define DEMUX_CLIENT_MAX_MSG 67108864   /* client --msg-size, bytes */
#define DEMUX_MAX_PHASE_S 86400         /* client --warmup, --duration, --cooldown, --stall-timeout, seconds */
#define DEMUX_MAX_RATE 1000000000       /* client --rate, messages per second */
#define DEMUX_DECIMALS 6                /* fractional digits of the numbers the binaries are given */

#endif

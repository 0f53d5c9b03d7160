/* fatal.c -- see fatal.h. */
#include "fatal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void say(const char *fmt, va_list ap)
{
    fputs("demux-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

_Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    exit(1);
}

_Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    exit(2);
}

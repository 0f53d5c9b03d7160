/* min_echo.c -- the least a single-threaded epoll echo server can do: the
 * yardstick for demux-server's CPU cost per message (bench/perf/images_efficiency.py).
 *
 *   min-echo --port PORT [--msg-size B] [--cpu C]
 *
 * Prints {"event": "listening", "port": N} once listening; on SIGTERM/SIGINT
 * prints {"event": "exit", "messages": M, "elapsed_s": s, "cpu_s": {"user": u, "sys": s}}
 * where M counts echoed bytes / B, the way a message-framed server would. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void die(const char *what)
{
    fprintf(stderr, "min-echo: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"port", required_argument, NULL, 'p'},
                                             {"msg-size", required_argument, NULL, 'm'},
                                             {"cpu", required_argument, NULL, 'c'},
                                             {NULL, 0, NULL, 0}};
    uint64_t port = 0, msg = 1, cpu = UINT64_MAX, v;
    int ch, one = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *name = ch == 'p' ? "--port" : ch == 'm' ? "--msg-size" : "--cpu";
        if (ch == '?' || parse_u64(optarg, ch == 'm' ? 1 : 0, ch == 'p' ? 65535 : 1u << 26, &v) < 0) {
            fprintf(stderr, "min-echo: bad option %s (usage: min-echo --port P [--msg-size B] [--cpu C])\n",
                    ch == '?' ? argv[optind - 1] : name);
            return 2;
        }
        if (ch == 'p')
            port = v;
        else if (ch == 'm')
            msg = v;
        else
            cpu = v;
    }
    if (cpu != UINT64_MAX && pin_self_to_cpu((int)cpu) < 0)
        die("pin");

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t alen = sizeof(addr);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(ls, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(ls, 4096) < 0 ||
        getsockname(ls, (struct sockaddr *)&addr, &alen) < 0)
        die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0)
        die("epoll");
    printf("{\"event\": \"listening\", \"port\": %u}\n", ntohs(addr.sin_port));
    fflush(stdout);

    static char buf[65536];
    static struct epoll_event evs[256];
    uint64_t bytes = 0, t0 = now_ns();
    while (!stop) {
        int n = epoll_wait(ep, evs, 256, 200);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0)
                        die("epoll_ctl");
                }
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof(buf), 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            /* Echo of a message or two per wakeup fits the socket buffer, so one send suffices. */
            if (r <= 0 || send(fd, buf, (size_t)r, MSG_NOSIGNAL) != r) {
                close(fd);
                continue;
            }
            bytes += (uint64_t)r;
        }
    }
    double user, sys;
    cpu_times(&user, &sys);
    printf("{\"event\": \"exit\", \"messages\": %llu, \"elapsed_s\": %.3f, \"cpu_s\": {\"user\": %.6f, "
           "\"sys\": %.6f}}\n",
           (unsigned long long)(bytes / msg), (double)(now_ns() - t0) / 1e9, user, sys);
    return 0;
}

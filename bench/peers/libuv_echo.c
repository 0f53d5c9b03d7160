/* libuv_echo.c -- the plainest idiomatic libuv echo server (the libuv guide's
 * echo server: a buffer of the suggested size per read, one uv_write per read,
 * freed in its callback), with what the peer benchmark needs around it:
 * TCP_NODELAY as every server in the comparison sets it, the listening line,
 * and on SIGTERM the exit line with the messages echoed (bytes / --msg-size)
 * and the process's CPU time, the shape demux-server prints.
 *
 *   libuv-echo --port P [--msg-size B] [--bind ADDR]
 *
 * Built by bench/peers/peer_servers.py into build/peer/ (Debian's libuv1-dev, linked
 * statically). */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <uv.h>

static uv_loop_t *loop;
static uint64_t echoed; /* bytes */
static uint64_t msg_size = 1;
static struct timespec started;

typedef struct {
    uv_write_t req;
    uv_buf_t buf;
} write_req_t;

static void alloc_buffer(uv_handle_t *handle, size_t suggested_size, uv_buf_t *buf)
{
    (void)handle;
    *buf = uv_buf_init(malloc(suggested_size), (unsigned)suggested_size);
}

static void on_close(uv_handle_t *handle)
{
    free(handle);
}

static void echo_write(uv_write_t *req, int status)
{
    (void)status;
    write_req_t *wr = (write_req_t *)req;
    free(wr->buf.base);
    free(wr);
}

static void echo_read(uv_stream_t *client, ssize_t nread, const uv_buf_t *buf)
{
    if (nread > 0) {
        write_req_t *req = malloc(sizeof(*req));
        req->buf = uv_buf_init(buf->base, (unsigned)nread);
        uv_write(&req->req, client, &req->buf, 1, echo_write);
        echoed += (uint64_t)nread;
        return;
    }
    if (nread < 0)
        uv_close((uv_handle_t *)client, on_close);
    free(buf->base);
}

static void on_new_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    uv_tcp_t *client = malloc(sizeof(*client));
    uv_tcp_init(loop, client);
    if (uv_accept(server, (uv_stream_t *)client) == 0) {
        uv_tcp_nodelay(client, 1);
        uv_read_start((uv_stream_t *)client, alloc_buffer, echo_read);
    } else {
        uv_close((uv_handle_t *)client, on_close);
    }
}

static void on_signal(uv_signal_t *handle, int signum)
{
    (void)handle;
    (void)signum;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"event\": \"exit\", \"server\": \"libuv\", \"libuv\": \"%s\", \"messages\": %llu, \"elapsed_s\": %.6f, "
           "\"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}}\n",
           uv_version_string(), (unsigned long long)(echoed / msg_size),
           (double)(now.tv_sec - started.tv_sec) + (double)(now.tv_nsec - started.tv_nsec) / 1e9,
           (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    fflush(stdout);
    exit(0);
}

static void usage(const char *what)
{
    fprintf(stderr, "libuv-echo: %s (usage: libuv-echo --port P [--msg-size B] [--bind ADDR])\n", what);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *bind_addr = "127.0.0.1";
    long port = -1;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 >= argc)
            usage("an option without a value");
        if (strcmp(argv[i], "--port") == 0)
            port = strtol(argv[++i], &end, 10);
        else if (strcmp(argv[i], "--msg-size") == 0)
            msg_size = strtoull(argv[++i], &end, 10);
        else if (strcmp(argv[i], "--bind") == 0)
            bind_addr = argv[++i];
        else
            usage("unknown option");
        if (end != NULL && *end != '\0')
            usage("not a number");
    }
    if (port < 0 || port > 65535 || msg_size == 0)
        usage("--port 0..65535 and --msg-size >= 1");

    loop = uv_default_loop();
    uv_tcp_t server;
    uv_tcp_init(loop, &server);
    struct sockaddr_in addr;
    uv_ip4_addr(bind_addr, (int)port, &addr);
    int rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&server, 4096, on_new_connection);
    if (rc != 0) {
        fprintf(stderr, "libuv-echo: cannot listen on %s:%ld: %s\n", bind_addr, port, uv_strerror(rc));
        return 1;
    }
    struct sockaddr_in got;
    int len = sizeof(got);
    uv_tcp_getsockname(&server, (struct sockaddr *)&got, &len);
    uv_signal_t sigterm, sigint;
    uv_signal_init(loop, &sigterm);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigint, on_signal, SIGINT);
    clock_gettime(CLOCK_MONOTONIC, &started);
    printf("{\"event\": \"listening\", \"port\": %d}\n", ntohs(got.sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}

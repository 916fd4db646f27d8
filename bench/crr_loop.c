/* The floor for `wirerate rr --mode crr` on one host: a connection per transaction with
 * nothing else around it. The server accepts, reads a 1-byte request, writes a 1-byte
 * response and closes; the client connects, writes, reads until the server's close, and
 * closes. Both loops run in one thread each, blocking, with TCP_NODELAY.
 *
 *   crr_loop server PORT            serves until killed
 *   crr_loop client PORT SECONDS    prints "<transactions> <seconds> <transactions/s>"
 *
 * Only 127.0.0.1. The server closes first, so its side holds the TIME_WAIT, as wirerate's
 * server does. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int serve(int port) {
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(port);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1024)) {
        perror("crr_loop server");
        return 1;
    }
    for (;;) {
        char b;
        int c = accept(l, NULL, NULL);
        if (c < 0)
            continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (read(c, &b, 1) == 1)
            (void)!write(c, &b, 1);
        close(c);
    }
}

static int client(int port, double seconds) {
    int one = 1;
    long n = 0;
    struct sockaddr_in a = loopback(port);
    double start = now_s(), end = start + seconds, t = start;
    while (t < end) {
        char b = 'x';
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) {
            perror("crr_loop client");
            return 1;
        }
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (write(s, &b, 1) != 1 || read(s, &b, 1) != 1) {
            fprintf(stderr, "crr_loop client: short transaction\n");
            return 1;
        }
        while (read(s, &b, 1) > 0) /* to the server's close */
            ;
        close(s);
        n++;
        t = now_s();
    }
    printf("%ld %.3f %.0f\n", n, t - start, n / (t - start));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "server"))
        return serve(atoi(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "client"))
        return client(atoi(argv[2]), atof(argv[3]));
    fprintf(stderr, "usage: crr_loop server PORT | crr_loop client PORT SECONDS\n");
    return 2;
}

/* Compression speed of one libdeflate build on BGZF-sized blocks (65280 bytes, as htslib and
 * sortase cut them): `libdeflate_versions FILE LEVEL...` prints the version, level, bytes in and
 * out and seconds. Built twice by bench/libdeflate-versions.sh (system libdeflate, and the sources
 * of the libdeflate-sys crate sortase links) to separate the library's speed from sortase's. */
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCK 65280

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE LEVEL...\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 64u << 20;
    char *in = malloc(cap), out[BLOCK + 1024];
    size_t n = fread(in, 1, cap, f);
    fclose(f);
    for (int a = 2; a < argc; a++) {
        int level = atoi(argv[a]);
        struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
        struct timespec t0, t1;
        size_t total = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t o = 0; o < n; o += BLOCK) {
            size_t len = n - o < BLOCK ? n - o : BLOCK;
            total += libdeflate_deflate_compress(c, in + o, len, out, sizeof out);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%s\t%d\t%zu\t%zu\t%.3f\n", LIBDEFLATE_VERSION_STRING, level, n, total,
               (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        libdeflate_free_compressor(c);
    }
    free(in);
    return 0;
}

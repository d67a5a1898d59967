#include <stdio.h>
#include <zlib.h>

int main(void) {
    unsigned char buf[65536];
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        crc = crc32(crc, buf, (uInt)n);
    printf("%08lx\n", crc);
    return ferror(stdin) ? 1 : 0;
}

/* launcher_probe: what the shim could change in a process, printed: rand() after srand(42)
 * (re-derived under the shim), and 16 bytes of getrandom (pinned under REPROD_ENTROPY).
 * tests/runtime/launchers.sh runs copies of it under launchers' names, where the shim must change
 * nothing, and under names that merely resemble them, where it acts as usual.
 *
 *     launcher_probe          prints "rand: N" and "getrandom: HEX"
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

int main(void)
{
    srand(42);
    printf("rand: %d\n", rand());
    unsigned char bytes[16];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        perror("getrandom");
        return 1;
    }
    printf("getrandom: ");
    for (size_t i = 0; i < sizeof bytes; i++)
        printf("%02x", bytes[i]);
    printf("\n");
    return 0;
}

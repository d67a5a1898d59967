#include <ctype.h>
#include <stdio.h>

int main(void) {
    int c;
    while ((c = getchar()) != EOF) {
        if (islower(c)) c = 'a' + (c - 'a' + 13) % 26;
        else if (isupper(c)) c = 'A' + (c - 'A' + 13) % 26;
        putchar(c);
    }
    return 0;
}

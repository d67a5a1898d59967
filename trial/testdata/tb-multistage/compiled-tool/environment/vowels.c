#include <stdio.h>
#include <string.h>

int main(void) {
	int c, n = 0;
	while ((c = getchar()) != EOF)
		if (c && strchr("aeiouAEIOU", c))
			n++;
	printf("%d\n", n);
	return 0;
}

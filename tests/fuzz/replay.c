// SPDX-License-Identifier: MIT
/*
 * A main() for a harness without libFuzzer: runs LLVMFuzzerTestOneInput
 * once on every file named, and on every file in every directory named
 * (its committed corpus). So every build, gcc and sanitizer ones included,
 * replays the seeds and each crash input kept as a regression. A failed
 * check aborts; an empty corpus is a failure too, since it tests nothing.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Run the harness on @path; 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* exactly the file's size: a read past the input shows in ASan */
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		close(fd);
		return -1;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n <= 0) {
			fprintf(stderr, "replay: %s: short read\n", path);
			free(buf);
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	LLVMFuzzerTestOneInput(buf, got);
	free(buf);
	return 0;
}

static int skip_dots(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Every regular file in @dir, in name order. Return: files run, or -1. */
static int run_dir(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, skip_dots, alphasort), ran = 0, rc = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = run_file(path);
			ran++;
		}
		free(ents[i]);
	}
	free(ents);
	return rc < 0 ? -1 : ran;
}

int main(int argc, char **argv)
{
	int total = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		int n;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) == 0 ? 1 : -1;
		if (n < 0)
			return 1;
		printf("replay: %d inputs from %s\n", n, argv[i]);
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no input: nothing was tested\n");
		return 1;
	}
	printf("replay: %d inputs, all checks passed\n", total);
	return 0;
}

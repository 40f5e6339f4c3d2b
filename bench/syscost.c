// SPDX-License-Identifier: MIT
/*
 * blockfs-syscost DIR [N]: what the backing syscalls of a small file cost
 * on this machine, outside FUSE, each N times in a loop over the regular
 * files of DIR (at most 1000 of them, all in the page cache after the
 * first pass): a stat by name, an open and close by name, an fstat and a
 * 2 KiB preadv2. It prints the microseconds each one takes, to tell
 * whether the daemon's per-file syscalls are what separates it from
 * squashfuse_ll (bench/results/trees/2026-11-24-b744701/deferred-read.md).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAMES 1000

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The names of up to MAX_NAMES regular files of @dirfd into @names; their count. */
static size_t list(int dirfd, char (*names)[256])
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while (n < MAX_NAMES && (e = readdir(d)))
		if (e->d_type == DT_REG)
			snprintf(names[n++], 256, "%s", e->d_name);
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	static char names[MAX_NAMES][256];
	char buf[2048];
	struct stat st;
	size_t n, count;
	int dirfd, fd;
	double t[5];

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: blockfs-syscost DIR [N]\n");
		return 2;
	}
	count = argc == 3 ? strtoul(argv[2], NULL, 10) : 200000;
	dirfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0 || (n = list(dirfd, names)) == 0 || count == 0) {
		fprintf(stderr, "blockfs-syscost: %s: no regular files to look at\n", argv[1]);
		return 1;
	}
	t[0] = now();
	for (size_t i = 0; i < count; i++)
		(void)fstatat(dirfd, names[i % n], &st, AT_SYMLINK_NOFOLLOW);
	t[1] = now();
	for (size_t i = 0; i < count; i++) {
		fd = openat(dirfd, names[i % n], O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
	}
	t[2] = now();
	fd = openat(dirfd, names[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(names[0]);
		return 1;
	}
	for (size_t i = 0; i < count; i++)
		(void)fstat(fd, &st);
	t[3] = now();
	size_t failed = 0; /* counted: glibc's fortified preadv2 must not be ignored */
	for (size_t i = 0; i < count; i++)
		if (preadv2(fd, &(struct iovec){ .iov_base = buf, .iov_len = sizeof(buf) }, 1, 0,
			    RWF_NOWAIT) < 0)
			failed++;
	t[4] = now();
	if (failed)
		fprintf(stderr, "blockfs-syscost: %zu of %zu preadv2 calls failed\n", failed,
			count);
	printf("fstatat %.2f us, openat+close %.2f us, fstat %.2f us, preadv2 of %zu B %.2f us "
	       "(%zu files, %zu each)\n",
	       (t[1] - t[0]) / (double)count * 1e6, (t[2] - t[1]) / (double)count * 1e6,
	       (t[3] - t[2]) / (double)count * 1e6, sizeof(buf),
	       (t[4] - t[3]) / (double)count * 1e6, n, count);
	close(fd);
	close(dirfd);
	return 0;
}

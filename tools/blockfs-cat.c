// SPDX-License-Identifier: MIT
/*
 * blockfs-cat FILE [OFFSET [LENGTH]]: decompress a backing file through
 * blockfs's own core, without FUSE, to standard output. When a mount reads
 * wrong, this tells a codec or index bug from a FUSE one.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"

#define CHUNK (1u << 20)
#define CACHE (64u << 20) /* keeps the blocks a chunk ends in for the next one */

static int open_sidecar(const char *path, const struct bfs_codec *codec)
{
	char *side;
	int fd;

	if (!codec || !codec->sidecar || asprintf(&side, "%s%s", path, codec->sidecar) < 0)
		return -1;
	fd = open(side, O_RDONLY | O_CLOEXEC);
	free(side);
	return fd;
}

int main(int argc, char **argv)
{
	const struct bfs_codec *codec = NULL;
	struct bfs_file_env env = { .verify = true };
	struct bfs_io io;
	struct stat st;
	struct bfs_file *f;
	uint64_t off = 0, len = UINT64_MAX;
	char *buf;
	ssize_t n = 0;
	int fd, side, rc;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: blockfs-cat FILE [OFFSET [LENGTH]]\n");
		return 2;
	}
	if (argc > 2)
		off = strtoull(argv[2], NULL, 0);
	if (argc > 3)
		len = strtoull(argv[3], NULL, 0);
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "blockfs-cat: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (fstat(fd, &st) == 0) {
		bfs_io_init_fd(&io, fd, (uint64_t)st.st_size);
		codec = bfs_codec_sniff(NULL, &io);
	}
	side = open_sidecar(argv[1], codec);
	env.mount = bfs_counters_new(NULL);
	if (!env.mount || bfs_cache_new(&env.cache, CACHE) < 0) {
		fprintf(stderr, "blockfs-cat: out of memory\n");
		return 1;
	}
	rc = bfs_file_open(&f, fd, NULL, side, codec, argv[1], &env, NULL);
	if (side >= 0)
		close(side);
	if (rc < 0) {
		fprintf(stderr, "blockfs-cat: %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	buf = malloc(CHUNK);
	while (buf && len > 0) {
		n = bfs_file_read(f, buf, len < CHUNK ? (size_t)len : CHUNK, off);
		if (n <= 0)
			break;
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) {
			n = -EIO;
			break;
		}
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	bfs_file_put(f);
	bfs_cache_free(env.cache);
	bfs_counters_put(env.mount);
	if (n < 0) {
		fprintf(stderr, "blockfs-cat: %s: at byte %llu: %s\n", argv[1],
			(unsigned long long)off, strerror(-(int)n));
		return 1;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * XXH32 (xxHash_spec.md): the checksum of LZ4 frame headers, blocks and
 * contents, and of blockfs's seek table. One-shot and streaming forms;
 * no allocation, no I/O.
 */
#ifndef BLOCKFS_XXH32_H
#define BLOCKFS_XXH32_H

#include <stddef.h>
#include <stdint.h>

/* XXH32 of @len bytes at @p with @seed (LZ4 frames use seed 0). */
uint32_t bfs_xxh32(const void *p, size_t len, uint32_t seed);

/* Streaming state: feed bytes in any pieces, get the one-shot result. */
struct bfs_xxh32 {
	uint32_t v[4];
	uint64_t total;
	uint8_t buf[16]; /* a partial stripe */
	uint32_t buflen;
	uint32_t seed;
};

void bfs_xxh32_init(struct bfs_xxh32 *s, uint32_t seed);
void bfs_xxh32_update(struct bfs_xxh32 *s, const void *p, size_t len);
uint32_t bfs_xxh32_digest(const struct bfs_xxh32 *s);

#endif

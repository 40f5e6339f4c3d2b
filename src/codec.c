// SPDX-License-Identifier: MIT
/*
 * The codec registry: which codec claims a file, by content and by name.
 * Order matters: when two backing files would show under one name, the
 * codec listed first wins, and within a codec its first suffix (names.c).
 */
#include "config.h"

#include "blockfs/codec.h"
#include "blockfs/io.h"

static const struct bfs_codec *const codecs[] = { &bfs_codec_lz4, &bfs_codec_bgzf };

const struct bfs_codec *bfs_codec_probe(const uint8_t *head, size_t len)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++)
		if (codecs[i]->probe(head, len))
			return codecs[i];
	return NULL;
}

/* Preludes looked past before a file is called plain. */
#define MAX_HOPS 64

const struct bfs_codec *bfs_codec_sniff(struct bfs_io *io)
{
	const struct bfs_codec *owner = NULL;	/* whose prelude we are in */
	uint8_t head[BFS_PROBE_LEN];
	uint64_t off = 0;

	for (int hop = 0; hop < MAX_HOPS && off < io->size; hop++) {
		size_t len = io->size - off < sizeof(head) ? (size_t)(io->size - off) : sizeof(head);
		uint64_t skip = 0;

		if (bfs_io_read(io, head, len, off) < 0)
			return NULL;
		for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs) && !skip; i++) {
			const struct bfs_codec *c = codecs[i];

			/* After a prelude only its own format may follow. */
			if (owner && c != owner)
				continue;
			if (c->probe(head, len))
				return c;
			if (c->prelude && (skip = c->prelude(head, len)) > 0)
				owner = c;
		}
		if (!skip || skip > io->size - off)
			return NULL;
		off += skip;
	}
	return NULL;
}

bool bfs_codec_suffix_at(size_t n, const struct bfs_codec **codec, const char **suffix)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++) {
		for (const char *const *s = codecs[i]->suffixes; *s; s++) {
			if (n-- == 0) {
				*codec = codecs[i];
				*suffix = *s;
				return true;
			}
		}
	}
	return false;
}

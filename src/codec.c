// SPDX-License-Identifier: MIT
/*
 * The codec registry: which codec claims a file, by content and by name.
 * Order matters: when two backing files would show under one name, the
 * codec listed first wins, and within a codec its first suffix (names.c).
 */
#include "config.h"

#include "blockfs/codec.h"

static const struct bfs_codec *const codecs[] = { &bfs_codec_lz4, &bfs_codec_bgzf };

const struct bfs_codec *bfs_codec_probe(const uint8_t *head, size_t len)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++)
		if (codecs[i]->probe(head, len))
			return codecs[i];
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

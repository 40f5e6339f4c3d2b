// SPDX-License-Identifier: MIT
/*
 * The codec registry: which codec claims a file, by content and by name.
 * Order matters: when two backing files would show under one name, the
 * codec listed first wins (see names.c).
 */
#include "config.h"

#include <string.h>

#include "blockfs/codec.h"

static const struct bfs_codec *const codecs[] = { &bfs_codec_lz4, &bfs_codec_bgzf };

const struct bfs_codec *bfs_codec_probe(const uint8_t *head, size_t len)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++)
		if (codecs[i]->probe(head, len))
			return codecs[i];
	return NULL;
}

const struct bfs_codec *bfs_codec_by_suffix(const char *name, size_t *suffix_len)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++) {
		for (const char *const *s = codecs[i]->suffixes; *s; s++) {
			size_t sl = strlen(*s);

			/* ".lz4" alone names no file: the shown name would be empty */
			if (len > sl && strcmp(name + len - sl, *s) == 0) {
				*suffix_len = sl;
				return codecs[i];
			}
		}
	}
	return NULL;
}

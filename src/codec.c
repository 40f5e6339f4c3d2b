// SPDX-License-Identifier: MIT
/*
 * The codec registry: which codec claims a file, by content and by name.
 * Order matters: when two backing files would show under one name, the
 * codec listed first wins, and within a codec its first suffix (names.c).
 * BGZF comes before plain gzip, so that a BGZF file (gzip with the BC
 * extra field) stays on the BGZF codec whatever gzip's probe says.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"

static const struct bfs_codec *const codecs[] = {
	&bfs_codec_lz4,	 &bfs_codec_bgzf, &bfs_codec_gzip,
	&bfs_codec_zstd, &bfs_codec_xz,	  &bfs_codec_bzip2
};

/* Is @c offered under @conf (NULL: the defaults)? Plain gzip only when asked for. */
static bool offered(const struct bfs_codec_conf *conf, const struct bfs_codec *c)
{
	return c != &bfs_codec_gzip || (conf ? conf : bfs_codec_config(NULL))->gzip;
}

const struct bfs_codec *bfs_codec_probe(const struct bfs_codec_conf *conf, const uint8_t *head,
					size_t len)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++)
		if (offered(conf, codecs[i]) && codecs[i]->probe(head, len))
			return codecs[i];
	return NULL;
}

/* Preludes looked past before a file is called plain. */
#define MAX_HOPS 64

/*
 * The codec whose probe claims the file behind @io, looking past
 * preludes, among all codecs (@all) or those offered under @conf; *@c
 * NULL when none does. Return: 0, or -errno when the file cannot be read.
 */
static int sniff(const struct bfs_codec_conf *conf, struct bfs_io *io, bool all,
		 const struct bfs_codec **c)
{
	/*
	 * Whose preludes we are in: bit i for codecs[i], all when none yet.
	 * LZ4 and zstd share their skippable frames: either may follow one.
	 */
	unsigned int owners = ~0u;
	uint8_t head[BFS_PROBE_LEN];
	uint64_t off = 0;
	int rc;

	*c = NULL;
	for (int hop = 0; hop < MAX_HOPS && off < io->size; hop++) {
		size_t len =
			io->size - off < sizeof(head) ? (size_t)(io->size - off) : sizeof(head);
		unsigned int next = 0;
		uint64_t skip = 0;

		rc = bfs_io_read(io, head, len, off);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++) {
			if ((owners >> i & 1u) && (all || offered(conf, codecs[i])) &&
			    codecs[i]->probe(head, len)) {
				*c = codecs[i];
				return 0;
			}
		}
		for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++) {
			const struct bfs_codec *k = codecs[i];
			uint64_t s;

			if (!(owners >> i & 1u) || (!all && !offered(conf, k)) || !k->prelude ||
			    !(s = k->prelude(head, len)) || (skip && s != skip))
				continue;
			skip = s;
			next |= 1u << i;
		}
		if (!skip || skip > io->size - off)
			return 0;
		owners = next;
		off += skip;
	}
	return 0;
}

const struct bfs_codec *bfs_codec_sniff(const struct bfs_codec_conf *conf, struct bfs_io *io)
{
	const struct bfs_codec *c;

	return sniff(conf, io, false, &c) == 0 ? c : NULL;
}

/* Do @a and @b list a backing suffix in common (.gz: BGZF and plain gzip)? */
static bool same_family(const struct bfs_codec *a, const struct bfs_codec *b)
{
	for (const struct bfs_suffix *s = a->suffixes; s->backing; s++)
		for (const struct bfs_suffix *t = b->suffixes; t->backing; t++)
			if (strcmp(s->backing, t->backing) == 0)
				return true;
	return false;
}

int bfs_codec_settle(const struct bfs_codec_conf *conf, const struct bfs_codec *named,
		     struct bfs_io *io, const struct bfs_codec **codec, const char **found)
{
	const struct bfs_codec *c;
	int rc = sniff(conf, io, true, &c);

	*codec = NULL;
	*found = NULL;
	if (rc < 0)
		return rc;
	if (c && same_family(c, named)) {
		if (offered(conf, c))
			*codec = c;
		return 0;
	}
	*found = c ? c->name : "raw";
	return -EMEDIUMTYPE;
}

bool bfs_codec_suffix_at(const struct bfs_codec_conf *conf, size_t n,
			 const struct bfs_codec **codec, const struct bfs_suffix **suffix)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(codecs); i++) {
		if (!offered(conf, codecs[i]))
			continue;
		for (const struct bfs_suffix *s = codecs[i]->suffixes; s->backing; s++) {
			if (n-- == 0) {
				*codec = codecs[i];
				*suffix = s;
				return true;
			}
		}
	}
	return false;
}

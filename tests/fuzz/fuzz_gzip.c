// SPDX-License-Identifier: MIT
/*
 * Fuzzes plain gzip (-o gzip=index): the registry's sniff, the checkpoint
 * walk of the scan, the decoding of every span from its checkpoint with
 * verify on and off, and the index cache round trip of what the walk
 * built. The input is the backing file; checkpoints are as close as the
 * codec allows (gzip_span 64K), so inputs of a few hundred KiB have
 * several.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold (fz_check_index);
 * every span but the poison one decodes, both ways alike (the walk
 * inflated each already, so none may fail), to exactly what zlib's own
 * gzip decoding of the whole file (fz_gunzip) produced at that offset;
 * a file zlib takes whole is served whole, not one byte more or less
 * (below the codec's 128 KiB header limit); and an index read back from
 * its cache entry decodes alike.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* Headers longer than this end the file in the codec (codec_gzip.c HDR_MAX). */
#define HDR_LIMIT (128u << 10)

/* Span @k of @idx from a copy of exactly clen bytes; NULL if it fails. */
static uint8_t *decode_span(const struct bfs_index *idx, size_t k, const uint8_t *file, bool verify)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(b->usize);
	const char *why = NULL;
	int rc;

	FZ_CHECK(src && dst);
	memcpy(src, file + b->coff, b->clen);
	rc = bfs_codec_gzip.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	free(src);
	FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM);
	FZ_CHECK(rc == 0 || why != NULL);
	if (rc == 0)
		return dst;
	free(dst);
	return NULL;
}

/* Every span decodes, both ways, to @ref's bytes at its offset. */
static void check_spans(const struct bfs_index *idx, const uint8_t *file, const struct fz_ref *ref)
{
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *on, *off;

		if (b->flags & BFS_BLK_BAD) {
			FZ_CHECK(k == idx->n - 1 && idx->broken);
			continue;
		}
		FZ_CHECK(!(b->flags & BFS_BLK_GUESS));
		on = decode_span(idx, k, file, true);
		off = decode_span(idx, k, file, false);
		FZ_CHECK(on && off);
		FZ_CHECK(memcmp(on, off, b->usize) == 0);
		if (b->uoff + b->usize <= ref->len)
			FZ_CHECK(memcmp(on, ref->p + b->uoff, b->usize) == 0);
		else
			FZ_CHECK(ref->len == FZ_REF_MAX || !ref->complete); /* beyond zlib's end */
		/* and its first half alone, as a random reader's first read takes it */
		if (b->usize > 1) {
			uint32_t n = b->usize / 2;
			uint8_t *src = malloc(b->clen ? b->clen : 1), *half = malloc(n);
			const char *why = NULL;

			FZ_CHECK(src && half);
			memcpy(src, file + b->coff, b->clen);
			FZ_CHECK(bfs_codec_gzip.decode(idx, k, src, half, n, true, &why) == 0);
			FZ_CHECK(memcmp(half, on, n) == 0);
			free(src);
			free(half);
		}
		free(on);
		free(off);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bfs_icache_key key = { .dev = 1, .ino = 1 };
	struct bfs_icache_key k = key;
	struct bfs_index idx, back;
	struct bfs_io io;
	struct fz_ref ref;
	const char *why;
	uint8_t *entry;
	size_t elen;
	int rc;

	static const struct bfs_codec_conf conf = { .gzip = true, .gzip_span = BFS_GZIP_SPAN_MIN };
	(void)fz_sniff(&io, data, size);

	bfs_index_init(&idx, size);
	idx.conf = &conf;
	rc = bfs_codec_gzip.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0) {
		fz_check_index(&idx, size);
		FZ_CHECK(atomic_load(&idx.nexact) == idx.n);
		fz_gunzip(data, size, &ref);
		check_spans(&idx, data, &ref);
		/* served bytes never go past what zlib produced */
		FZ_CHECK(ref.len == FZ_REF_MAX ||
			 atomic_load(&idx.usize) - (idx.broken ? 1 : 0) <= ref.len);
		if (ref.complete && size < HDR_LIMIT)
			FZ_CHECK(!idx.broken && atomic_load(&idx.usize) == ref.len);
		/* its cache entry reads back and decodes alike */
		k.size = size;
		if (!idx.broken && idx.n > 0 &&
		    bfs_icache_encode(&k, &bfs_codec_gzip, &idx, &entry, &elen) == 0) {
			bfs_index_init(&back, size);
			back.conf = &conf;
			rc = bfs_icache_decode(entry, elen, &k, &bfs_codec_gzip, &back, &why);
			FZ_CHECK(rc == 0 || rc == -ENOMEM);
			if (rc == 0) {
				FZ_CHECK(back.n == idx.n);
				check_spans(&back, data, &ref);
			}
			bfs_index_destroy(&back);
			free(entry);
		}
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

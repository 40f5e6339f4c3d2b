// SPDX-License-Identifier: MIT
/*
 * Fuzzes the LZ4 side of a file's life in blockfs: the registry's sniff
 * (past skippable frames), the scan (seek table, else the walk of frames
 * with independent or linked blocks and of legacy frames), settling of
 * guessed sizes by measuring sequences, decoding of every block and span
 * (codec_lz4_linked.c) with verify on and off and of their first halves,
 * and the index cache round trip of what the scan built (the spans'
 * checkpoints with it). The input is the backing file.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold (fz_check_index);
 * every block or span that decodes equals what the reference produces at
 * that offset, for the run of good ones from the start: liblz4's frame
 * decoder (the code behind lz4 -d) for frames, and for legacy frames
 * LZ4_decompress_safe() block by block as lz4 -d reads them; a file the
 * reference takes whole and blockfs serves without damage has the same
 * length in both; an index read back from its cache entry decodes alike.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4frame.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "fuzz.h"

#define LEGACY_MAGIC 0x184C2102u
#define LEGACY_BLOCK (8u << 20)

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * A legacy frame from @pos (after its magic), as lz4 -d reads one: size
 * words and blocks until the end of the input or a word above the bound,
 * which is the next magic. Return: where it ended, or SIZE_MAX on error.
 */
static size_t legacy_reference(const uint8_t *in, size_t len, size_t pos, struct fz_ref *ref,
			       size_t *cap)
{
	while (pos < len) {
		uint32_t n;
		int got;

		if (len - pos < 4)
			return SIZE_MAX;
		n = le32(in + pos);
		if (n > (uint32_t)LZ4_COMPRESSBOUND(LEGACY_BLOCK))
			return pos;
		if (len - pos - 4 < n)
			return SIZE_MAX;
		while (*cap - ref->len < LEGACY_BLOCK) {
			size_t ncap = *cap ? *cap * 2 : LEGACY_BLOCK;
			uint8_t *np;

			if (ncap > FZ_REF_MAX)
				return SIZE_MAX;
			np = realloc(ref->p, ncap);
			FZ_CHECK(np != NULL);
			ref->p = np;
			*cap = ncap;
		}
		got = LZ4_decompress_safe((const char *)in + pos + 4, (char *)ref->p + ref->len,
					  (int)n, (int)LEGACY_BLOCK);
		if (got < 0)
			return SIZE_MAX;
		ref->len += (size_t)got;
		pos += 4 + (size_t)n;
	}
	return pos;
}

/*
 * The whole input as lz4 -d reads it: frames (and skippable frames)
 * through LZ4F_decompress(), legacy frames through legacy_reference().
 */
static void lz4_reference(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	LZ4F_dctx *d;
	size_t cap = 0, pos = 0, hint = 0;
	bool failed = false;

	*ref = (struct fz_ref){ 0 };
	FZ_CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
	while (pos < len) {
		size_t srcsz = len - pos, dstsz;

		/* between frames: a legacy one is not LZ4F's */
		if (hint == 0 && len - pos >= 4 && le32(in + pos) == LEGACY_MAGIC) {
			pos = legacy_reference(in, len, pos + 4, ref, &cap);
			if (pos == SIZE_MAX) {
				failed = true;
				break;
			}
			continue;
		}

		if (ref->len == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			uint8_t *np;

			if (ncap > FZ_REF_MAX) {
				failed = true;
				break;
			}
			np = realloc(ref->p, ncap);
			FZ_CHECK(np != NULL);
			ref->p = np;
			cap = ncap;
		}
		dstsz = cap - ref->len;
		hint = LZ4F_decompress(d, ref->p + ref->len, &dstsz, in + pos, &srcsz, NULL);
		if (LZ4F_isError(hint)) {
			failed = true;
			break;
		}
		pos += srcsz;
		ref->len += dstsz;
		if (srcsz == 0 && dstsz == 0 && ref->len < cap) {
			failed = true; /* no progress: should not happen */
			break;
		}
	}
	/* hint 0: the last frame ended exactly at the end of the input */
	ref->complete = !failed && pos == len && hint == 0;
	LZ4F_freeDecompressionContext(d);
}

/* Block @k of @idx from a copy of exactly clen bytes, first @n bytes; NULL if it fails. */
static uint8_t *decode_k(const struct bfs_index *idx, size_t k, const uint8_t *file, uint32_t n,
			 bool verify)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(n);
	const char *why = NULL;
	int rc;

	FZ_CHECK(src && dst);
	memcpy(src, file + b->coff, b->clen);
	if (n == b->usize)
		rc = bfs_codec_lz4.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	else
		rc = bfs_codec_lz4.decode(idx, k, src, dst, n, verify, &why);
	free(src);
	FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM);
	FZ_CHECK(rc == 0 || why != NULL);
	FZ_CHECK(rc != -EILSEQ || verify);
	if (rc == 0)
		return dst;
	free(dst);
	return NULL;
}

/*
 * Every block and span as the read path decodes them (decode),
 * whole with verify on and off and its first half: the run of good ones
 * from the start equals @ref at its offset; all good and nothing broken,
 * the lengths agree when @ref is complete.
 */
static void check_indexed(struct bfs_index *idx, const uint8_t *file, size_t size,
			  const struct fz_ref *ref)
{
	struct bfs_io io;
	bool prefix = true;
	int rc;

	bfs_io_init_mem(&io, file, size);
	rc = bfs_settle(idx, &io, &bfs_codec_lz4, UINT64_MAX);
	FZ_CHECK(rc == 0 || rc == -ENOMEM);
	fz_check_index(idx, size);
	for (size_t k = 0; k < atomic_load(&idx->nexact); k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *on, *off;

		if (b->flags & BFS_BLK_BAD) {
			prefix = false;
			continue;
		}
		on = decode_k(idx, k, file, b->usize, true);
		off = decode_k(idx, k, file, b->usize, false);
		/* verify only adds checks */
		FZ_CHECK(!on || (off && memcmp(on, off, b->usize) == 0));
		if (!on)
			prefix = false;
		if (on && prefix) {
			if (b->uoff + b->usize <= ref->len) {
				FZ_CHECK(memcmp(on, ref->p + b->uoff, b->usize) == 0);
			} else {
				FZ_CHECK(!ref->complete || ref->len == FZ_REF_MAX);
				prefix = false;
			}
		}
		if (on && b->usize > 1) {
			uint8_t *half = decode_k(idx, k, file, b->usize / 2, true);

			FZ_CHECK(half && memcmp(half, on, b->usize / 2) == 0);
			free(half);
		}
		free(on);
		free(off);
	}
	if (ref->complete && prefix && !idx->broken && atomic_load(&idx->nexact) == idx->n)
		FZ_CHECK(atomic_load(&idx->usize) == ref->len);
}

/* The index's cache entry reads back, and decodes alike. */
static void check_cache(const struct bfs_index *idx, const uint8_t *file, size_t size,
			const struct fz_ref *ref)
{
	struct bfs_icache_key key = { .dev = 1, .ino = 1, .size = size };
	struct bfs_index back;
	const char *why;
	uint8_t *entry;
	size_t elen;
	int rc;

	if (idx->broken || idx->n == 0 ||
	    bfs_icache_encode(&key, &bfs_codec_lz4, idx, &entry, &elen) != 0)
		return;
	bfs_index_init(&back, size);
	rc = bfs_icache_decode(entry, elen, &key, &bfs_codec_lz4, &back, &why);
	FZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (rc == 0) {
		FZ_CHECK(back.n == idx->n);
		FZ_CHECK((back.priv != NULL) == (idx->priv != NULL));
		check_indexed(&back, file, size, ref);
	}
	bfs_index_destroy(&back);
	free(entry);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct bfs_codec *sniffed;
	struct bfs_index idx;
	struct bfs_io io;
	struct fz_ref ref;
	int rc;

	sniffed = fz_sniff(&io, data, size);

	bfs_index_init(&idx, size);
	rc = bfs_codec_lz4.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM);
	/* a file the sniff gave to LZ4 is one the scan can serve */
	FZ_CHECK(rc != -ENOTSUP || sniffed != &bfs_codec_lz4);
	if (rc == 0) {
		fz_check_index(&idx, size);
		lz4_reference(data, size, &ref);
		fz_check_blocks(&bfs_codec_lz4, &idx, data, size, &ref);
		check_indexed(&idx, data, size, &ref);
		check_cache(&idx, data, size, &ref);
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

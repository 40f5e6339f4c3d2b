// SPDX-License-Identifier: MIT
/*
 * Checks shared by the harnesses (fuzz.h): index invariants, decoding of
 * every block against a reference, and zlib as the reference for gzip.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/io.h"
#include "fuzz.h"

void fz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	abort();
}

void fz_check_index(const struct bfs_index *idx, uint64_t size)
{
	size_t nexact = atomic_load(&idx->nexact);
	uint64_t uoff = 0, cend = 0;

	/* The poison entry is appended past max_blocks if need be. */
	FZ_CHECK(idx->n <= idx->max_blocks + 1);
	FZ_CHECK(idx->max_blocks <= size / 4 + 1);
	FZ_CHECK(nexact <= idx->n);
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];

		FZ_CHECK(b->uoff == uoff);
		FZ_CHECK(b->usize >= 1 && b->usize <= idx->max_usize);
		FZ_CHECK(k >= nexact || !(b->flags & BFS_BLK_GUESS));
		/* open spans of one chain all state its input (index.h) */
		FZ_CHECK(b->coff >= cend ||
			 (k > 0 && (b->flags & idx->blk[k - 1].flags & BFS_BLK_OPEN) &&
			  b->coff == idx->blk[k - 1].coff && b->clen == idx->blk[k - 1].clen));
		if (b->clen == 0) {
			/* bfs_index_mark_broken(): the last entry, one poison byte */
			FZ_CHECK(b->flags & BFS_BLK_BAD);
			FZ_CHECK(k == idx->n - 1 && idx->broken && b->usize == 1);
			FZ_CHECK(b->coff <= size);
		} else {
			FZ_CHECK(bfs_range_ok(b->coff, b->clen, size));
		}
		cend = b->coff + b->clen;
		uoff += b->usize;
	}
	/*
	 * The size shown is fixed once measured: a claim that settling found
	 * false moves the blocks after it but not the size, and then the last
	 * block is poison, so that the end reads as damage (index.h).
	 */
	FZ_CHECK(uoff == atomic_load(&idx->usize) ||
		 (idx->n > 0 && (idx->blk[idx->n - 1].flags & BFS_BLK_BAD)));
	FZ_CHECK(!idx->broken || (idx->n > 0 && (idx->blk[idx->n - 1].flags & BFS_BLK_BAD)));
}

uint8_t *fz_decode_both(const struct bfs_codec *codec, const struct bfs_blk *b, const uint8_t *src)
{
	uint8_t *dst = malloc(b->usize ? b->usize : 1), *dst2 = malloc(b->usize ? b->usize : 1);
	const char *why = NULL, *why2 = NULL;
	struct bfs_blk one = *b;
	struct bfs_index idx = { .blk = &one, .n = 1, .cap = 1 }; /* @b on its own */
	int rc, rc2;

	FZ_CHECK(dst && dst2);
	rc = codec->decode(&idx, 0, src, dst, b->usize, true, &why);
	FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM);
	FZ_CHECK(rc == 0 || why != NULL);
	rc2 = codec->decode(&idx, 0, src, dst2, b->usize, false, &why2);
	FZ_CHECK(rc2 == 0 || rc2 == -EBADMSG || rc2 == -ENOMEM);
	FZ_CHECK(rc2 == 0 || why2 != NULL);
	/* verify only adds checks: what passes with it passes without, alike */
	if (rc == 0)
		FZ_CHECK(rc2 == 0 && memcmp(dst, dst2, b->usize) == 0);
	if (rc == -EBADMSG)
		FZ_CHECK(rc2 == -EBADMSG);
	free(dst2);
	if (rc == 0)
		return dst;
	free(dst);
	return NULL;
}

/* fz_decode_both() on block @b of @file, from a copy of exactly clen bytes. */
static uint8_t *decode_both(const struct bfs_codec *codec, const struct bfs_blk *b,
			    const uint8_t *file)
{
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst;

	FZ_CHECK(src != NULL);
	memcpy(src, file + b->coff, b->clen);
	dst = fz_decode_both(codec, b, src);
	free(src);
	return dst;
}

void fz_check_blocks(const struct bfs_codec *codec, struct bfs_index *idx, const uint8_t *file,
		     size_t size, const struct fz_ref *ref)
{
	bool prefix = ref != NULL, all = true;
	struct bfs_io io;
	size_t nexact;

	bfs_io_init_mem(&io, file, size);
	if (codec->measure) {
		/* as bfs_file_open() does: measure what the file does not state ... */
		int rc = bfs_measure(idx, &io, codec, NULL);

		FZ_CHECK(rc == 0 || rc == -ENOMEM);
		fz_check_index(idx, size);
		/* ... then settle the claims, as reads do */
		rc = bfs_settle(idx, &io, codec, UINT64_MAX);

		/* every block lies inside the file: a memory read cannot fail */
		FZ_CHECK(rc == 0 || rc == -ENOMEM);
	}
	nexact = atomic_load(&idx->nexact);
	FZ_CHECK(nexact == idx->n || codec->measure);
	fz_check_index(idx, size);
	for (size_t k = 0; k < nexact; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *out;

		FZ_CHECK(!(b->flags & BFS_BLK_GUESS));
		if (b->flags & BFS_BLK_BAD) {
			prefix = all = false;
			continue;
		}
		out = decode_both(codec, b, file);
		if (!out) {
			/* a failed block's size is unproven: later offsets may be off */
			prefix = all = false;
			continue;
		}
		if (prefix) {
			if (b->uoff + b->usize <= ref->len) {
				FZ_CHECK(memcmp(out, ref->p + b->uoff, b->usize) == 0);
			} else {
				/* blockfs serves bytes past the reference's whole output */
				FZ_CHECK(!ref->complete);
				prefix = false; /* the reference stopped early */
			}
		}
		free(out);
	}
	/* everything decoded and nothing broken: not one byte more or less */
	if (ref && ref->complete && all && !idx->broken && nexact == idx->n)
		FZ_CHECK(atomic_load(&idx->usize) == ref->len);
}

/* Make room for at least one more output byte; false past FZ_REF_MAX. */
static bool ref_grow(struct fz_ref *ref, size_t *cap)
{
	size_t ncap = *cap ? *cap * 2 : 65536;
	uint8_t *np;

	if (ncap > FZ_REF_MAX)
		return false;
	np = realloc(ref->p, ncap);
	FZ_CHECK(np != NULL);
	ref->p = np;
	*cap = ncap;
	return true;
}

void fz_gunzip(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	z_stream zs;
	size_t cap = 0;
	bool boundary = true; /* between members: the input may end here */
	bool full = false;    /* the last call filled the output: more may be pending */

	*ref = (struct fz_ref){ 0 };
	memset(&zs, 0, sizeof(zs));
	FZ_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK);
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)len;
	for (;;) {
		int rc;

		if (zs.avail_in == 0 && !full) {
			ref->complete = boundary;
			break;
		}
		if (ref->len == cap && !ref_grow(ref, &cap))
			break;
		zs.next_out = ref->p + ref->len;
		zs.avail_out = (uInt)(cap - ref->len);
		rc = inflate(&zs, Z_NO_FLUSH);
		ref->len = cap - zs.avail_out;
		full = zs.avail_out == 0 && rc != Z_STREAM_END;
		if (rc == Z_STREAM_END) {
			boundary = true;
			FZ_CHECK(inflateReset(&zs) == Z_OK);
		} else if (rc == Z_OK) {
			boundary = false;
		} else if (rc != Z_BUF_ERROR || zs.avail_out != 0) {
			break; /* corrupt, or truncated (no progress possible) */
		}
	}
	inflateEnd(&zs);
}

const struct bfs_codec *fz_sniff(struct bfs_io *io, const uint8_t *data, size_t size)
{
	/* Every codec offered, plain gzip too (-o gzip=index). */
	static const struct bfs_codec_conf all = { .gzip = true,
						   .gzip_span = BFS_GZIP_SPAN_DEFAULT };
	const struct bfs_codec *sniffed, *probed;

	bfs_io_init_mem(io, data, size);
	sniffed = bfs_codec_sniff(&all, io);
	probed = bfs_codec_probe(&all, data, size < BFS_PROBE_LEN ? size : BFS_PROBE_LEN);
	FZ_CHECK(!probed || sniffed == probed);
	return sniffed;
}

// SPDX-License-Identifier: MIT
/*
 * Fuzzes xz: the sniff, the scan (the backward index parse, and the
 * forward walk it falls back to), the measuring of sizes only the index
 * states, and the decoding of every block, chained spans in order as the
 * read path takes them, verify on and off. The input is the backing
 * file. Blocks over 64 KiB are chains of 16 KiB spans here, so that
 * small inputs reach them.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold (fz_check_index);
 * every block that decodes, for the run of good blocks from the start,
 * equals what liblzma's own stream decoder (concatenated streams, as xz
 * -dc) produced at that offset; verify off passes whatever verify on
 * passes, with the same bytes; a span of a chain with no decoder parked
 * at it says -EAGAIN and resume() points at or before it; a file the
 * stream decoder takes whole is served whole, not one byte more or less.
 */
#include "config.h"

#include <errno.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* codec_xz.c: the test knob, declared there and here only */
void bfs_codec_xz_limits(uint32_t direct, uint32_t span);

#define DIRECT	     (64u << 10)
#define SPAN	     (16u << 10)
/* What the reference decoder may allocate. */
#define REF_MEMLIMIT (64u << 20)

/* xz -dc: every stream, padding between them, output up to FZ_REF_MAX. */
static void ref_unxz(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t cap = 1 << 16;
	lzma_ret lr;

	*ref = (struct fz_ref){ 0 };
	ref->p = malloc(cap);
	FZ_CHECK(ref->p != NULL);
	FZ_CHECK(lzma_stream_decoder(&s, REF_MEMLIMIT, LZMA_CONCATENATED) == LZMA_OK);
	s.next_in = in;
	s.avail_in = len;
	for (;;) {
		if (ref->len == cap) {
			if (cap >= FZ_REF_MAX)
				break;
			cap *= 2;
			ref->p = realloc(ref->p, cap);
			FZ_CHECK(ref->p != NULL);
		}
		s.next_out = ref->p + ref->len;
		s.avail_out = cap - ref->len;
		lr = lzma_code(&s, LZMA_FINISH);
		ref->len = cap - s.avail_out;
		if (lr == LZMA_STREAM_END) {
			ref->complete = true;
			break;
		}
		if (lr != LZMA_OK)
			break;
	}
	lzma_end(&s);
}

/* Block @k from a copy of exactly clen bytes; rc, bytes in *@out (caller frees). */
static int decode(const struct bfs_index *idx, size_t k, const uint8_t *file, bool verify,
		  uint8_t **out)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(b->usize);
	const char *why = NULL;
	int rc;

	FZ_CHECK(src && dst);
	memcpy(src, file + b->coff, b->clen);
	rc = bfs_codec_xz.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	free(src);
	FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM || rc == -EAGAIN);
	FZ_CHECK(rc == 0 || why != NULL);
	FZ_CHECK(verify || rc != -EILSEQ);
	if (rc == 0) {
		*out = dst;
	} else {
		free(dst);
		*out = NULL;
	}
	return rc;
}

/*
 * Every block in order with @verify; chained spans continue the decoder
 * the span before parked, unless it failed. Compares with @ref (and with
 * @on, the verified pass's bytes, when given). Return: the bytes of each
 * block in @keep (when not NULL), NULL for the failed ones.
 */
static void pass(const struct bfs_index *idx, const uint8_t *file, const struct fz_ref *ref,
		 bool verify, uint8_t **keep, uint8_t *const *on, bool *all)
{
	bool prefix = true, chain_ok = false;

	*all = true;
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		bool chained = b->flags & BFS_BLK_CHAIN;
		uint8_t *out = NULL;
		int rc;

		if (keep)
			keep[k] = NULL;
		if (b->flags & BFS_BLK_BAD) {
			prefix = *all = false;
			chain_ok = false;
			continue;
		}
		if (chained && !chain_ok && bfs_codec_xz.resume(idx, k) != k) {
			/* the span before failed: nothing is parked here */
			FZ_CHECK(bfs_codec_xz.resume(idx, k) < k);
			rc = decode(idx, k, file, verify, &out);
			/* (an open chain whose proof failed says so at every span) */
			FZ_CHECK(rc == -EAGAIN || ((b->flags & BFS_BLK_OPEN) && verify &&
						   (rc == -EBADMSG || rc == -EILSEQ)));
			prefix = *all = false;
			continue;
		}
		rc = decode(idx, k, file, verify, &out);
		FZ_CHECK(rc != -EAGAIN);
		chain_ok = chained && rc == 0;
		if (rc != 0) {
			prefix = *all = false;
			continue;
		}
		/* what verify passes, no verify passes alike */
		if (on) {
			if (on[k])
				FZ_CHECK(memcmp(on[k], out, b->usize) == 0);
		}
		if (prefix) {
			if (b->uoff + b->usize <= ref->len)
				FZ_CHECK(memcmp(out, ref->p + b->uoff, b->usize) == 0);
			else
				prefix = false; /* the reference stopped early, or capped */
		}
		if (keep)
			keep[k] = out;
		else
			free(out);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bfs_index idx;
	struct bfs_io io;
	struct fz_ref ref;
	int rc;

	bfs_codec_xz_limits(DIRECT, SPAN);
	(void)fz_sniff(&io, data, size);

	bfs_index_init(&idx, size);
	rc = bfs_codec_xz.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0) {
		uint8_t **on = calloc(idx.n ? idx.n : 1, sizeof(*on));
		bool all_on, all_off;

		FZ_CHECK(on != NULL);
		fz_check_index(&idx, size);
		rc = bfs_measure(&idx, &io, &bfs_codec_xz, NULL);
		FZ_CHECK(rc == 0 || rc == -ENOMEM);
		rc = bfs_settle(&idx, &io, &bfs_codec_xz, UINT64_MAX);
		FZ_CHECK(rc == 0 || rc == -ENOMEM);
		fz_check_index(&idx, size);
		FZ_CHECK(atomic_load(&idx.nexact) == idx.n);
		ref_unxz(data, size, &ref);
		pass(&idx, data, &ref, true, on, NULL, &all_on);
		pass(&idx, data, &ref, false, NULL, on, &all_off);
		FZ_CHECK(all_off || !all_on);
		/* everything decoded and nothing broken: not one byte more or less */
		if (ref.complete && ref.len < FZ_REF_MAX && all_on && !idx.broken)
			FZ_CHECK(atomic_load(&idx.usize) == ref.len);
		for (size_t k = 0; k < idx.n; k++)
			free(on[k]);
		free(on);
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Fuzzes bzip2: the sniff, the walk of the scan (block magics at any bit,
 * each block decoded to find its end) and the decoding of every block,
 * whole and as prefixes, verify on and off. The input is the backing file.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold; every block that
 * decodes equals libbz2's decoding of the file (streams one after
 * another, as bzip2 -d reads them) at that offset, for the run of good
 * blocks from the start, and a prefix of it is its prefix; a file that
 * libbz2 takes whole has one length; and where BZ2_bzBuffToBuffDecompress
 * takes the first stream, the index serves all of it, the same bytes.
 */
#include "config.h"

#include <bzlib.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* Output BZ2_bzBuffToBuffDecompress may make: past it, that check is skipped. */
#define FIRST_MAX (4u << 20)

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * bzip2 streams one after another, decoded by libbz2's stream API; zero
 * bytes may follow the last one. complete: all of it decoded.
 */
static void bunzip2(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	size_t cap = 0, pos = 0;

	*ref = (struct fz_ref){ 0 };
	for (bool first = true;; first = false) {
		bz_stream s;
		int rc = BZ_OK;

		if (pos == len || (!first && all_zero(in + pos, len - pos))) {
			ref->complete = true;
			return;
		}
		memset(&s, 0, sizeof(s));
		FZ_CHECK(BZ2_bzDecompressInit(&s, 0, 0) == BZ_OK);
		s.next_in = (char *)(uintptr_t)(in + pos);
		s.avail_in = (unsigned int)(len - pos);
		for (;;) {
			if (ref->len == cap) {
				size_t ncap = cap ? 2 * cap : 65536;
				uint8_t *np;

				if (ncap > FZ_REF_MAX)
					break;
				np = realloc(ref->p, ncap);
				FZ_CHECK(np != NULL);
				ref->p = np;
				cap = ncap;
			}
			s.next_out = (char *)ref->p + ref->len;
			s.avail_out = (unsigned int)(cap - ref->len);
			rc = BZ2_bzDecompress(&s);
			ref->len = cap - s.avail_out;
			if (rc != BZ_OK || (s.avail_in == 0 && s.avail_out > 0))
				break;
		}
		pos += s.total_in_lo32; /* inputs are far below 4 GiB */
		BZ2_bzDecompressEnd(&s);
		if (rc != BZ_STREAM_END)
			return;
	}
}

/* Prefixes of block @k decode to the first bytes of its whole decoding @whole. */
static void check_prefixes(const struct bfs_blk *b, const uint8_t *file, const uint8_t *whole)
{
	uint8_t *src = malloc(b->clen), *dst = malloc(b->usize);
	struct bfs_blk one = *b;
	struct bfs_index idx = { .blk = &one, .n = 1, .cap = 1 }; /* bzip2 blocks decode alone */
	const char *why;

	FZ_CHECK(src && dst);
	memcpy(src, file + b->coff, b->clen);
	for (uint32_t n = 1; n < b->usize; n = n * 5 + 3) {
		int rc = bfs_codec_bzip2.decode(&idx, 0, src, dst, n, true, &why);

		/* the whole block decoded, so any part of it does */
		FZ_CHECK(rc == 0 || rc == -ENOMEM);
		if (rc == 0)
			FZ_CHECK(memcmp(dst, whole, n) == 0);
	}
	free(src);
	free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bfs_index idx;
	struct bfs_io io;
	struct fz_ref ref;
	int rc;

	(void)fz_sniff(&io, data, size);

	bfs_index_init(&idx, size);
	rc = bfs_codec_bzip2.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0) {
		uint64_t good = 0;
		unsigned int first_len = FIRST_MAX;
		char *first = malloc(FIRST_MAX);

		fz_check_index(&idx, size);
		bunzip2(data, size, &ref);
		fz_check_blocks(&bfs_codec_bzip2, &idx, data, size, &ref);
		for (size_t k = 0; k < idx.n && !(idx.blk[k].flags & BFS_BLK_BAD); k++) {
			const struct bfs_blk *b = &idx.blk[k];

			if (k < 4 && b->uoff + b->usize <= ref.len)
				check_prefixes(b, data, ref.p + b->uoff);
			good = b->uoff + b->usize;
		}
		/* the first stream, as libbz2's one-call API sees it */
		FZ_CHECK(first != NULL);
		if (size > 0 &&
		    BZ2_bzBuffToBuffDecompress(first, &first_len, (char *)(uintptr_t)data,
					       (unsigned int)size, 0, 0) == BZ_OK) {
			FZ_CHECK(ref.len >= first_len && memcmp(ref.p, first, first_len) == 0);
			FZ_CHECK(good >= first_len);
		}
		free(first);
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

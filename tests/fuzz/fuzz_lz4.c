// SPDX-License-Identifier: MIT
/*
 * Fuzzes the LZ4 side of a file's life in blockfs: the registry's sniff
 * (past skippable frames), the scan (seek table, else the frame and block
 * walk), settling of guessed sizes by measuring sequences, and decoding
 * of every block with verify on and off. The input is the backing file.
 *
 * Checks: the sniff agrees with a plain probe; the scan returns only its
 * documented errors and an index whose invariants hold (fz_check_index);
 * every block that decodes equals what liblz4's frame decoder (the code
 * behind lz4 -d) produces at that offset, for the run of good blocks from
 * the start; a file both decoders take whole has the same length in both.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include <lz4frame.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* The whole input through LZ4F_decompress(), as lz4 -d reads it. */
static void lz4_reference(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	LZ4F_dctx *d;
	size_t cap = 0, pos = 0, hint = 0;
	bool failed = false;

	*ref = (struct fz_ref){ 0 };
	FZ_CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
	while (pos < len) {
		size_t srcsz = len - pos, dstsz;

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
			failed = true;		/* no progress: should not happen */
			break;
		}
	}
	/* hint 0: the last frame ended exactly at the end of the input */
	ref->complete = !failed && pos == len && hint == 0;
	LZ4F_freeDecompressionContext(d);
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
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Fuzzes the zstd side of a file's life in blockfs: the registry's sniff
 * (past skippable frames), the scan (seek table, else the frame walk and
 * the decoding walk of big frames into spans), measuring and settling,
 * and decoding every block in order as the read path does (chained spans
 * continuing their parked decoder), then the index cache round trip. The
 * input is the backing file.
 *
 * Checks: the scan returns only its documented errors and an index whose
 * invariants hold (fz_check_index); spans chain as the codec says they
 * do; every block that decodes equals what libzstd's streaming decoder
 * (the code behind zstd -d), run over the whole input, produced at that
 * offset, for the run of good blocks from the start; a file both take
 * whole has the same length in both; a frame block decodes alike with
 * verify on and off, and its prefixes are its bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "fuzz.h"

/* The whole input through ZSTD_decompressStream(), as zstd -d reads it. */
static void zstd_reference(const uint8_t *in, size_t len, struct fz_ref *ref)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer ib = { .src = in, .size = len };
	size_t cap = 0, r = 0;
	bool failed = false;

	*ref = (struct fz_ref){ 0 };
	FZ_CHECK(d != NULL); /* its default window limit: zstd -d's */
	while (ib.pos < ib.size) {
		ZSTD_outBuffer ob;
		size_t before = ib.pos;

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
		ob = (ZSTD_outBuffer){ .dst = ref->p, .size = cap, .pos = ref->len };
		r = ZSTD_decompressStream(d, &ob, &ib);
		ref->len = ob.pos;
		if (ZSTD_isError(r)) {
			failed = true;
			break;
		}
		if (ib.pos == before && ob.pos < cap && ib.pos < ib.size) {
			failed = true; /* no progress: should not happen */
			break;
		}
	}
	/* drain what a full output left pending */
	while (!failed && r != 0 && ref->len == cap && cap < FZ_REF_MAX) {
		ZSTD_outBuffer ob;
		uint8_t *np = realloc(ref->p, cap * 2);

		FZ_CHECK(np != NULL);
		ref->p = np;
		cap *= 2;
		ob = (ZSTD_outBuffer){ .dst = ref->p, .size = cap, .pos = ref->len };
		r = ZSTD_decompressStream(d, &ob, &ib);
		ref->len = ob.pos;
		failed = ZSTD_isError(r);
	}
	/* r 0: the last frame ended exactly at the end of the input */
	ref->complete = !failed && ib.pos == len && r == 0;
	ZSTD_freeDCtx(d);
}

/* Chained spans: numbered from 0 per frame, each starting where the last ended. */
static void check_chains(const struct bfs_index *idx)
{
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint32_t seq = b->aux & 0x7fffffffu;

		if (!(b->flags & BFS_BLK_CHAIN))
			continue;
		FZ_CHECK(seq <= k);
		if (seq > 0) {
			const struct bfs_blk *p = &idx->blk[k - 1];

			FZ_CHECK(p->flags & BFS_BLK_CHAIN);
			FZ_CHECK((p->aux & 0x7fffffffu) + 1 == seq && !(p->aux >> 31));
			FZ_CHECK(p->coff + p->clen == b->coff);
		}
		FZ_CHECK(bfs_codec_zstd.resume(idx, k) <= k);
	}
}

/*
 * Settle, then decode every block in order and compare the run of good
 * blocks from the start with @ref. A failed block's successors may still
 * decode (other frames) but are no longer compared.
 */
static void check_blocks(struct bfs_index *idx, const uint8_t *file, size_t size,
			 const struct fz_ref *ref)
{
	bool prefix = true, all = true;
	struct bfs_io io;
	size_t nexact;
	int rc;

	bfs_io_init_mem(&io, file, size);
	rc = bfs_measure(idx, &io, &bfs_codec_zstd, NULL);
	FZ_CHECK(rc == 0 || rc == -ENOMEM);
	fz_check_index(idx, size);
	rc = bfs_settle(idx, &io, &bfs_codec_zstd, UINT64_MAX);
	FZ_CHECK(rc == 0 || rc == -ENOMEM);
	fz_check_index(idx, size);
	check_chains(idx);
	nexact = atomic_load(&idx->nexact);
	for (size_t k = 0; k < nexact; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *src, *out;
		const char *why = NULL;

		if (b->flags & BFS_BLK_BAD) {
			prefix = all = false;
			continue;
		}
		src = malloc(b->clen ? b->clen : 1);
		out = malloc(b->usize);
		FZ_CHECK(src && out);
		memcpy(src, file + b->coff, b->clen);
		rc = bfs_codec_zstd.decode(idx, k, src, out, idx->blk[k].usize, true, &why);
		FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM ||
			 ((b->flags & BFS_BLK_CHAIN) && rc == -EAGAIN));
		FZ_CHECK(rc == 0 || why != NULL);
		if (rc == 0 && !(b->flags & BFS_BLK_CHAIN)) {
			/* verify only adds checks; a prefix is the block's first bytes */
			uint8_t *again = malloc(b->usize);
			uint32_t n = b->usize / 2;

			FZ_CHECK(again != NULL);
			FZ_CHECK(bfs_codec_zstd.decode(idx, k, src, again, idx->blk[k].usize, false,
						       &why) == 0);
			FZ_CHECK(memcmp(out, again, b->usize) == 0);
			if (n > 0) {
				FZ_CHECK(bfs_codec_zstd.decode(idx, k, src, again, n, true, &why) ==
					 0);
				FZ_CHECK(memcmp(out, again, n) == 0);
			}
			free(again);
		}
		free(src);
		if (rc != 0) {
			prefix = all = false;
			free(out);
			continue;
		}
		if (prefix) {
			if (b->uoff + b->usize <= ref->len) {
				FZ_CHECK(memcmp(out, ref->p + b->uoff, b->usize) == 0);
			} else {
				FZ_CHECK(!ref->complete);
				prefix = false;
			}
		}
		free(out);
	}
	if (ref->complete && all && !idx->broken && nexact == idx->n)
		FZ_CHECK(atomic_load(&idx->usize) == ref->len);
}

/*
 * Does every frame whose header states its content size hold that many
 * bytes? libzstd 1.5.4 decodes a frame whose blocks hold fewer bytes than
 * its header states without an error (zstd -t passes it); blockfs refuses
 * such a frame as damage, since it sizes files from the headers. Frames
 * libzstd cannot delimit are left to the decode to judge.
 */
static bool sizes_honest(const uint8_t *in, size_t len)
{
	static uint8_t scratch[65536];
	ZSTD_DCtx *d = ZSTD_createDCtx();
	bool honest = true;

	FZ_CHECK(d != NULL);
	for (size_t off = 0; off < len && honest;) {
		size_t fl = ZSTD_findFrameCompressedSize(in + off, len - off);
		unsigned long long fcs, n = 0;
		ZSTD_inBuffer ib;

		if (ZSTD_isError(fl))
			break;
		fcs = ZSTD_getFrameContentSize(in + off, fl);
		ib = (ZSTD_inBuffer){ .src = in + off, .size = fl };
		off += fl;
		if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR)
			continue;
		ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
		while (n <= fcs && n <= FZ_REF_MAX) {
			ZSTD_outBuffer ob = { .dst = scratch, .size = sizeof(scratch) };
			size_t r = ZSTD_decompressStream(d, &ob, &ib);

			n += ob.pos;
			if (ZSTD_isError(r) || (r == 0 && ob.pos < ob.size) ||
			    (ob.pos == 0 && ib.pos == ib.size))
				break;
		}
		honest = n == fcs;
	}
	ZSTD_freeDCtx(d);
	return honest;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bfs_icache_key key = { .dev = 1, .ino = 1 };
	struct bfs_icache_key k = key;
	const struct bfs_codec *sniffed;
	struct bfs_index idx, back;
	struct bfs_io io;
	struct fz_ref ref;
	const char *why;
	uint8_t *entry;
	size_t elen;
	int rc;

	sniffed = fz_sniff(&io, data, size);
	bfs_index_init(&idx, size);
	rc = bfs_codec_zstd.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM);
	FZ_CHECK(rc != -ENOTSUP || idx.why[0]);
	if (rc == 0) {
		fz_check_index(&idx, size);
		zstd_reference(data, size, &ref);
		/*
		 * a file libzstd takes whole is one blockfs serves whole (when it
		 * is zstd and no frame's header states another size than it holds)
		 */
		if (ref.complete && sniffed == &bfs_codec_zstd && ref.len < FZ_REF_MAX &&
		    sizes_honest(data, size))
			FZ_CHECK(!idx.broken || idx.source == BFS_SRC_SEEKTABLE);
		check_blocks(&idx, data, size, &ref);
		k.size = size;
		if (!idx.broken && idx.n > 0 && idx.source == BFS_SRC_WALK &&
		    bfs_icache_encode(&k, &bfs_codec_zstd, &idx, &entry, &elen) == 0) {
			bfs_index_init(&back, size);
			rc = bfs_icache_decode(entry, elen, &k, &bfs_codec_zstd, &back, &why);
			FZ_CHECK(rc == 0 || rc == -ENOMEM);
			if (rc == 0) {
				FZ_CHECK(back.n == idx.n);
				check_blocks(&back, data, size, &ref);
			}
			bfs_index_destroy(&back);
			free(entry);
		}
		free(ref.p);
	}
	bfs_index_destroy(&idx);
	return 0;
}

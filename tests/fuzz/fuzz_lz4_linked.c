// SPDX-License-Identifier: MIT
/*
 * Fuzzes what codec_lz4_linked.c reads back from storage: the checkpoints
 * an index cache entry keeps for an LZ4 frame with linked blocks
 * (bfs_lz4_lload(), the LZ4 codec's cache_load), and the decoding of spans
 * from what it accepted. (The walk of hostile linked frames is fuzz_lz4's.)
 *
 * The input's first byte picks the frame's block size and checksums; the
 * next bytes, repeated with a changing stride up to 512 KiB, are the
 * content, which liblz4's frame encoder writes as one frame of linked
 * blocks. The walk indexes it (4 spans and their checkpoints) and the
 * codec saves the checkpoints' bytes; the input's last 64 bytes then edit
 * those bytes (byte flips, and a cut), as a damaged or forged cache entry
 * would. Checks: the load returns only its documented results; an index it
 * accepted decodes every span with verify on and off without a crash or an
 * undocumented error, and with verify on either to the very bytes liblz4
 * encoded or to an error, never to other bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "fuzz.h"

#define CONTENT (512u << 10) /* 4 spans of SPAN_TARGET (128 KiB) */
#define EDITS	64	     /* the input's last bytes: how to damage the checkpoints */

/* The content: @seed repeated, each copy shifted, so that blocks refer back across blocks. */
static void make_content(uint8_t *out, const uint8_t *seed, size_t n)
{
	for (size_t i = 0; i < CONTENT; i++)
		out[i] = n ? (uint8_t)(seed[(i + i / n) % n] + (i / 4096 & 1)) : (uint8_t)(i / 977);
}

/* Apply @edits (pairs: position byte, xor byte; an odd last byte cuts) to @p of *@len bytes. */
static void damage(uint8_t *p, size_t *len, const uint8_t *edits, size_t n)
{
	for (size_t i = 0; i + 1 < n && *len; i += 2)
		p[(size_t)edits[i] * 7919u % *len] ^= edits[i + 1];
	if (n % 2)
		*len = *len * edits[n - 1] / 255;
}

/* Every span of @idx decodes to @content's bytes at its offset, or fails. */
static void check_spans(const struct bfs_index *idx, const uint8_t *file, const uint8_t *content)
{
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];

		for (int verify = 0; verify < 2; verify++) {
			uint8_t *dst = malloc(b->usize ? b->usize : 1), *src = malloc(b->clen);
			const char *why;
			int rc;

			FZ_CHECK(dst && src);
			memcpy(src, file + b->coff,
			       b->clen); /* exactly clen: ASan sees reads past it */
			rc = bfs_codec_lz4.decode(idx, k, src, dst, idx->blk[k].usize, verify,
						  &why);
			FZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMEM);
			FZ_CHECK(rc == 0 || why != NULL);
			/*
			 * verify on proves a span by the XXH32 of its output the walk
			 * recorded; off, a forged checkpoint may decode to other bytes,
			 * as a damaged block of a file without checksums does (the
			 * cache entry's own checksum stops damage before this load)
			 */
			if (rc == 0 && verify)
				FZ_CHECK(b->uoff + b->usize <= CONTENT &&
					 memcmp(dst, content + b->uoff, b->usize) == 0);
			free(src);
			free(dst);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const LZ4F_blockSizeID_t bmax[] = { LZ4F_max64KB, LZ4F_max256KB };
	uint8_t *content, *frame = NULL, *priv = NULL;
	size_t seed_len, edits, flen, plen = 0;
	struct bfs_index idx;
	LZ4F_preferences_t prefs;
	struct bfs_io io;
	int rc;

	if (size < 1)
		return 0;
	edits = size - 1 < EDITS ? size - 1 : EDITS;
	seed_len = size - 1 - edits;
	prefs = (LZ4F_preferences_t){
		.frameInfo = { .blockSizeID = bmax[data[0] & 1],
			       .blockMode = LZ4F_blockLinked,
			       .contentChecksumFlag = (LZ4F_contentChecksum_t)(data[0] >> 1 & 1),
			       .blockChecksumFlag = (LZ4F_blockChecksum_t)(data[0] >> 2 & 1),
			       .contentSize = data[0] & 8 ? CONTENT : 0 },
	};
	content = malloc(CONTENT);
	FZ_CHECK(content != NULL);
	make_content(content, data + 1, seed_len);
	flen = LZ4F_compressFrameBound(CONTENT, &prefs);
	frame = malloc(flen);
	FZ_CHECK(frame != NULL);
	flen = LZ4F_compressFrame(frame, flen, content, CONTENT, &prefs);
	FZ_CHECK(!LZ4F_isError(flen));

	bfs_io_init_mem(&io, frame, flen);
	bfs_index_init(&idx, flen);
	rc = bfs_codec_lz4.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -ENOMEM);
	FZ_CHECK(rc != 0 || idx.priv != NULL); /* 4 spans: checkpoints to keep */
	if (rc == 0 && idx.priv && bfs_codec_lz4.cache_save(&idx, &priv, &plen) == 0) {
		/* the cache entry's blocks as they were, its checkpoints as the input damaged them */
		idx.priv_free(idx.priv);
		idx.priv = NULL;
		idx.priv_free = NULL;
		idx.priv_bytes = 0;
		uint8_t *saved = malloc(plen);
		size_t slen = plen;

		FZ_CHECK(saved != NULL);
		memcpy(saved, priv, plen);
		damage(priv, &plen, data + 1 + seed_len, edits);
		rc = bfs_codec_lz4.cache_load(&idx, priv, plen);
		FZ_CHECK(rc == 0 || rc == 1 || rc == -ENOMEM); /* 1: refused, walk again */
		/* the bytes as saved load again */
		FZ_CHECK(rc != 1 || plen != slen || memcmp(saved, priv, plen) != 0);
		free(saved);
		if (rc == 0)
			check_spans(&idx, frame, content);
	}
	free(priv);
	bfs_index_destroy(&idx);
	free(frame);
	free(content);
	return 0;
}

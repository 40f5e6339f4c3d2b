// SPDX-License-Identifier: MIT
/*
 * Fuzzes the decoding of one block, as the read path calls it with an
 * index entry it trusts: codec decode() and LZ4's measure(), on fuzzed
 * bytes with fuzzed claims. Input layout:
 *
 *   0  1  bit 0: codec (0 lz4, 1 bgzf); bit 1: BFS_BLK_CSUM
 *   1  1  LZ4 block max id in bits 0-2 (4..7; else 0, or 5 MiB with bit 7)
 *   2  4  claimed usize, LE32, taken modulo 4 MiB + 2
 *   6  .. the block: clen is the rest of the input
 *
 * Checks: only documented return codes, a reason with every failure,
 * verify on and off agreeing; for LZ4, whenever liblz4's own block
 * decoder takes the block (and it has no offset 0, see zero_offset()),
 * measure() reports the same size and decode() with that size the same
 * bytes (settle and read rely on both); for BGZF,
 * a block that decodes equals zlib's decoding of the same members.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/xxh32.h"
#include "fuzz.h"

#define HDR	     6
#define USIZE_MOD    ((4u << 20) + 2)
#define BMAX_LARGEST (4u << 20)

/*
 * Does the LZ4 block @p use a match offset of 0? The format calls such a
 * block corrupt and measure() refuses it, while liblz4 1.9.4 decodes it
 * (into zeros and repeats, never stale memory): the one known difference.
 */
static bool zero_offset(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned int token = p[i++];
		size_t lit = token >> 4;
		uint8_t more;

		if (lit == 15) {
			do {
				if (i >= len)
					return false;
				more = p[i++];
				lit += more;
			} while (more == 255);
		}
		if (lit >= len - i)
			return false; /* ends with literals, or truncated */
		i += lit;
		if (len - i < 2)
			return false;
		if (bfs_le16(p + i) == 0)
			return true;
		i += 2;
		if ((token & 15) == 15) {
			do {
				if (i >= len)
					return false;
				more = p[i++];
			} while (more == 255);
		}
	}
	return false;
}

static void fuzz_lz4(struct bfs_blk *b, const uint8_t *src)
{
	uint32_t cap = b->aux && b->aux <= BMAX_LARGEST ? b->aux : BMAX_LARGEST;
	uint32_t csum = b->flags & BFS_BLK_CSUM ? 4 : 0, word, dlen, m = 0;
	const char *why = NULL;
	uint8_t *out, *ref;
	int rc, n;

	out = fz_decode_both(&bfs_codec_lz4, b, src);
	free(out);
	rc = bfs_codec_lz4.measure(b, src, &m, &why);
	FZ_CHECK(rc == 0 || rc == -EBADMSG);
	FZ_CHECK(rc == 0 ? m >= 1 && m <= cap : why != NULL);

	/* The differential: a well-framed compressed block liblz4 decodes. */
	if (b->clen < 4 + csum)
		return;
	word = bfs_le32(src);
	dlen = word & 0x7FFFFFFFu;
	if ((word & 0x80000000u) || dlen == 0 || dlen > cap || dlen != b->clen - 4 - csum)
		return;
	if (csum && bfs_xxh32(src + 4, dlen, 0) != bfs_le32(src + 4 + dlen))
		return;
	ref = malloc(cap);
	FZ_CHECK(ref != NULL);
	n = LZ4_decompress_safe((const char *)src + 4, (char *)ref, (int)dlen, (int)cap);
	if (n > 0 && !zero_offset(src + 4, dlen)) {
		struct bfs_blk exact = *b;

		FZ_CHECK(rc == 0 && m == (uint32_t)n);
		exact.usize = m;
		out = fz_decode_both(&bfs_codec_lz4, &exact, src);
		FZ_CHECK(out != NULL && memcmp(out, ref, m) == 0);
		free(out);
	}
	free(ref);
}

static void fuzz_bgzf(struct bfs_blk *b, const uint8_t *src)
{
	struct fz_ref ref;
	uint8_t *out;

	out = fz_decode_both(&bfs_codec_bgzf, b, src);
	if (!out)
		return;
	fz_gunzip(src, b->clen, &ref);
	if (ref.complete)
		FZ_CHECK(ref.len == b->usize && memcmp(out, ref.p, b->usize) == 0);
	free(ref.p);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bfs_blk b = { 0 };
	unsigned int id;
	uint8_t *src;

	if (size < HDR)
		return 0;
	id = data[1] & 7;
	b.flags = data[0] & 2 ? BFS_BLK_CSUM : 0;
	b.aux = id >= 4 ? 1u << (8 + 2 * id) : (data[1] & 0x80 ? 5u << 20 : 0);
	b.usize = bfs_le32(data + 2) % USIZE_MOD;
	b.clen = (uint32_t)(size - HDR);
	/* the read path never decodes an entry of 0 bytes: bfs_index_add refuses it */
	if (b.usize == 0)
		b.usize = 1;
	/* exactly clen bytes, so that ASan sees a read past them */
	src = malloc(b.clen ? b.clen : 1);
	FZ_CHECK(src != NULL);
	memcpy(src, data + HDR, b.clen);
	if (data[0] & 1)
		fuzz_bgzf(&b, src);
	else
		fuzz_lz4(&b, src);
	free(src);
	return 0;
}

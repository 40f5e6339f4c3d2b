// SPDX-License-Identifier: MIT
/*
 * LZ4 frames (lz4_Frame_format.md, v1.6.x): probe, block-header walk,
 * exact sizing of blocks by parsing sequences, and block decoding with
 * liblz4's block API. Knows bytes only: no paths, no cache, no locks.
 *
 *   file    := frame+                     (skippable frames anywhere)
 *   frame   := | magic 184D2204 | FLG | BD | [content size, 8] | [dict id, 4] | HC |
 *              block* | EndMark 00000000 | [content xxh32, 4] |
 *   skip    := | magic 184D2A5x | size, 4 | size bytes ... |
 *   block   := | size word, LE32 | data: (size & 0x7FFFFFFF) bytes | [data xxh32, 4] |
 *                 bit 31 set: data is stored (raw), else an LZ4 block
 *
 *   FLG  7-6 version (01)  5 B.Indep  4 B.Checksum  3 C.Size  2 C.Checksum  1 reserved  0 DictID
 *   BD   7 reserved  6-4 block max size id (4..7: 64K 256K 1M 4M)  3-0 reserved
 *   HC   (xxh32(FLG .. end of dict id, seed 0) >> 8) & 0xFF
 *
 * One index entry per data block: coff is the size word, clen covers the
 * word, the data and the block checksum.
 *
 * A file that ends with blockfs's seek table (seektable.h, written by
 * blockfs-pack) is indexed from the table alone: one read of the file's
 * last 4 KiB, a second only for a table bigger than that, and every size
 * exact. A table that fails its checks, or leaves bytes between its
 * entries that are not frame boundaries (check_coverage(): two more small
 * reads for a one-frame file), is ignored and the blocks walked. One that
 * passes them but lies is caught by decode (size word against clen,
 * decoded length against usize), and a size that differs from the rest is
 * measured before it places later blocks (bfs_index_guess_irregular()),
 * so a lie can cost EIO, never wrong bytes.
 *
 * Without a table: frames record compressed sizes only, so a compressed
 * block's decoded size is a guess (the block max; the lz4 CLI fills every
 * block but the last); the last block of each frame is measured during
 * the scan. A frame whose content size agrees with its guesses makes them
 * claims (checked lazily, in order, by bfs_settle()); any other
 * guess is measured by bfs_measure() right after the scan, so that
 * the size shown is exact from the first stat(2). Writers that flush
 * (python-lz4, lz4_flex, lz4-java, Go's lz4) leave short blocks in the
 * middle of a frame, and nothing short of parsing a block tells a short
 * one from a full one: LZ4 can encode a full 64 KiB block in under 300
 * bytes, so no compressed length rules "full" in or out.
 *
 * Linked-block frames (lz4 -BD, liblz4's and python-lz4's default) let a
 * block copy from the 64 KiB of output before it: codec_lz4_linked.c
 * decodes them once during the scan and indexes spans of blocks with a
 * checkpoint each (aux tagged BFS_LZ4_SPAN_TAG); decode() sends
 * those spans there and decodes every other block itself.
 *
 * Legacy frames (lz4 -l; "Legacy frame" in lz4_Frame_format.md):
 *
 *   legacy  := | magic 184C2102 | lblock* |
 *   lblock  := | compressed size, LE32 | an LZ4 block of up to 8 MiB output |
 *
 * No checksums, no content size, no EndMark: the frame ends at the end
 * of the file or at a size word above LZ4_COMPRESSBOUND(8 MiB), which is
 * the next frame's magic (that is how lz4 -d reads it). Blocks are
 * independent: one index entry each, aux LEGACY_BMAX, sized like a
 * frame's blocks (every block but the last guessed full, the last
 * measured during the scan, the guesses measured before the size is
 * shown).
 *
 * Frames with a dictionary ID need a dictionary we do not have: probe()
 * says false for them and such files are served unchanged. Should scan
 * meet one first anyway (the file changed after the probe) it returns
 * -ENOTSUP; met after a good frame, it is damage.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"
#include "lz4_linked.h"

/* lz4_Frame_format.md, "General Structure of LZ4 Frame format" */
#define FRAME_MAGIC	0x184D2204u
#define SKIP_MAGIC	0x184D2A50u /* "Skippable Frames": 0x184D2A50..5F */
#define SKIP_MAGIC_MASK 0xFFFFFFF0u
#define LEGACY_MAGIC	0x184C2102u /* "Legacy frame" */
#define LEGACY_BMAX	(8u << 20)  /* output of one legacy block, at most */
#define LEGACY_DLEN_MAX ((uint32_t)LZ4_COMPRESSBOUND(LEGACY_BMAX))
#define MAGIC_LEN	4
#define SKIP_HDR_LEN	8 /* magic + LE32 frame size */

/* "Frame Descriptor": FLG byte */
#define FLG_VERSION_SHIFT 6
#define FLG_VERSION	  1u
#define FLG_B_INDEP	  (1u << 5)
#define FLG_B_CSUM	  (1u << 4)
#define FLG_C_SIZE	  (1u << 3)
#define FLG_C_CSUM	  (1u << 2)
#define FLG_RESERVED	  (1u << 1)
#define FLG_DICT_ID	  (1u << 0)

/* "Frame Descriptor": BD byte */
#define BD_BMAX_SHIFT 4
#define BD_BMAX_MASK  7u
#define BD_RESERVED   0x8Fu
#define BMAX_ID_MIN   4		 /* 64 KiB */
#define BMAX_LARGEST  (4u << 20) /* id 7 */

#define C_SIZE_LEN  8
#define DICT_ID_LEN 4
#define HDR_MIN	    7  /* magic FLG BD HC */
#define HDR_MAX	    19 /* ... plus content size and dict id */

/* "Data Blocks" */
#define BLK_HDR_LEN   4
#define BLK_STORED    0x80000000u
#define BLK_SIZE_MASK 0x7FFFFFFFu
#define ENDMARK	      0u
#define BLK_CSUM_LEN  4
#define C_CSUM_LEN    4

/* lz4_Block_format.md: a match is at least 4 bytes; its length field adds to that */
#define LZ4_MIN_MATCH 4
#define LZ4_RUN_MASK  15u /* a 4-bit length of 15 goes on in more bytes */

static bool is_skippable(uint32_t magic)
{
	return (magic & SKIP_MAGIC_MASK) == SKIP_MAGIC;
}

/* Frame descriptor fields this file needs, parsed and checked. */
struct frame {
	uint32_t bmax; /* block max size: 64K..4M */
	uint32_t hlen; /* magic through HC */
	bool bcsum, ccsum, has_csize, indep, dict;
	uint64_t csize;
};

/*
 * The FLG and BD checks that need no more than those two bytes. Return
 * a static reason when the descriptor is invalid, else NULL.
 */
static const char *check_flg_bd(uint8_t flg, uint8_t bd, struct frame *f)
{
	unsigned int id = (bd >> BD_BMAX_SHIFT) & BD_BMAX_MASK;

	if ((unsigned int)flg >> FLG_VERSION_SHIFT != FLG_VERSION)
		return "unsupported frame version";
	if (flg & FLG_RESERVED)
		return "reserved FLG bit set";
	if (bd & BD_RESERVED)
		return "reserved BD bits set";
	if (id < BMAX_ID_MIN)
		return "invalid block max size id";
	f->bmax = 1u << (8 + 2 * id); /* 4 -> 64 KiB, ..., 7 -> 4 MiB */
	f->indep = flg & FLG_B_INDEP;
	f->bcsum = flg & FLG_B_CSUM;
	f->has_csize = flg & FLG_C_SIZE;
	f->ccsum = flg & FLG_C_CSUM;
	f->dict = flg & FLG_DICT_ID;
	f->hlen = MAGIC_LEN + 2 + (f->has_csize ? C_SIZE_LEN : 0) + (f->dict ? DICT_ID_LEN : 0) + 1;
	return NULL;
}

/*
 * A frame blockfs serves (independent or linked blocks, no dictionary),
 * or a legacy frame; skippable frames are lz4_prelude()'s.
 */
static bool lz4_probe(const uint8_t *head, size_t len)
{
	struct frame f;

	if (len >= MAGIC_LEN && bfs_le32(head) == LEGACY_MAGIC)
		return true;
	if (len < MAGIC_LEN + 2 || bfs_le32(head) != FRAME_MAGIC)
		return false;
	if (check_flg_bd(head[4], head[5], &f))
		return false;
	return !f.dict;
}

/* A skippable frame of any length: probe again after it. */
static uint64_t lz4_prelude(const uint8_t *head, size_t len)
{
	if (len < SKIP_HDR_LEN || !is_skippable(bfs_le32(head)))
		return 0;
	return SKIP_HDR_LEN + (uint64_t)bfs_le32(head + MAGIC_LEN);
}

/*
 * Parse sequences without writing output (lz4_Block_format.md). Every
 * length is checked against the input left and against @cap, so hostile
 * data costs at most one pass over @len bytes. The end-of-block rules
 * (last 5 bytes literals, last match 12 bytes before the end) are left to
 * decode: lz4 -d accepts blocks that bend them, and so do we. A block of
 * a linked frame (@linked) may copy from the 64 KiB before it, which is
 * not here to check, and may decode to nothing.
 */
static int measure_seq(const uint8_t *p, size_t len, uint32_t cap, bool linked, uint32_t *usize,
		       const char **why)
{
	const uint8_t *end = p + len;
	uint64_t out = 0;

	for (;;) {
		unsigned int token;
		size_t lit, ml, off;

		if (p == end)
			goto truncated;
		token = *p++;
		lit = token >> 4;
		if (lit == LZ4_RUN_MASK) {
			uint8_t b;

			do {
				if (p == end)
					goto truncated;
				b = *p++;
				lit += b;
			} while (b == 255);
		}
		if (lit > (size_t)(end - p))
			goto truncated;
		p += lit;
		out += lit;
		if (out > cap)
			goto too_big;
		if (p == end)
			break; /* the last sequence: literals only */

		if (end - p < 2)
			goto truncated;
		off = bfs_le16(p);
		p += 2;
		if (off == 0 || (!linked && off > out)) {
			*why = "lz4 match offset out of range";
			return -EBADMSG;
		}
		ml = token & LZ4_RUN_MASK;
		if (ml == LZ4_RUN_MASK) {
			uint8_t b;

			do {
				if (p == end)
					goto truncated;
				b = *p++;
				ml += b;
			} while (b == 255);
		}
		/* ml <= 255 * len: no overflow, and cap stops it soon anyway */
		out += ml + LZ4_MIN_MATCH;
		if (out > cap)
			goto too_big;
	}
	if (out == 0 && !linked) {
		/* Valid LZ4, but no writer emits it and the index has no room for it. */
		*why = "lz4 block decodes to nothing";
		return -EBADMSG;
	}
	*usize = (uint32_t)out;
	return 0;

truncated:
	*why = "lz4 block ends inside a sequence";
	return -EBADMSG;
too_big:
	*why = "lz4 block decodes past the block max size";
	return -EBADMSG;
}

static bool is_legacy(const struct bfs_blk *blk)
{
	return blk->aux == LEGACY_BMAX;
}

static bool is_span(const struct bfs_blk *blk)
{
	return blk->aux & BFS_LZ4_SPAN_TAG;
}

/*
 * The block max size recorded by scan (of each block in a span), or the
 * format's largest if unset.
 */
static uint32_t block_cap(const struct bfs_blk *blk)
{
	uint32_t bmax = blk->aux & ~BFS_LZ4_SPAN_TAG;

	if (is_legacy(blk))
		return LEGACY_BMAX;
	return bmax && bmax <= BMAX_LARGEST ? bmax : BMAX_LARGEST;
}

/*
 * Check the block header in @src against what the index says, so that a
 * file changed since the scan cannot send us past @src's clen bytes.
 */
static int check_block(const struct bfs_blk *blk, const uint8_t *src, bool *stored, uint32_t *dlen,
		       const char **why)
{
	uint32_t csum = blk->flags & BFS_BLK_CSUM ? BLK_CSUM_LEN : 0;
	uint32_t word, dmax = block_cap(blk);

	if (is_span(blk)) {
		*why = "lz4 span decodes only with its checkpoint";
		return -EBADMSG;
	}
	if (blk->clen < BLK_HDR_LEN + csum)
		goto mismatch;
	word = bfs_le32(src);
	*stored = word & BLK_STORED;
	*dlen = word & BLK_SIZE_MASK;
	if (is_legacy(blk)) {
		/* a size word, no stored bit, no checksum */
		*stored = false;
		*dlen = word;
		dmax = LEGACY_DLEN_MAX;
	}
	if (*dlen == 0 || *dlen > dmax || *dlen != blk->clen - BLK_HDR_LEN - csum)
		goto mismatch;
	return 0;
mismatch:
	*why = "block header does not match the index";
	return -EBADMSG;
}

/*
 * check_block(), then what a decode of @blk needs before it starts: @len_ok
 * (the caller's length rule) and a usize within the frame's maximum, the
 * block checksum when @verify (it covers the data as stored, so it is
 * checked before decoding), and a stored block's length.
 */
static int check_data(const struct bfs_blk *blk, const uint8_t *src, bool len_ok, bool verify,
		      bool *stored, uint32_t *dlen, const char **why)
{
	const uint8_t *data = src + BLK_HDR_LEN;
	int rc = check_block(blk, src, stored, dlen, why);

	if (rc < 0)
		return rc;
	if (!len_ok || blk->usize > block_cap(blk)) {
		*why = "block decodes to a different length";
		return -EBADMSG;
	}
	if (verify && (blk->flags & BFS_BLK_CSUM) &&
	    bfs_xxh32(data, *dlen, 0) != bfs_le32(data + *dlen)) {
		*why = "block checksum mismatch";
		return -EILSEQ;
	}
	if (*stored && *dlen != blk->usize) {
		*why = "block decodes to a different length";
		return -EBADMSG;
	}
	return 0;
}

/*
 * A span of a linked frame (a cache entry's size that differs from the
 * rest is measured before it places later blocks): the sum of its
 * blocks, which must fill its clen exactly.
 */
static int measure_span(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
			const char **why)
{
	uint32_t csum = blk->flags & BFS_BLK_CSUM ? BLK_CSUM_LEN : 0, bmax = block_cap(blk);
	uint64_t pos = 0, total = 0;

	while (pos < blk->clen) {
		uint32_t word, dlen, u;
		const uint8_t *data;

		if (blk->clen - pos < BLK_HDR_LEN)
			goto mismatch;
		word = bfs_le32(src + pos);
		dlen = word & BLK_SIZE_MASK;
		if (dlen == 0 || dlen > bmax ||
		    blk->clen - pos - BLK_HDR_LEN < (uint64_t)dlen + csum)
			goto mismatch;
		data = src + pos + BLK_HDR_LEN;
		if (csum && bfs_xxh32(data, dlen, 0) != bfs_le32(data + dlen)) {
			*why = "block checksum mismatch";
			return -EBADMSG;
		}
		if (word & BLK_STORED) {
			u = dlen;
		} else if (measure_seq(data, dlen, bmax, true, &u, why) < 0) {
			return -EBADMSG;
		}
		total += u;
		if (total > BFS_LZ4_SPAN_USIZE_MAX) {
			*why = "lz4 span decodes past its limit";
			return -EBADMSG;
		}
		pos += BLK_HDR_LEN + dlen + csum;
	}
	if (total == 0) {
		*why = "lz4 span decodes to nothing";
		return -EBADMSG;
	}
	*usize = (uint32_t)total;
	return 0;
mismatch:
	*why = "block header does not match the index";
	return -EBADMSG;
}

static int lz4_measure(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
		       const char **why)
{
	uint32_t dlen;
	bool stored;
	int rc;

	if (is_span(blk))
		return measure_span(blk, src, usize, why);
	rc = check_block(blk, src, &stored, &dlen, why);
	if (rc < 0)
		return rc;
	/*
	 * The measured size places every later block, so a corrupt block
	 * that still parses would shift them all: check the checksum here
	 * whenever the block has one, whatever -o verify says.
	 */
	if ((blk->flags & BFS_BLK_CSUM) &&
	    bfs_xxh32(src + BLK_HDR_LEN, dlen, 0) != bfs_le32(src + BLK_HDR_LEN + dlen)) {
		*why = "block checksum mismatch";
		return -EBADMSG;
	}
	if (stored) {
		*usize = dlen;
		return 0;
	}
	return measure_seq(src + BLK_HDR_LEN, dlen, block_cap(blk), false, usize, why);
}

/*
 * A block from a writer that bends the end-of-block rules decodes only
 * with slack after its end; lz4 -d always gives it the block max size.
 * Decode such a block the same way into a scratch buffer. Only the
 * failure path pays for this.
 */
static int decode_with_slack(const struct bfs_blk *blk, const uint8_t *data, uint32_t dlen,
			     uint8_t *dst, const char **why)
{
	uint32_t cap = block_cap(blk);
	uint8_t *tmp = malloc(cap);
	int n;

	if (!tmp) {
		*why = "no memory to retry an lz4 block";
		return -ENOMEM;
	}
	n = LZ4_decompress_safe((const char *)data, (char *)tmp, (int)dlen, (int)cap);
	if (n == (int)blk->usize)
		memcpy(dst, tmp, blk->usize);
	free(tmp);
	if (n < 0) {
		*why = "lz4 block does not decode";
		return -EBADMSG;
	}
	if (n != (int)blk->usize) {
		*why = "block decodes to a different length";
		return -EBADMSG;
	}
	return 0;
}

static int block_whole(const struct bfs_blk *blk, const uint8_t *src, uint8_t *dst, bool verify,
		       const char **why)
{
	const uint8_t *data = src + BLK_HDR_LEN;
	uint32_t dlen;
	bool stored;
	int rc, n;

	rc = check_data(blk, src, blk->usize != 0, verify, &stored, &dlen, why);
	if (rc < 0)
		return rc;
	if (stored) {
		memcpy(dst, data, dlen);
		return 0;
	}
	n = LZ4_decompress_safe((const char *)data, (char *)dst, (int)dlen, (int)blk->usize);
	if (n == (int)blk->usize)
		return 0;
	if (n >= 0) {
		*why = "block decodes to a different length";
		return -EBADMSG;
	}
	return decode_with_slack(blk, data, dlen, dst, why);
}

/* Blocks smaller than this are walked through a window, not one read each. */
#define SMALL_BLOCK (8u << 10)
#define WINDOW	    (64u << 10)

/*
 * The first @n bytes: LZ4 stops decoding there, so a 4 KiB read at the
 * start of a 4 MiB block costs a 4 KiB decode, not 4 MiB. A block
 * checksum covers the compressed bytes, so it is checked all the same.
 */
static int block_prefix(const struct bfs_blk *blk, const uint8_t *src, uint8_t *dst, uint32_t n,
			bool verify, const char **why)
{
	const uint8_t *data = src + BLK_HDR_LEN;
	uint32_t dlen;
	bool stored;
	int rc, got;

	rc = check_data(blk, src, n != 0 && n < blk->usize, verify, &stored, &dlen, why);
	if (rc < 0)
		return rc;
	if (stored) {
		memcpy(dst, data, n);
		return 0;
	}
	/* srcSize is the block's exact size (Note 4 of lz4.h): no silent overrun */
	got = LZ4_decompress_safe_partial((const char *)data, (char *)dst, (int)dlen, (int)n,
					  (int)n);
	if (got == (int)n)
		return 0;
	*why = got < 0 ? "lz4 block does not decode" : "block decodes to a different length";
	return -EBADMSG;
}

/* Spans of linked frames to codec_lz4_linked.c; every other block here, whole or a prefix. */
static int lz4_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		      uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];

	if (is_span(b))
		return bfs_lz4_span_decode(idx, k, src, dst, n, verify, why);
	if (n == b->usize)
		return block_whole(b, src, dst, verify, why);
	return block_prefix(b, src, dst, n, verify, why);
}

/* Per-scan state: the io, one buffer for measuring last blocks, and the window. */
struct walk {
	struct bfs_io *io;
	struct bfs_index *idx;
	uint8_t *buf;
	size_t bufcap;
	uint8_t *win; /* WINDOW bytes of the file from win_off, win_len valid */
	uint64_t win_off;
	size_t win_len;
};

/*
 * The 4-byte block header at @pos. A writer that flushes often (python-lz4
 * with auto_flush: a block per call) makes blocks of a few hundred bytes,
 * and a read per header would be a system call per block: after a small
 * block, read a window of the file and take the next headers from it.
 * After a big one the next header is far, and only it is read.
 */
static int read_header(struct walk *w, uint64_t pos, uint32_t last_clen, uint8_t *hdr)
{
	uint64_t size = w->io->size;
	int rc;

	if (pos >= w->win_off && pos - w->win_off + BLK_HDR_LEN <= w->win_len) {
		memcpy(hdr, w->win + (pos - w->win_off), BLK_HDR_LEN);
		return 0;
	}
	if (last_clen >= SMALL_BLOCK)
		return bfs_io_read(w->io, hdr, BLK_HDR_LEN, pos);
	if (!w->win && !(w->win = malloc(WINDOW)))
		return -ENOMEM;
	w->win_off = pos;
	w->win_len = size - pos < WINDOW ? (size_t)(size - pos) : WINDOW;
	rc = bfs_io_read(w->io, w->win, w->win_len, pos);
	if (rc < 0) {
		w->win_len = 0;
		return rc;
	}
	memcpy(hdr, w->win, BLK_HDR_LEN);
	return 0;
}

static int add_block(struct walk *w, uint64_t coff, uint32_t clen, uint32_t usize, uint32_t flags,
		     uint32_t bmax)
{
	int rc = bfs_index_add(w->idx, coff, clen, usize, flags);

	if (rc == 0)
		w->idx->blk[w->idx->n - 1].aux = bmax;
	return rc;
}

/* Read the data of the block at @coff and measure it; 1 with *@why when corrupt. */
static int measure_at(struct walk *w, uint64_t coff, uint32_t dlen, uint32_t bmax, uint32_t *usize,
		      const char **why)
{
	int rc;

	if (w->bufcap < dlen) { /* dlen <= LEGACY_DLEN_MAX: checked by the caller */
		free(w->buf);
		w->bufcap = 0;
		w->buf = malloc(dlen);
		if (!w->buf)
			return -ENOMEM;
		w->bufcap = dlen;
	}
	rc = bfs_io_read(w->io, w->buf, dlen, coff + BLK_HDR_LEN);
	if (rc < 0)
		return rc;
	return measure_seq(w->buf, dlen, bmax, false, usize, why) < 0 ? 1 : 0;
}

/*
 * A frame of guessed blocks declares its content size @csize; @sum is
 * what its blocks hold if every guess is right. Each guess is the block
 * max, which no block exceeds, so when the sums agree every guess is
 * right, as far as the header can be believed: the guesses become claims,
 * checked in order before they place later blocks (bfs_settle()),
 * and nothing is measured now. When they disagree some block is short
 * (a writer that flushed): every guess is measured after the scan and
 * the frame's total checked then.
 */
static int sum_guesses(struct bfs_index *idx, size_t first, uint64_t sum, uint64_t csize)
{
	if (sum != csize)
		return bfs_index_expect_sum(idx, first, idx->n - 1, csize);
	for (size_t k = first; k < idx->n; k++)
		if (idx->blk[k].flags & BFS_BLK_GUESS)
			idx->blk[k].flags |= BFS_BLK_CLAIMED;
	return 0;
}

/*
 * Walk the blocks of one frame whose header ends at @pos. A compressed
 * block is held back until the next header says whether it was the last
 * (then it is measured) or not (then its size is guessed: the block max,
 * what the lz4 CLI writes; bfs_measure() or the content size make
 * it exact before the file's size is shown).
 * Return: 0 and *@next after the frame, 1 when the index was marked
 * broken, or -errno.
 */
static int walk_blocks(struct walk *w, const struct frame *f, uint64_t pos, uint64_t *next)
{
	uint64_t size = w->io->size, pend_off = 0, sum = 0;
	uint32_t csum = f->bcsum ? BLK_CSUM_LEN : 0, flags = f->bcsum ? BFS_BLK_CSUM : 0;
	uint32_t pend_clen = 0, usize, last = 0;
	size_t first = w->idx->n;
	bool exact = true;
	const char *why;
	int rc;

	for (;;) {
		uint8_t hdr[BLK_HDR_LEN];
		uint32_t word, dlen, clen;

		if (!bfs_range_ok(pos, BLK_HDR_LEN, size)) {
			why = "block header past end of file";
			goto broken;
		}
		rc = read_header(w, pos, last, hdr);
		if (rc < 0)
			return rc;
		word = bfs_le32(hdr);
		if (word == ENDMARK) {
			pos += BLK_HDR_LEN;
			break;
		}
		dlen = word & BLK_SIZE_MASK;
		if (dlen == 0) {
			/* lz4 -d reads 0x80000000 as an EndMark; the format says 0 only. */
			why = "empty stored block";
			goto broken;
		}
		if (dlen > f->bmax) {
			why = "block size above the frame's block max";
			goto broken;
		}
		clen = BLK_HDR_LEN + dlen + csum;
		if (!bfs_range_ok(pos, clen, size)) {
			why = "block runs past end of file";
			goto broken;
		}
		if (pend_clen) {
			rc = add_block(w, pend_off, pend_clen, f->bmax, flags | BFS_BLK_GUESS,
				       f->bmax);
			if (rc < 0)
				return rc;
			pend_clen = 0;
			exact = false;
			sum += f->bmax;
		}
		if (word & BLK_STORED) {
			rc = add_block(w, pos, clen, dlen, flags, f->bmax);
			if (rc < 0)
				return rc;
			sum += dlen;
		} else {
			pend_off = pos;
			pend_clen = clen;
		}
		pos += clen;
		last = clen;
	}

	if (pend_clen) {
		rc = measure_at(w, pend_off, pend_clen - BLK_HDR_LEN - csum, f->bmax, &usize, &why);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			pos = pend_off; /* the damage is this block, not the EndMark */
			pend_clen = 0;
			goto broken;
		}
		rc = add_block(w, pend_off, pend_clen, usize, flags, f->bmax);
		if (rc < 0)
			return rc;
		pend_clen = 0;
		sum += usize;
	}
	if (f->ccsum) {
		if (!bfs_range_ok(pos, C_CSUM_LEN, size)) {
			why = "content checksum past end of file";
			goto broken;
		}
		pos += C_CSUM_LEN;
	}
	/* A declared size of 0 means "unknown" to liblz4 too. */
	if (f->has_csize && f->csize && exact && sum != f->csize) {
		bfs_index_mark_broken(w->idx, pos,
				      "lz4: frame ending at %" PRIu64 " holds %" PRIu64
				      " bytes, its header says %" PRIu64,
				      pos, sum, f->csize);
		return 1;
	}
	if (!exact && f->has_csize && f->csize) {
		rc = sum_guesses(w->idx, first, sum, f->csize);
		if (rc < 0)
			return rc;
	}
	*next = pos;
	return 0;

broken:
	/* The held-back block itself was whole: keep it, as a guess. */
	if (pend_clen) {
		rc = add_block(w, pend_off, pend_clen, f->bmax, flags | BFS_BLK_GUESS, f->bmax);
		if (rc < 0)
			return rc;
	}
	bfs_index_mark_broken(w->idx, pos, "lz4: %s at offset %" PRIu64, why, pos);
	return 1;
}

/*
 * The blocks of a legacy frame whose magic ends at @pos: size words and
 * data until the end of the file or a word too big to be a block's size,
 * the next frame's magic. As in walk_blocks(), a block is held back until
 * the next word says whether it was the frame's last (then it is
 * measured) or not (then it is guessed full: lz4 -l fills every block
 * but the last; bfs_measure() makes the guesses exact).
 * Return: 0 and *@next at the next frame or the end, 1 when the index
 * was marked broken, or -errno.
 */
static int walk_legacy(struct walk *w, uint64_t pos, uint64_t *next)
{
	uint64_t size = w->io->size, pend_off = 0;
	uint32_t pend_clen = 0, last = 0, usize;
	const char *why;
	int rc;

	while (pos < size) {
		uint8_t hdr[BLK_HDR_LEN];
		uint32_t word;

		if (!bfs_range_ok(pos, BLK_HDR_LEN, size)) {
			why = "legacy block header past end of file";
			goto broken;
		}
		rc = read_header(w, pos, last, hdr);
		if (rc < 0)
			return rc;
		word = bfs_le32(hdr);
		if (word > LEGACY_DLEN_MAX)
			break; /* a magic: the next frame */
		if (word == 0) {
			why = "empty legacy block";
			goto broken;
		}
		if (!bfs_range_ok(pos, BLK_HDR_LEN + (uint64_t)word, size)) {
			why = "legacy block runs past end of file";
			goto broken;
		}
		if (pend_clen) {
			rc = add_block(w, pend_off, pend_clen, LEGACY_BMAX, BFS_BLK_GUESS,
				       LEGACY_BMAX);
			if (rc < 0)
				return rc;
		}
		pend_off = pos;
		pend_clen = BLK_HDR_LEN + word;
		pos += pend_clen;
		last = pend_clen;
	}
	if (pend_clen) {
		rc = measure_at(w, pend_off, pend_clen - BLK_HDR_LEN, LEGACY_BMAX, &usize, &why);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			pos = pend_off;
			pend_clen = 0;
			goto broken;
		}
		rc = add_block(w, pend_off, pend_clen, usize, 0, LEGACY_BMAX);
		if (rc < 0)
			return rc;
	}
	*next = pos;
	return 0;

broken:
	if (pend_clen) {
		rc = add_block(w, pend_off, pend_clen, LEGACY_BMAX, BFS_BLK_GUESS, LEGACY_BMAX);
		if (rc < 0)
			return rc;
	}
	bfs_index_mark_broken(w->idx, pos, "lz4: %s at offset %" PRIu64, why, pos);
	return 1;
}

/*
 * The frame header at the start of the @got bytes in @h (magic already
 * checked): fields, length and header checksum. Return a static reason
 * when it is not valid, else NULL with *@f filled.
 */
static const char *check_header(const uint8_t *h, size_t got, struct frame *f)
{
	const char *why;

	if (got < HDR_MIN)
		return "frame header past end of file";
	why = check_flg_bd(h[4], h[5], f);
	if (why)
		return why;
	if (got < f->hlen)
		return "frame header past end of file";
	if ((uint8_t)(bfs_xxh32(h + MAGIC_LEN, f->hlen - MAGIC_LEN - 1, 0) >> 8) != h[f->hlen - 1])
		return "frame header checksum mismatch";
	f->csize = f->has_csize ? bfs_le64(h + 6) : 0;
	return NULL;
}

/*
 * Parse the frame header at @off from the @got bytes in @h. Return 0,
 * 1 when the index was marked broken, or -ENOTSUP for a first frame that
 * blockfs cannot serve at all.
 */
static int parse_header(struct bfs_index *idx, const uint8_t *h, size_t got, uint64_t off,
			bool first, struct frame *f)
{
	const char *why;

	why = check_header(h, got, f);
	if (why)
		goto broken;
	if (f->dict) {
		if (first)
			return -ENOTSUP;
		why = "frame needs a dictionary";
		goto broken;
	}
	return 0;
broken:
	bfs_index_mark_broken(idx, off, "lz4: %s at offset %" PRIu64, why, off);
	return 1;
}

/* Frames a gap between two table entries may hold before it is called a lie. */
#define GAP_HOPS_MAX 64

/*
 * Do the bytes [@pos, @end) hold only what may lie between two blocks the
 * table lists? When @close, first the EndMark (and content checksum) of
 * the frame *@f; then skippable frames and empty frames; then, when @next
 * is set, a frame header ending exactly at @end whose frame may hold
 * @next (parsed into *@f). One small read per element: a packed file has
 * one frame, so one read before its first block and one after its last.
 * Return: 0 when so, 1 when not, -errno from a read.
 */
static int check_gap(struct bfs_io *io, uint64_t pos, uint64_t end, struct frame *f, bool close,
		     const struct bfs_seektable_entry *next)
{
	uint8_t h[HDR_MAX];
	int rc;

	for (int hop = 0; hop < GAP_HOPS_MAX; hop++) {
		size_t got = end - pos < sizeof(h) ? (size_t)(end - pos) : sizeof(h);
		struct frame nf;
		uint32_t magic;

		if (close) { /* the frame's EndMark [content checksum] */
			if (!bfs_range_ok(pos, BLK_HDR_LEN + (f->ccsum ? C_CSUM_LEN : 0), end))
				return 1;
			rc = bfs_io_read(io, h, BLK_HDR_LEN, pos);
			if (rc < 0)
				return rc;
			if (bfs_le32(h) != ENDMARK)
				return 1;
			pos += BLK_HDR_LEN + (f->ccsum ? C_CSUM_LEN : 0);
			close = false;
			continue;
		}
		if (pos == end)
			return next ? 1 : 0;
		if (got < MAGIC_LEN)
			return 1;
		rc = bfs_io_read(io, h, got, pos);
		if (rc < 0)
			return rc;
		magic = bfs_le32(h);
		if (is_skippable(magic)) {
			if (got < SKIP_HDR_LEN ||
			    !bfs_range_ok(pos + SKIP_HDR_LEN, bfs_le32(h + MAGIC_LEN), end))
				return 1;
			pos += SKIP_HDR_LEN + bfs_le32(h + MAGIC_LEN);
			continue;
		}
		if (magic != FRAME_MAGIC || check_header(h, got, &nf) || !nf.indep || nf.dict)
			return 1;
		pos += nf.hlen;
		*f = nf;
		if (next && pos == end)
			return f->bmax == next->bmax && f->bcsum == next->csum ? 0 : 1;
		close = true; /* a frame without blocks */
	}
	return 1;
}

/*
 * A table can pass every check of bfs_seektable_decode() and still leave blocks
 * out, whose bytes would then vanish from the file: check that only frame
 * boundaries lie between its entries, before the first and after the
 * last, and that frames declaring their content size hold that much.
 * Return: 0, 1 when the table lies, -errno.
 */
static int check_coverage(struct bfs_io *io, const struct bfs_seektable *t)
{
	struct frame f = { 0 };
	uint64_t pos = 0, sum = 0;
	int rc;

	for (size_t i = 0; i <= t->n; i++) {
		const struct bfs_seektable_entry *e = i < t->n ? &t->e[i] : NULL;
		uint64_t end = e ? e->coff : t->table_off;

		if (i == 0 || pos != end) {
			if (i > 0 && f.has_csize && f.csize && sum != f.csize)
				return 1;
			rc = check_gap(io, pos, end, &f, i > 0, e);
			if (rc != 0)
				return rc;
			sum = 0;
		}
		if (e) {
			sum += e->usize;
			pos = e->coff + e->clen;
		}
	}
	return 0;
}

/*
 * Index the file from its seek table. Return 0 when done, 1 when there is
 * no usable table (walk instead), or -errno (-EIO, -ENOMEM).
 */
static int scan_table(struct bfs_io *io, struct bfs_index *idx)
{
	struct bfs_seektable t;
	uint32_t bmax = 0;
	const char *why;
	int rc;

	rc = bfs_seektable_load(io, idx->max_blocks, &t, &why);
	if (rc == 1 || rc == -EBADMSG)
		return 1; /* stale, foreign or damaged: the frames say it all */
	if (rc < 0)
		return rc;
	rc = check_coverage(io, &t);
	if (rc != 0) {
		free(t.e);
		return rc; /* 1: a table that lies is no table */
	}
	for (size_t i = 0; i < t.n; i++) {
		const struct bfs_seektable_entry *e = &t.e[i];

		rc = bfs_index_add(idx, e->coff, e->clen, e->usize, e->csum ? BFS_BLK_CSUM : 0);
		if (rc < 0)
			break;
		idx->blk[idx->n - 1].aux = e->bmax;
		if (e->bmax > bmax)
			bmax = e->bmax;
	}
	free(t.e);
	if (rc < 0)
		return rc; /* -ENOMEM: load already checked count and total */
	idx->block_size = t.block_size ? t.block_size : bmax;
	idx->source = BFS_SRC_SEEKTABLE;
	/* Sizes only the table states: an odd one is measured before it places others. */
	bfs_index_guess_irregular(idx, true);
	return 0;
}

static int lz4_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct walk w = { .io = io, .idx = idx };
	struct bfs_lz4_lwalk *lw = NULL;
	uint64_t off = 0;
	bool first = true;
	int rc = 0;

	(void)side; /* LZ4 has no sidecar index */
	rc = scan_table(io, idx);
	if (rc <= 0)
		return rc;
	rc = 0;
	while (off < io->size) {
		uint8_t h[HDR_MAX];
		size_t got = io->size - off < sizeof(h) ? (size_t)(io->size - off) : sizeof(h);
		struct frame f;
		uint32_t magic;

		rc = bfs_io_read(io, h, got, off);
		if (rc < 0)
			break;
		magic = got >= MAGIC_LEN ? bfs_le32(h) : 0;
		if (is_skippable(magic)) {
			uint64_t skip;

			if (got < SKIP_HDR_LEN) {
				bfs_index_mark_broken(idx, off,
						      "lz4: skippable frame header past "
						      "end of file at offset %" PRIu64,
						      off);
				break;
			}
			skip = bfs_le32(h + MAGIC_LEN);
			if (!bfs_range_ok(off + SKIP_HDR_LEN, skip, io->size)) {
				bfs_index_mark_broken(idx, off,
						      "lz4: skippable frame runs past "
						      "end of file at offset %" PRIu64,
						      off);
				break;
			}
			off += SKIP_HDR_LEN + skip;
			continue;
		}
		if (magic == LEGACY_MAGIC) {
			first = false;
			if (LEGACY_BMAX > idx->block_size)
				idx->block_size = LEGACY_BMAX;
			rc = walk_legacy(&w, off + MAGIC_LEN, &off);
			if (rc != 0)
				break;
			continue;
		}
		if (magic != FRAME_MAGIC) {
			bfs_index_mark_broken(idx, off, "lz4: not an lz4 frame at offset %" PRIu64,
					      off);
			break;
		}
		rc = parse_header(idx, h, got, off, first, &f);
		if (rc != 0)
			break;
		first = false;
		if (f.bmax > idx->block_size)
			idx->block_size = f.bmax;
		if (f.indep) {
			rc = walk_blocks(&w, &f, off + f.hlen, &off);
		} else {
			struct bfs_lz4_lframe lf = {
				.start = off,
				.data = off + f.hlen,
				.bmax = f.bmax,
				.bcsum = f.bcsum,
				.ccsum = f.ccsum,
				.csize = f.csize,
			};

			rc = bfs_lz4_lwalk_frame(&lw, io, idx, &lf, &off);
		}
		if (rc != 0)
			break;
	}
	bfs_lz4_lwalk_end(lw, idx, rc >= 0);
	free(w.buf);
	free(w.win);
	return rc < 0 ? rc : 0;
}

/* --- the index cache ------------------------------------------------------ */

/*
 * A block an LZ4 walk could have recorded: aux its frame's block max; a
 * legacy block (aux LEGACY_BMAX, no checksum); a span of a linked frame
 * (aux its frame's block max and BFS_LZ4_SPAN_TAG), whose checkpoint
 * lz4_cache_load() checks.
 */
static bool lz4_check_entry(const struct bfs_blk *b)
{
	uint32_t csum = b->flags & BFS_BLK_CSUM ? BLK_CSUM_LEN : 0;
	uint32_t bmax = b->aux & ~BFS_LZ4_SPAN_TAG;
	bool bmax_ok = false;

	if (is_legacy(b))
		return !csum && b->usize <= LEGACY_BMAX && b->clen > BLK_HDR_LEN &&
		       b->clen - BLK_HDR_LEN <= LEGACY_DLEN_MAX;
	for (unsigned int id = BMAX_ID_MIN; id <= BD_BMAX_MASK; id++)
		bmax_ok |= bmax == 1u << (8 + 2 * id);
	if (is_span(b))
		return bmax_ok && b->usize <= BFS_LZ4_SPAN_USIZE_MAX &&
		       b->clen > BLK_HDR_LEN + csum && b->clen <= BFS_LZ4_SPAN_CLEN_MAX;
	return bmax_ok && b->usize <= b->aux && b->clen > BLK_HDR_LEN + csum &&
	       b->clen - BLK_HDR_LEN - csum <= b->aux;
}

/*
 * Sizes the entry states are trusted as a seek table's are: a block of
 * the size most share, or its frame's block max, stands; any other is
 * measured before it places a later one (a span too: measure_span()).
 * (A walk measured every block before the entry was written; the entry
 * itself proves nothing.) The private bytes are the spans' checkpoints,
 * none without spans.
 */
static int lz4_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	int rc = bfs_lz4_lload(idx, priv, len);

	if (rc != 0)
		return rc;
	bfs_index_guess_irregular(idx, true);
	return 0;
}

static const struct bfs_suffix lz4_suffixes[] = { { ".lz4", "" }, { NULL, NULL } };

const struct bfs_codec bfs_codec_lz4 = {
	.name = "lz4",
	.suffixes = lz4_suffixes,
	.probe = lz4_probe,
	.prelude = lz4_prelude,
	.scan = lz4_scan,
	.decode = lz4_decode,
	.prefix = true,
	.measure = lz4_measure,
	.check_entry = lz4_check_entry,
	.cache_save = bfs_lz4_lsave,
	.cache_load = lz4_cache_load,
};

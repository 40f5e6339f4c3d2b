// SPDX-License-Identifier: MIT
/*
 * zstd (RFC 8878) from any writer: the zstd CLI (one frame, -T0 too),
 * pzstd, concatenations, Python's zstandard, and the zstd *seekable
 * format*. Probe, scan, decode with libzstd. Knows bytes only: no paths,
 * no cache; one leaf lock of its own (the parked decoders, below).
 *
 *   file   := (frame | skip)*
 *   frame  := | magic FD2FB528 | FHD | [WD] | [dict id, 0-4] | [FCS, 0-8] | block+ | [xxh64, 4] |
 *   skip   := | magic 184D2A5x | size, LE32 | size bytes |
 *   block  := | header, LE24: last (bit 0), type (bits 1-2), size (bits 3-23) | data |
 *               type 0 raw (size bytes), 1 RLE (1 byte, repeated size times),
 *               2 compressed (size bytes), 3 reserved
 *
 *   FHD  7-6 FCS field size  5 single segment  4 unused  3 reserved  2 checksum  1-0 dict id size
 *   WD   7-3 exponent  2-0 mantissa: window = 2^(10+e) + 2^(10+e)/8 * m  (single segment: the FCS)
 *
 * Three layouts, one index entry per block of blockfs:
 *
 *  - The seekable format (contrib/seekable_format of zstd): the file ends
 *    with a skippable frame (magic 184D2A5E) holding one entry per frame,
 *    | compressed size, LE32 | decompressed size, LE32 | [checksum, LE32] |,
 *    then the footer | frames, LE32 | descriptor (bit 7: checksums) |
 *    8F92EAB1 |. Indexed from the table alone: two reads of its end, two
 *    frame headers (the first and the last) checked. The frames must tile
 *    the file before the table exactly; sizes no frame header proves are
 *    distrusted as every seek table's (bfs_index_guess_irregular()). One
 *    block per frame; the checksum is the low 32 bits of XXH64 of the
 *    frame's output, kept in aux (BFS_BLK_CSUM) and checked with -o verify.
 *    libzstd keeps its XXH64 to itself, so this file has its own (xxh64()).
 *
 *  - Frames without a table: one walk of the frame and block headers.
 *    A frame holding at most FRAME_USIZE_MAX bytes is one block: its FCS
 *    when the header has one (a claim, as an LZ4 content size is), its
 *    exact size when its blocks are all raw or RLE, else a guess that
 *    bfs_measure() makes exact by decoding it (measure(), which counts
 *    the output and drops it: a read of the frame decodes it again).
 *
 *  - A bigger frame (the zstd CLI's default output: one frame per file)
 *    is cut into spans of SPAN bytes of output, flagged BFS_BLK_CHAIN: a
 *    span decodes only by continuing the decoder that decoded the span
 *    before it (codec.h, resume()).
 *
 *    With a content size in its header (zstd FILE writes one), the scan
 *    walks the block headers only, for where the frame ends, and the
 *    spans are open (BFS_BLK_OPEN): each states the whole frame's input,
 *    and a decoder takes its input from where it stands (open_decode()),
 *    so the first stat costs a read of the compressed bytes, not a
 *    decode. With -o verify (the default) the frame is decoded whole
 *    once, its checksum and size checked, before the first of its bytes
 *    is served (prove()): bytes a damaged frame decodes to are never
 *    served, as with the walk below; without verify, spans are served as
 *    they decode, as zstd -dc writes them. The proof's output goes to the
 *    spill (spill.h, -o spill_size) when it has room: once proven, spans
 *    are read from there instead of being decoded a second time, and a
 *    read in the middle of the frame costs a pread. A frame the spill
 *    cannot take, or whose spill is dropped, is decoded again, span by
 *    span, as without one.
 *
 *    Without one (zstd reading a pipe), or when the block headers are
 *    damaged (a cut file), the frame is decoded once during the scan;
 *    each span's output goes to the spill as it is decoded (index.h,
 *    kept), and is recorded there once the frame ends with its checksum
 *    right, so that reads of a proven frame are served from it.
 *    The walk records where its input stood at each span boundary; libzstd's
 *    streaming decoder consumes input greedily but deterministically, so
 *    a decoder given exactly the span's bytes [coff, coff + clen) and
 *    room for exactly usize bytes ends where the walk's did: decode()
 *    checks that (input all consumed, output full, the frame ended iff
 *    the span is its last, the next span starting where this one's input
 *    ended). Spans are outputs of one decoder in order, so whatever the
 *    split an index states, the bytes at any offset are the frame's bytes
 *    there; a split that does not fit the input fails a span, and every
 *    span after it. aux: the span's number within its frame, SPAN_END on
 *    a frame's last span.
 *
 * Decoders between spans are parked in a pool (struct park): at most
 * PARK_PER_FILE per file, and within the mount's budget of parked
 * decoders, which xz's count against too (park.h, BFS_PARK_BUDGET): least
 * recently parked go first; the one being parked always stays. A parked decoder is its
 * window plus libzstd's buffers: ZSTD_sizeof_DCtx(), about the window
 * plus 256 KiB (see doc in man 5 blockfs).
 *
 * Damage: a frame that fails to decode or whose checksum does not match
 * is lost whole, as a gzip member is (bytes decoded before an error may
 * be wrong already); a file that stops inside a big frame keeps the spans
 * decoded whole before the cut. Windows above ZSTD_WINDOWLOG_LIMIT_DEFAULT
 * (128 MiB), which zstd -d refuses without --memory, and frames that need
 * a dictionary make scan() return -ENOTSUP when they come first, and are
 * damage after a good frame.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* For ZSTD_d_forceIgnoreChecksum, the one experimental parameter used here. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "blockfs/codec.h"
#include "blockfs/park.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/spill.h"

/* RFC 8878, 3.1.1 and 3.1.2 */
#define ZMAGIC		0xFD2FB528u
#define SKIP_MAGIC	0x184D2A50u
#define SKIP_MAGIC_MASK 0xFFFFFFF0u
#define MAGIC_LEN	4
#define SKIP_HDR_LEN	8
#define FHD_FCS_SHIFT	6
#define FHD_SINGLE	(1u << 5)
#define FHD_RESERVED	(1u << 3)
#define FHD_CSUM	(1u << 2)
#define FHD_DICT_MASK	3u
#define HDR_MAX		18 /* magic FHD WD dict(4) FCS(8) */
#define WINDOW_LOG_MIN	10
#define BLK_HDR_LEN	3
#define BLK_RAW		0u
#define BLK_RLE		1u
#define BLK_COMPRESSED	2u
#define BLOCK_MAX	(128u << 10) /* Block_Maximum_Size's upper bound */
#define CSUM_LEN	4
#define FRAME_MIN	(MAGIC_LEN + 2 + BLK_HDR_LEN)

/* zstd's contrib/seekable_format/zstd_seekable_compression_format.md */
#define SEEK_SKIP_MAGIC	    0x184D2A5Eu
#define SEEK_FOOTER_MAGIC   0x8F92EAB1u
#define SEEK_FOOTER_LEN	    9
#define SEEK_CSUM_FLAG	    0x80u
#define SEEK_RESERVED	    0x7Cu
#define SEEK_ENTRY_LEN	    8
#define SEEK_ENTRY_CSUM_LEN 12

/* What zstd -d accepts without --memory: 2^27. */
#define WINDOW_MAX (1ull << ZSTD_WINDOWLOG_LIMIT_DEFAULT)

/*
 * A frame holding at most this much is one block. A reader of a few
 * bytes inside it pays for decoding up to them (a prefix decode), at
 * most 32 MiB, which is what a single frame's span restart costs too;
 * pzstd's frames (a few MiB) and seekable-format frames stay whole and
 * decode in parallel, and the block cache takes them as it takes a
 * 64 MiB gzip span at most.
 */
#define FRAME_USIZE_MAX (32u << 20)
/*
 * Output per span of a bigger frame: what a sequential reader decodes per
 * step and a random reader at least; gzip's span default for the same
 * reasons (codec_gzip.c).
 */
#define SPAN		(1u << 20)
/* Input one span may take: beyond it the frame is damage (empty blocks by the million). */
#define SPAN_CLEN_MAX	(64u << 20)
/* aux of a chain span: its number in the frame, and this bit on the frame's last. */
#define SPAN_END	(1u << 31)
#define SPAN_SEQ_MASK	(SPAN_END - 1)

/* The walk reads the file through a window of this many bytes ... */
#define WINDOW	    (64u << 10)
/* ... after a block smaller than this, else only the next header. */
#define SMALL_BLOCK (8u << 10)
/* Compressed input per read and output per call while decoding a big frame. */
#define CHUNK	    (1u << 20)
#define SCRATCH	    (256u << 10)
/* Input read at a time for an open span (BFS_BLK_OPEN). */
#define OPEN_READ   (256u << 10)

/* Parked decoders per file, and a thread's spare kept up to this size. */
#define PARK_PER_FILE 4
#define TLS_KEEP      (4u << 20)

static bool is_skippable(uint32_t magic)
{
	return (magic & SKIP_MAGIC_MASK) == SKIP_MAGIC;
}

/* ---- XXH64 (the xxHash specification), for the seek table's checksums ---- */

#define P64_1 0x9E3779B185EBCA87ull
#define P64_2 0xC2B2AE3D27D4EB4Full
#define P64_3 0x165667B19E3779F9ull
#define P64_4 0x85EBCA77C2B2AE63ull
#define P64_5 0x27D4EB2F165667C5ull

static uint64_t rotl64(uint64_t x, unsigned int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t xxh_round(uint64_t acc, uint64_t in)
{
	return rotl64(acc + in * P64_2, 31) * P64_1;
}

static uint64_t xxh_merge(uint64_t h, uint64_t v)
{
	return (h ^ xxh_round(0, v)) * P64_1 + P64_4;
}

/* XXH64 of @len bytes at @p, seed 0: what zstd's checksums are the low 32 bits of. */
static uint64_t xxh64(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = P64_1 + P64_2, v2 = P64_2, v3 = 0, v4 = 0 - P64_1;

		for (; end - p >= 32; p += 32) {
			v1 = xxh_round(v1, bfs_le64(p));
			v2 = xxh_round(v2, bfs_le64(p + 8));
			v3 = xxh_round(v3, bfs_le64(p + 16));
			v4 = xxh_round(v4, bfs_le64(p + 24));
		}
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
		h = xxh_merge(xxh_merge(xxh_merge(xxh_merge(h, v1), v2), v3), v4);
	} else {
		h = P64_5;
	}
	h += len;
	for (; end - p >= 8; p += 8)
		h = rotl64(h ^ xxh_round(0, bfs_le64(p)), 27) * P64_1 + P64_4;
	if (end - p >= 4) {
		h = rotl64(h ^ (uint64_t)bfs_le32(p) * P64_1, 23) * P64_2 + P64_3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl64(h ^ *p * P64_5, 11) * P64_1;
	h ^= h >> 33;
	h *= P64_2;
	h ^= h >> 29;
	h *= P64_3;
	return h ^ (h >> 32);
}

/* For the tests: the low 32 bits, as the seek table and frame checksums hold them. */
uint32_t bfs_zstd_xxh64_low(const void *p, size_t len)
{
	return (uint32_t)xxh64(p, len);
}

/* ---- frame headers ---- */

struct fhdr {
	uint32_t hlen;	 /* magic through FCS */
	uint64_t window; /* Window_Size */
	uint64_t fcs;	 /* Frame_Content_Size, when has_fcs */
	uint32_t dict;	 /* Dictionary_ID, 0 when absent */
	bool has_fcs, csum;
};

/*
 * Parse the frame header at @p (@len bytes there, magic checked by the
 * caller). Return: 0 with *@h; 1 when @len is too short to tell; -EBADMSG
 * with *@why.
 */
static int parse_fhdr(const uint8_t *p, size_t len, struct fhdr *h, const char **why)
{
	static const uint8_t dict_len[4] = { 0, 1, 2, 4 }, fcs_len[4] = { 0, 2, 4, 8 };
	uint8_t fhd;
	unsigned int fl, dl;
	const uint8_t *q;

	if (len < MAGIC_LEN + 1)
		return 1;
	fhd = p[MAGIC_LEN];
	if (fhd & FHD_RESERVED) {
		*why = "reserved frame header bit set";
		return -EBADMSG;
	}
	fl = fcs_len[fhd >> FHD_FCS_SHIFT];
	if (fl == 0 && (fhd & FHD_SINGLE))
		fl = 1;
	dl = dict_len[fhd & FHD_DICT_MASK];
	h->hlen = MAGIC_LEN + 1 + ((fhd & FHD_SINGLE) ? 0 : 1) + dl + fl;
	if (len < h->hlen)
		return 1;
	q = p + MAGIC_LEN + 1;
	if (!(fhd & FHD_SINGLE)) {
		unsigned int wlog = WINDOW_LOG_MIN + (*q >> 3);
		uint64_t base = 1ull << wlog;

		h->window = base + (base >> 3) * (*q & 7u);
		q++;
	}
	h->dict = dl == 1 ? q[0] : dl == 2 ? bfs_le16(q) : dl == 4 ? bfs_le32(q) : 0;
	q += dl;
	h->has_fcs = fl != 0;
	h->fcs = fl == 1 ? q[0] :
		 fl == 2 ? bfs_le16(q) + 256u :
		 fl == 4 ? bfs_le32(q) :
		 fl == 8 ? bfs_le64(q) :
			   0;
	if (fhd & FHD_SINGLE)
		h->window = h->fcs;
	h->csum = fhd & FHD_CSUM;
	return 0;
}

/* A frame blockfs cannot serve at all: the reason, else NULL. */
static const char *unservable(const struct fhdr *h)
{
	if (h->dict)
		return "zstd frame needs a dictionary";
	if (h->window > WINDOW_MAX)
		return "zstd window larger than 128 MiB (zstd -d needs --memory= for it)";
	return NULL;
}

static uint32_t block_max(const struct fhdr *h)
{
	return h->window < BLOCK_MAX ? (uint32_t)h->window : BLOCK_MAX;
}

/* A zstd frame (not a skippable one: prelude() takes those). */
static bool zstd_probe(const uint8_t *head, size_t len)
{
	struct fhdr h;
	const char *why;

	if (len < MAGIC_LEN + 1 || bfs_le32(head) != ZMAGIC)
		return false;
	/* a header longer than the probe's bytes: magic and FHD must do */
	return parse_fhdr(head, len, &h, &why) >= 0;
}

static uint64_t zstd_prelude(const uint8_t *head, size_t len)
{
	if (len < SKIP_HDR_LEN || !is_skippable(bfs_le32(head)))
		return 0;
	return SKIP_HDR_LEN + (uint64_t)bfs_le32(head + MAGIC_LEN);
}

/* ---- reading the file through a window ---- */

struct rd {
	struct bfs_io *io;
	uint8_t *win; /* WINDOW bytes of the file from off, len valid */
	uint64_t off;
	size_t len;
};

/*
 * Up to @want (<= WINDOW) bytes at @pos (fewer at the end of the file):
 * *@p and *@got. @wide: fill a whole window, the next headers are near.
 */
static int rd_get(struct rd *r, uint64_t pos, size_t want, bool wide, const uint8_t **p,
		  size_t *got)
{
	uint64_t left = r->io->size - pos;
	size_t n;
	int rc;

	if (pos > r->io->size)
		return -EINVAL;
	if (want > left)
		want = (size_t)left;
	if (pos < r->off || pos - r->off > r->len || want > r->len - (pos - r->off)) {
		if (!r->win && !(r->win = malloc(WINDOW)))
			return -ENOMEM;
		n = wide ? WINDOW : want;
		if (n > left)
			n = (size_t)left;
		r->len = 0;
		rc = bfs_io_read(r->io, r->win, n, pos);
		if (rc < 0)
			return rc;
		r->off = pos;
		r->len = n;
	}
	*p = r->win + (pos - r->off);
	*got = want;
	return 0;
}

/* What the blocks of one frame say without decoding them. */
struct fblocks {
	uint64_t end;	/* after the frame (its checksum included) */
	uint64_t bound; /* content at most: raw and RLE sizes, block max per compressed */
	bool exact;	/* raw and RLE blocks only: bound is the content size */
	bool big;	/* stopped early: bound passed FRAME_USIZE_MAX */
};

/*
 * Walk the block headers of the frame whose header @h ends at @pos, up to
 * @limit (the end of the file). @stop_big: stop once the frame may hold
 * more than FRAME_USIZE_MAX. Return: 0, -EBADMSG with *@why (*@at where),
 * or -errno from the read.
 */
static int walk_blocks(struct rd *r, const struct fhdr *h, uint64_t pos, uint64_t limit,
		       bool stop_big, struct fblocks *fb, const char **why, uint64_t *at)
{
	uint32_t bmax = block_max(h), last_len = 0;

	*fb = (struct fblocks){ .exact = true };
	for (;;) {
		const uint8_t *p;
		uint32_t v, type, size, clen;
		size_t got;
		int rc;

		*at = pos;
		if (!bfs_range_ok(pos, BLK_HDR_LEN, limit)) {
			*why = "zstd block header past end of file";
			return -EBADMSG;
		}
		rc = rd_get(r, pos, BLK_HDR_LEN, last_len < SMALL_BLOCK, &p, &got);
		if (rc < 0)
			return rc;
		v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
		type = (v >> 1) & 3u;
		size = v >> 3;
		if (type == 3) {
			*why = "reserved zstd block type";
			return -EBADMSG;
		}
		if (size > bmax) {
			*why = "zstd block larger than its frame's block maximum";
			return -EBADMSG;
		}
		clen = type == BLK_RLE ? 1 : size;
		if (!bfs_range_ok(pos + BLK_HDR_LEN, clen, limit)) {
			*why = "zstd block runs past end of file";
			return -EBADMSG;
		}
		fb->bound += type == BLK_COMPRESSED ? bmax : size;
		fb->exact &= type != BLK_COMPRESSED;
		pos += BLK_HDR_LEN + clen;
		last_len = BLK_HDR_LEN + clen;
		if (v & 1u)
			break;
		if (stop_big && fb->bound > FRAME_USIZE_MAX) {
			fb->big = true;
			return 0;
		}
	}
	if (h->csum) {
		*at = pos;
		if (!bfs_range_ok(pos, CSUM_LEN, limit)) {
			*why = "zstd frame checksum past end of file";
			return -EBADMSG;
		}
		pos += CSUM_LEN;
	}
	fb->big = fb->bound > FRAME_USIZE_MAX;
	fb->end = pos;
	return 0;
}

/* ---- decoders ---- */

/* libzstd's error as ours: a checksum is -EILSEQ, anything else corrupt data. */
static int zerr(size_t r, const char **why)
{
	switch (ZSTD_getErrorCode(r)) {
	case ZSTD_error_checksum_wrong:
		*why = "zstd frame checksum mismatch";
		return -EILSEQ;
	case ZSTD_error_memory_allocation:
		*why = "no memory for a zstd decoder";
		return -ENOMEM;
	default:
		*why = "corrupt zstd data";
		return -EBADMSG;
	}
}

/* A decoder set up as every one here is: the window limit, and checksums iff @verify. */
static int setup(ZSTD_DCtx *d, bool verify)
{
	if (ZSTD_isError(ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters)) ||
	    ZSTD_isError(
		    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, ZSTD_WINDOWLOG_LIMIT_DEFAULT)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_forceIgnoreChecksum,
						verify ? ZSTD_d_validateChecksum :
							 ZSTD_d_ignoreChecksum)))
		return -ENOMEM;
	return 0;
}

/* Per thread: a decoder for whole frames and prefixes, dropped when it grew big. */
static pthread_key_t tls_key, tls_out_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_err;

static void tls_free(void *p)
{
	ZSTD_freeDCtx(p);
}

static void tls_create(void)
{
	tls_err = pthread_key_create(&tls_key, tls_free);
	if (tls_err == 0)
		tls_err = pthread_key_create(&tls_out_key, free);
}

static ZSTD_DCtx *tls_dctx(bool verify)
{
	ZSTD_DCtx *d;

	if (pthread_once(&tls_once, tls_create) != 0 || tls_err != 0)
		return NULL;
	d = pthread_getspecific(tls_key);
	if (!d) {
		d = ZSTD_createDCtx();
		if (!d)
			return NULL;
		if (pthread_setspecific(tls_key, d) != 0) {
			ZSTD_freeDCtx(d);
			return NULL;
		}
	}
	return setup(d, verify) == 0 ? d : NULL;
}

/* After a streaming use: a decoder that took a big window goes, not to pin it. */
static void tls_trim(void)
{
	ZSTD_DCtx *d = pthread_getspecific(tls_key);

	if (d && ZSTD_sizeof_DCtx(d) > TLS_KEEP) {
		ZSTD_freeDCtx(d);
		(void)pthread_setspecific(tls_key, NULL);
	}
}

/*
 * The frame at @src is one whole frame of exactly @clen bytes that
 * blockfs serves: the checks before any decode of a frame block.
 */
static int check_frame(const uint8_t *src, uint32_t clen, struct fhdr *h, const char **why)
{
	size_t fsize;
	int rc;

	if (clen < FRAME_MIN || bfs_le32(src) != ZMAGIC)
		goto mismatch;
	rc = parse_fhdr(src, clen, h, why);
	if (rc < 0)
		return rc;
	if (rc > 0)
		goto mismatch;
	if ((*why = unservable(h)))
		return -EBADMSG;
	fsize = ZSTD_findFrameCompressedSize(src, clen);
	if (ZSTD_isError(fsize) || fsize != clen)
		goto mismatch;
	return 0;
mismatch:
	*why = "zstd frame does not match the index";
	return -EBADMSG;
}

/* Whole frame blocks. */
static int frame_decode(const struct bfs_blk *blk, const uint8_t *src, uint8_t *dst, bool verify,
			const char **why)
{
	ZSTD_DCtx *d;
	struct fhdr h;
	size_t r;
	int rc = check_frame(src, blk->clen, &h, why);

	if (rc < 0)
		return rc;
	if (h.has_fcs && h.fcs != blk->usize) {
		*why = "zstd frame decodes to a different length";
		return -EBADMSG;
	}
	d = tls_dctx(verify);
	if (!d) {
		*why = "no memory for a zstd decoder";
		return -ENOMEM;
	}
	r = ZSTD_decompressDCtx(d, dst, blk->usize, src, blk->clen);
	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ?
			       (*why = "zstd frame decodes to a different length", -EBADMSG) :
			       zerr(r, why);
	if (r != blk->usize) {
		*why = "zstd frame decodes to a different length";
		return -EBADMSG;
	}
	if (verify && (blk->flags & BFS_BLK_CSUM) && (uint32_t)xxh64(dst, r) != blk->aux) {
		*why = "zstd seek table checksum mismatch";
		return -EILSEQ;
	}
	return 0;
}

/* The first @n bytes of a frame block: a streaming decode that stops there. */
static int frame_prefix(const struct bfs_blk *blk, const uint8_t *src, uint8_t *dst, uint32_t n,
			bool verify, const char **why)
{
	ZSTD_inBuffer in = { .src = src, .size = blk->clen };
	ZSTD_outBuffer out = { .dst = dst, .size = n };
	ZSTD_DCtx *d;
	struct fhdr h;
	int rc = check_frame(src, blk->clen, &h, why);

	if (rc < 0)
		return rc;
	if (n == 0 || n >= blk->usize || (h.has_fcs && h.fcs != blk->usize)) {
		*why = "zstd frame decodes to a different length";
		return -EBADMSG;
	}
	d = tls_dctx(verify);
	if (!d) {
		*why = "no memory for a zstd decoder";
		return -ENOMEM;
	}
	while (out.pos < out.size) {
		size_t before = in.pos + out.pos, r = ZSTD_decompressStream(d, &out, &in);

		if (ZSTD_isError(r)) {
			rc = zerr(r, why);
			break;
		}
		if (r == 0 || in.pos + out.pos == before) {
			if (out.pos < out.size) {
				*why = "zstd frame holds fewer bytes than the index says";
				rc = -EBADMSG;
			}
			break;
		}
	}
	tls_trim();
	return rc;
}

/*
 * Measuring without keeping the output: a streaming decode through this
 * much output per call, one buffer per thread, reused, so that a frame's
 * size costs no buffer the size of the frame. One zstd block's most.
 */
#define MEASURE_OUT BLOCK_MAX

/*
 * The checks before measuring the frame block at @src (zstd_measure()):
 * a whole frame, servable, with blocks; *@cap the most it may hold,
 * *@window its window.
 */
static int measure_check(const struct bfs_blk *blk, const uint8_t *src, uint64_t *cap,
			 uint64_t *window, const char **why)
{
	struct bfs_io io;
	struct rd r = { .io = &io };
	struct fblocks fb;
	struct fhdr h;
	uint64_t at;
	int rc;

	if (blk->flags & BFS_BLK_CHAIN) {
		*why = "zstd span measured alone"; /* never: spans are exact */
		return -EBADMSG;
	}
	rc = check_frame(src, blk->clen, &h, why);
	if (rc < 0)
		return rc;
	bfs_io_init_mem(&io, src, blk->clen);
	rc = walk_blocks(&r, &h, h.hlen, blk->clen, false, &fb, why, &at);
	free(r.win);
	if (rc < 0)
		return rc == -ENOMEM ? (*why = "no memory", rc) : -EBADMSG;
	*cap = h.has_fcs ? h.fcs : fb.bound;
	*window = h.window;
	if (*cap > FRAME_USIZE_MAX || *cap == 0 || fb.bound == 0) {
		*why = *cap == 0 || fb.bound == 0 ? "zstd frame holds nothing" :
						    "zstd frame larger than a block may be";
		return -EBADMSG;
	}
	return 0;
}

/* This thread's MEASURE_OUT bytes for measure_count(), kept for its next frame. */
static uint8_t *tls_measure_buf(void)
{
	uint8_t *p;

	if (pthread_once(&tls_once, tls_create) != 0 || tls_err != 0)
		return NULL;
	p = pthread_getspecific(tls_out_key);
	if (!p) {
		p = malloc(MEASURE_OUT);
		if (p && pthread_setspecific(tls_out_key, p) != 0) {
			free(p);
			p = NULL;
		}
	}
	return p;
}

/*
 * The size of the frame of exactly @clen bytes at @src, at most @cap:
 * decoded by the stream through a small buffer, the output counted and
 * dropped, the checksum checked by libzstd when the frame ends. Errors
 * as ZSTD_decompressDCtx() into @cap bytes gives them (zerr()): more
 * output than @cap, or input that ends before the frame does (or goes on
 * after it), is corrupt data.
 */
static int measure_count(const uint8_t *src, uint32_t clen, uint64_t cap, size_t *n,
			 const char **why)
{
	ZSTD_inBuffer in = { .src = src, .size = clen };
	uint8_t *buf = tls_measure_buf();
	ZSTD_DCtx *d = tls_dctx(true);
	uint64_t got = 0;
	size_t r = 1;
	int rc = 0;

	if (!d || !buf) {
		*why = "no memory to measure a zstd frame";
		return -ENOMEM;
	}
	while (r != 0) {
		ZSTD_outBuffer out = { .dst = buf, .size = MEASURE_OUT };
		size_t before = in.pos;

		r = ZSTD_decompressStream(d, &out, &in);
		if (ZSTD_isError(r)) {
			rc = zerr(r, why);
			break;
		}
		got += out.pos;
		if (got > cap || (r != 0 && in.pos == before && out.pos == 0)) {
			/* past its bound, or stuck: its input ran out inside the frame */
			*why = "corrupt zstd data";
			rc = -EBADMSG;
			break;
		}
	}
	if (rc == 0 && in.pos != in.size) {
		*why = "corrupt zstd data";
		rc = -EBADMSG;
	}
	tls_trim();
	*n = (size_t)got;
	return rc;
}

/* The size of the frame at @src, decoded in one call into @cap bytes. */
static int measure_whole(const uint8_t *src, uint32_t clen, uint64_t cap, size_t *n,
			 const char **why)
{
	ZSTD_DCtx *d = tls_dctx(true);
	uint8_t *buf = malloc((size_t)cap);

	if (!d || !buf) {
		free(buf);
		*why = "no memory to measure a zstd frame";
		return -ENOMEM;
	}
	*n = ZSTD_decompressDCtx(d, buf, (size_t)cap, src, clen);
	free(buf);
	return ZSTD_isError(*n) ? zerr(*n, why) : 0;
}

/*
 * Exact size of a frame block: decode it, checksum checked whatever
 * -o verify says (the size places every later block), through a small
 * buffer (measure_count()); a frame whose window is larger than what it
 * may hold (a streaming decoder would allocate the whole window) in one
 * call into a buffer of what it may hold (measure_whole()). Its output is
 * not kept for the walk's spill: writing every frame there costs the
 * first stat more than reads of frames this small gain from it, and a
 * random reader gets the big ones spilled as units (unit.c) when it comes
 * to them.
 */
static int zstd_measure(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
			const char **why)
{
	uint64_t cap, window;
	size_t n;
	int rc = measure_check(blk, src, &cap, &window, why);

	if (rc < 0)
		return rc;
	rc = window > cap ? measure_whole(src, blk->clen, cap, &n, why) :
			    measure_count(src, blk->clen, cap, &n, why);
	if (rc < 0)
		return rc == -ENOMEM ? -ENOMEM : -EBADMSG;
	if (n == 0) {
		*why = "zstd frame holds nothing";
		return -EBADMSG;
	}
	*usize = (uint32_t)n;
	return 0;
}

/* ---- parked decoders ---- */

struct parked {
	ZSTD_DCtx *d;
	struct chains *owner;
	size_t k;		    /* the span it decodes next */
	uint64_t coff;		    /* where its input stands: span k's coff */
	size_t bytes;		    /* ZSTD_sizeof_DCtx() when parked */
	struct parked *prev, *next; /* the pool's list, most recent first */
};

/* What is known of a frame whose spans are open (struct chains, proof). */
enum proof {
	PROOF_UNKNOWN,
	PROOF_GOOD,
	PROOF_CORRUPT, /* -EBADMSG */
	PROOF_CSUM,    /* -EILSEQ */
};

/* idx->priv of an index with chains: its parked decoders. */
struct chains {
	struct parked *slot[PARK_PER_FILE]; /* protected by park_lock */
	uint8_t *proof;		  /* enum proof per block, at the first span of an open frame;
				 * NULL without open spans; protected by park_lock */
	size_t n;		  /* entries of proof and spill */
	struct bfs_spill **spill; /* per block, at the first span of a proven open frame:
					 * its output (spill.h), or NULL; set once, under
					 * park_lock; freed with the pool */
};

/*
 * One pool for every file, so that its bound holds across files: a
 * thousand files each read a little would otherwise each keep a window.
 * A leaf lock: held for list changes only, never across a decode.
 */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static struct parked lru = { .prev = &lru, .next = &lru }; /* protected by park_lock */
static size_t park_bytes;				   /* protected by park_lock */

static void lru_unlink(struct parked *p)
{
	p->prev->next = p->next;
	p->next->prev = p->prev;
	park_bytes -= p->bytes;
	bfs_park_release(p->bytes);
}

/* Take @p out of the pool (its slot and the list). Under park_lock. */
static void unpark_locked(struct parked *p)
{
	for (size_t i = 0; i < PARK_PER_FILE; i++)
		if (p->owner->slot[i] == p)
			p->owner->slot[i] = NULL;
	lru_unlink(p);
}

static void parked_free(struct parked *p)
{
	if (p) {
		ZSTD_freeDCtx(p->d);
		free(p);
	}
}

/* The decoder parked at span @k of @c, taken out of the pool; NULL if none. */
static struct parked *take(struct chains *c, size_t k)
{
	struct parked *p = NULL;

	bfs_mutex_lock(&park_lock);
	for (size_t i = 0; i < PARK_PER_FILE && !p; i++)
		if (c->slot[i] && c->slot[i]->k == k)
			p = c->slot[i];
	if (p)
		unpark_locked(p);
	bfs_mutex_unlock(&park_lock);
	return p;
}

/*
 * Park @p (its k and coff set) in @c's pool: in a free slot, else in
 * place of @c's least recently parked; then, while the parked decoders
 * are over the mount's budget, the least recently parked anywhere go
 * (never @p).
 */
static void park(struct chains *c, struct parked *p)
{
	struct parked *gone = NULL, *q;
	size_t slot = PARK_PER_FILE, i;

	p->owner = c;
	p->bytes = ZSTD_sizeof_DCtx(p->d);
	bfs_mutex_lock(&park_lock);
	/* one at the same span (never, under the version's chain lock, read.c), a free slot, or c's oldest */
	for (i = 0; i < PARK_PER_FILE && slot == PARK_PER_FILE; i++)
		if (c->slot[i] && c->slot[i]->k == p->k)
			slot = i;
	for (i = 0; i < PARK_PER_FILE && slot == PARK_PER_FILE; i++)
		if (!c->slot[i])
			slot = i;
	if (slot == PARK_PER_FILE) {
		for (q = lru.prev; q->owner != c; q = q->prev)
			; /* all of c's slots are full, so one is on the list */
		for (slot = 0; c->slot[slot] != q; slot++)
			;
	}
	if (c->slot[slot]) {
		q = c->slot[slot];
		unpark_locked(q);
		q->next = gone;
		gone = q;
	}
	c->slot[slot] = p;
	p->next = lru.next;
	p->prev = &lru;
	lru.next->prev = p;
	lru.next = p;
	park_bytes += p->bytes;
	bfs_park_charge(p->bytes);
	while (bfs_park_over(0) && lru.prev != p) {
		q = lru.prev;
		unpark_locked(q);
		q->next = gone;
		gone = q;
	}
	bfs_mutex_unlock(&park_lock);
	while (gone) {
		struct parked *next = gone->next;

		parked_free(gone);
		gone = next;
	}
}

static void chains_free(void *priv)
{
	struct chains *c = priv;
	struct parked *gone[PARK_PER_FILE];

	bfs_mutex_lock(&park_lock);
	for (size_t i = 0; i < PARK_PER_FILE; i++) {
		gone[i] = c->slot[i];
		if (gone[i])
			unpark_locked(gone[i]);
	}
	bfs_mutex_unlock(&park_lock);
	for (size_t i = 0; i < PARK_PER_FILE; i++)
		parked_free(gone[i]);
	if (c->spill)
		for (size_t k = 0; k < c->n; k++)
			bfs_spill_drop(c->spill[k]);
	free(c->spill);
	free(c->proof);
	free(c);
}

/* Give @idx its (empty) pool of parked decoders if it has chains. Return: 0 or -ENOMEM. */
static int chains_attach(struct bfs_index *idx)
{
	struct chains *c;
	bool any = false, open = false;

	for (size_t k = 0; k < idx->n; k++) {
		any |= (idx->blk[k].flags & BFS_BLK_CHAIN) != 0;
		open |= (idx->blk[k].flags & BFS_BLK_OPEN) != 0;
	}
	if (!any || idx->priv)
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c || (open && (!(c->proof = calloc(idx->n, 1)) ||
			    !(c->spill = calloc(idx->n, sizeof(*c->spill)))))) {
		if (c)
			free(c->proof);
		free(c);
		return -ENOMEM;
	}
	c->n = open ? idx->n : 0;
	idx->priv = c;
	idx->priv_free = chains_free;
	idx->priv_bytes = sizeof(*c) + (open ? idx->n * (1 + sizeof(*c->spill)) : 0);
	return 0;
}

/* For the tests and counters: bytes of decoders parked now, in all. */
size_t bfs_zstd_parked_bytes(void)
{
	size_t n;

	bfs_mutex_lock(&park_lock);
	n = park_bytes;
	bfs_mutex_unlock(&park_lock);
	return n;
}

/* The first span of span @k's frame. */
static size_t chain_start(const struct bfs_index *idx, size_t k)
{
	size_t seq = idx->blk[k].aux & SPAN_SEQ_MASK;

	return seq <= k ? k - seq : k; /* (checked by scan and cache_load) */
}

/* The spill of the proven open frame whose first span is @k0, or NULL. */
static struct bfs_spill *spill_of(struct chains *c, size_t k0)
{
	struct bfs_spill *s;

	if (!c->spill)
		return NULL;
	bfs_mutex_lock(&park_lock);
	s = c->spill[k0];
	bfs_mutex_unlock(&park_lock);
	return s;
}

static bool zstd_chain_head(const struct bfs_blk *b)
{
	return (b->aux & SPAN_SEQ_MASK) == 0;
}

static size_t zstd_resume(const struct bfs_index *idx, size_t k)
{
	struct chains *c = idx->priv;
	struct bfs_spill *s;
	size_t best;

	if (k >= idx->n || !(idx->blk[k].flags & BFS_BLK_CHAIN) || !c)
		return k;
	best = chain_start(idx, k);
	/* a spilled frame is read where it is wanted: no decoder needed */
	s = idx->blk[k].flags & BFS_BLK_OPEN ? spill_of(c, best) : NULL;
	if (s && bfs_spill_live(s))
		return k;
	bfs_mutex_lock(&park_lock);
	for (size_t i = 0; i < PARK_PER_FILE; i++)
		if (c->slot[i] && c->slot[i]->k <= k && c->slot[i]->k > best)
			best = c->slot[i]->k;
	bfs_mutex_unlock(&park_lock);
	return best;
}

/*
 * The decoder for span @k of chains @c: the one parked at it, else a new
 * one when @k starts its frame. Return: 0 with *@out; -EAGAIN when none is
 * parked mid-frame (the caller walks from the frame's start); -ENOMEM.
 */
static int take_or_start(const struct bfs_index *idx, struct chains *c, size_t k, bool verify,
			 struct parked **out, const char **why)
{
	struct parked *p = take(c, k);

	if (!p && chain_start(idx, k) != k) {
		*why = "no zstd decoder parked at this span";
		return -EAGAIN;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (p)
			p->d = ZSTD_createDCtx();
		if (!p || !p->d || setup(p->d, verify) < 0) {
			parked_free(p);
			*why = "no memory for a zstd decoder";
			return -ENOMEM;
		}
		p->coff = idx->blk[k].coff;
	}
	*out = p;
	return 0;
}

/*
 * Span @k into @dst (room for its usize): continue the decoder parked at
 * it (or start one at its frame's first span), check that the span ends
 * where the index says, park the decoder at the next span.
 */
static int span_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		       bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	struct chains *c = idx->priv;
	ZSTD_inBuffer in = { .src = src, .size = b->clen };
	ZSTD_outBuffer out = { .dst = dst, .size = b->usize };
	bool end = b->aux & SPAN_END;
	struct parked *p;
	size_t r = 1;
	int rc = 0;

	if (!c) {
		*why = "zstd span without a decoder pool";
		return -EBADMSG;
	}
	rc = take_or_start(idx, c, k, verify, &p, why);
	if (rc < 0)
		return rc;
	if (p->coff != b->coff) {
		*why = "zstd span does not start where its decoder stands";
		rc = -EBADMSG;
		goto out_free;
	}
	/* One call does it: libzstd returns when the output is full or the input used up. */
	while (out.pos < out.size || in.pos < in.size) {
		size_t before = in.pos + out.pos;

		r = ZSTD_decompressStream(p->d, &out, &in);
		if (ZSTD_isError(r)) {
			rc = zerr(r, why);
			goto out_free;
		}
		if (r == 0 || in.pos + out.pos == before)
			break;
	}
	if (out.pos != out.size || in.pos != in.size || (r == 0) != end) {
		*why = out.pos != out.size ? "zstd span holds fewer bytes than the index says" :
					     "zstd span does not end where the index says";
		rc = -EBADMSG;
		goto out_free;
	}
	if (end || k + 1 >= idx->n || !(idx->blk[k + 1].flags & BFS_BLK_CHAIN) ||
	    (idx->blk[k + 1].aux & SPAN_SEQ_MASK) == 0)
		goto out_free; /* nothing follows it in this frame */
	p->k = k + 1;
	p->coff = b->coff + b->clen;
	park(c, p);
	return 0;
out_free:
	parked_free(p);
	return rc;
}

/*
 * The decoder used all of @in, which began at file offset *@at: give it
 * the frame's next input (*@at moves past the old), out of @src (the
 * whole frame, which starts at file offset @coff) or read through @io
 * into @buf (@cap bytes). Return: 0; -EBADMSG at the frame's end @end
 * (it holds less than its header says); the read's -errno.
 */
static int refill(ZSTD_inBuffer *in, uint64_t *at, uint64_t coff, uint64_t end, const uint8_t *src,
		  struct bfs_io *io, uint8_t *buf, size_t cap, const char **why)
{
	size_t n;
	int rc;

	*at += in->size;
	if (*at >= end) {
		*why = "zstd frame holds fewer bytes than its header says";
		return -EBADMSG;
	}
	if (src) {
		*in = (ZSTD_inBuffer){ .src = src + (*at - coff), .size = end - *at };
		return 0;
	}
	n = end - *at < cap ? (size_t)(end - *at) : cap;
	rc = bfs_io_read(io, buf, n, *at);
	if (rc < 0) {
		*why = "read failed";
		return rc;
	}
	*in = (ZSTD_inBuffer){ .src = buf, .size = n };
	return 0;
}

/* Output of the open frame whose first span is @k0: the sum of its spans. */
static uint64_t frame_usize(const struct bfs_index *idx, size_t k0)
{
	uint64_t want = 0;

	for (size_t k = k0; k < idx->n; k++) {
		want += idx->blk[k].usize;
		if (idx->blk[k].aux & SPAN_END)
			break;
	}
	return want;
}

/*
 * Decode the open frame whose first span is @k0 whole, as the walk of a
 * frame without a content size does at the first stat: its checksum and
 * its size against the header's. The output goes into *@spill when there
 * is one (spill.h), else is dropped; a spill that fails to write is
 * dropped (*@spill NULL) and the proof goes on. Input from @src (the
 * whole frame) or through @io. Return: 0, -EBADMSG or -EILSEQ (with
 * *@why), -ENOMEM or the read's -errno.
 */
static int prove(const struct bfs_index *idx, size_t k0, const uint8_t *src, struct bfs_io *io,
		 struct bfs_spill **spill, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k0];
	uint64_t end = b->coff + b->clen, at = b->coff, want = frame_usize(idx, k0), got = 0;
	ZSTD_DCtx *d = ZSTD_createDCtx();
	uint8_t *out = malloc(SCRATCH), *buf = src ? NULL : malloc(CHUNK);
	ZSTD_inBuffer in = { 0 };
	size_t r = 1, fill = 0; /* bytes in the spill's buffer */
	int rc = 0;

	if (!d || !out || (!src && !buf) || setup(d, true) < 0) {
		*why = "no memory for a zstd decoder";
		rc = -ENOMEM;
		goto out;
	}
	while (r != 0) {
		ZSTD_outBuffer o = { .dst = out, .size = SCRATCH };
		size_t before, from;

		/* straight into the spill's buffer, handed over when full */
		if (*spill && !(o.dst = bfs_spill_next(*spill, &o.size))) {
			bfs_spill_drop(*spill); /* the proof goes on without it */
			*spill = NULL;
			o = (ZSTD_outBuffer){ .dst = out, .size = SCRATCH };
		}
		o.pos = from = *spill ? fill : 0;
		if (in.pos == in.size) {
			rc = refill(&in, &at, b->coff, end, src, io, buf, CHUNK, why);
			if (rc < 0)
				goto out;
		}
		before = in.pos;
		r = ZSTD_decompressStream(d, &o, &in);
		if (ZSTD_isError(r)) {
			rc = zerr(r, why);
			goto out;
		}
		got += o.pos - from;
		if (got > want || (o.pos == from && in.pos == before && in.pos < in.size)) {
			*why = "zstd frame holds more bytes than its header says";
			rc = -EBADMSG;
			goto out;
		}
		fill = o.pos;
		if (*spill && (fill == o.size || r == 0) && bfs_spill_add(*spill, fill) < 0) {
			bfs_spill_drop(*spill);
			*spill = NULL;
		}
		if (fill == o.size || r == 0)
			fill = 0;
	}
	if (got != want || at + in.pos != end) {
		*why = got != want ? "zstd frame holds fewer bytes than its header says" :
				     "zstd frame does not end where its blocks do";
		rc = -EBADMSG;
	}
out:
	ZSTD_freeDCtx(d);
	free(out);
	free(buf);
	return rc;
}

/*
 * Has the open frame whose first span is @k0 been proven (prove())? Prove
 * it now if not: the answer is kept, so a damaged frame is decoded once
 * and then refused at once, and so is the proof's output when the spill
 * takes it (c->spill). Return: 0 or prove()'s error.
 */
static int proven(const struct bfs_index *idx, struct chains *c, size_t k0, const uint8_t *src,
		  struct bfs_io *io, const char **why)
{
	struct bfs_spill *s;
	uint8_t known;
	int rc;

	bfs_mutex_lock(&park_lock);
	known = c->proof ? c->proof[k0] : PROOF_GOOD;
	bfs_mutex_unlock(&park_lock);
	switch (known) {
	case PROOF_GOOD:
		return 0;
	case PROOF_CORRUPT:
		*why = "zstd frame failed to decode when first read";
		return -EBADMSG;
	case PROOF_CSUM:
		*why = "zstd frame checksum mismatch";
		return -EILSEQ;
	default:
		break;
	}
	s = bfs_spill_begin(frame_usize(idx, k0));
	rc = prove(idx, k0, src, io, &s, why);
	if (s && (rc < 0 || bfs_spill_seal(s) < 0)) {
		bfs_spill_drop(s); /* never a byte of a frame that failed its proof */
		s = NULL;
	}
	if (rc == 0 || rc == -EBADMSG || rc == -EILSEQ) {
		bfs_mutex_lock(&park_lock);
		c->proof[k0] = rc == 0 ? PROOF_GOOD : rc == -EBADMSG ? PROOF_CORRUPT : PROOF_CSUM;
		if (s && !c->spill[k0]) {
			c->spill[k0] = s;
			s = NULL;
		}
		bfs_mutex_unlock(&park_lock);
	}
	bfs_spill_drop(s); /* another reader proved it too, or the proof could not finish */
	return rc;
}

/*
 * Open span @k (BFS_BLK_OPEN: its frame's size came from the header, and
 * no walk said where each span's input starts) into @dst, room for its
 * usize: continue the decoder parked at it (or start one at the frame),
 * feeding it the frame's bytes from where it stands, from @src (the whole
 * frame) or else through @io in pieces of OPEN_READ, until its output is
 * full (the last span: until the frame ends, its checksum checked); park
 * it at the next span.
 */
static int open_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, struct bfs_io *io,
		       uint8_t *dst, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint64_t end = b->coff + b->clen, at; /* the frame's input ends at @end */
	ZSTD_outBuffer out = { .dst = dst, .size = b->usize };
	ZSTD_inBuffer in = { 0 };
	bool last = b->aux & SPAN_END;
	struct chains *c = idx->priv;
	uint8_t *buf = NULL;
	struct parked *p;
	size_t r = 1;
	int rc = 0;

	if (!c) {
		*why = "zstd span without a decoder pool";
		return -EBADMSG;
	}
	if (verify) {
		size_t k0 = chain_start(idx, k);
		struct bfs_spill *s;

		rc = proven(idx, c, k0, src, io, why);
		if (rc < 0)
			return rc;
		/* proven whole: its bytes from the spill when they are there, else decoded again */
		s = spill_of(c, k0);
		if (s && bfs_spill_read(s, dst, b->usize, b->uoff - idx->blk[k0].uoff) == 0)
			return 0;
	}
	rc = take_or_start(idx, c, k, verify, &p, why);
	if (rc < 0)
		return rc;
	at = p->coff; /* the file offset of in.src[0] */
	if (at < b->coff || at > end) {
		*why = "zstd decoder parked outside its frame";
		rc = -EBADMSG;
		goto out;
	}
	if (!src && !(buf = malloc(OPEN_READ))) {
		*why = "no memory for zstd input";
		rc = -ENOMEM;
		goto out;
	}
	while (out.pos < out.size || (last && r != 0)) {
		size_t before;

		if (in.pos == in.size) {
			rc = refill(&in, &at, b->coff, end, src, io, buf, OPEN_READ, why);
			if (rc < 0)
				goto out;
		}
		before = in.pos + out.pos;
		r = ZSTD_decompressStream(p->d, &out, &in);
		if (ZSTD_isError(r)) {
			rc = zerr(r, why);
			goto out;
		}
		if (r == 0 && !last) {
			*why = "zstd frame holds fewer bytes than its header says";
			rc = -EBADMSG;
			goto out;
		}
		if (in.pos + out.pos == before && in.pos < in.size) {
			*why = "zstd frame holds more bytes than its header says";
			rc = -EBADMSG;
			goto out;
		}
	}
	if (last) {
		if (at + in.pos != end) {
			*why = "zstd frame does not end where its blocks do";
			rc = -EBADMSG;
		}
		goto out;
	}
	p->k = k + 1;
	p->coff = at + in.pos;
	park(c, p);
	p = NULL;
out:
	parked_free(p);
	free(buf);
	return rc;
}

static int zstd_decode_open(const struct bfs_index *idx, size_t k, struct bfs_io *io, uint8_t *dst,
			    bool verify, const char **why)
{
	if (!(idx->blk[k].flags & BFS_BLK_OPEN)) {
		*why = "zstd span is not open";
		return -EINVAL;
	}
	return open_decode(idx, k, NULL, io, dst, verify, why);
}

/* Span @k whole: an open one from @src, the whole frame; else from exactly its bytes. */
static int span_whole(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		      bool verify, const char **why)
{
	if (idx->blk[k].flags & BFS_BLK_OPEN)
		return open_decode(idx, k, src, NULL, dst, verify, why);
	return span_decode(idx, k, src, dst, verify, why);
}

static int zstd_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		       uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *tmp;
	int rc;

	if (n > b->usize || n == 0) {
		*why = "zstd prefix out of range";
		return -EINVAL;
	}
	if (!(b->flags & BFS_BLK_CHAIN))
		return n == b->usize ? frame_decode(b, src, dst, verify, why) :
				       frame_prefix(b, src, dst, n, verify, why);
	if (n == b->usize)
		return span_whole(idx, k, src, dst, verify, why);
	/* a prefix of a span: the decoder goes on to the next span all the same */
	tmp = malloc(b->usize);
	if (!tmp) {
		*why = "no memory for a zstd span";
		return -ENOMEM;
	}
	rc = span_whole(idx, k, src, tmp, verify, why);
	if (rc == 0)
		memcpy(dst, tmp, n);
	free(tmp);
	return rc;
}

/* ---- the seek table ---- */

/*
 * Index the file from its seek table. Return: 0 when done, 1 when there
 * is no usable table (walk instead), -errno (-EIO, -ENOMEM).
 */
static int scan_table(struct bfs_io *io, struct bfs_index *idx)
{
	uint64_t size = io->size, tsize, toff, coff = 0;
	uint8_t foot[SEEK_FOOTER_LEN], h[HDR_MAX], *t;
	uint32_t nframes, esize, fsize;
	const uint8_t *e;
	struct fhdr fh;
	const char *why;
	int rc;

	if (size < SKIP_HDR_LEN + SEEK_FOOTER_LEN)
		return 1;
	rc = bfs_io_read(io, foot, sizeof(foot), size - sizeof(foot));
	if (rc < 0)
		return rc;
	if (bfs_le32(foot + 5) != SEEK_FOOTER_MAGIC || (foot[4] & SEEK_RESERVED))
		return 1;
	nframes = bfs_le32(foot);
	esize = foot[4] & SEEK_CSUM_FLAG ? SEEK_ENTRY_CSUM_LEN : SEEK_ENTRY_LEN;
	tsize = SKIP_HDR_LEN + (uint64_t)nframes * esize + SEEK_FOOTER_LEN;
	if (nframes == 0 || nframes > idx->max_blocks || tsize > size)
		return 1;
	toff = size - tsize;
	t = malloc((size_t)tsize);
	if (!t)
		return -ENOMEM;
	rc = bfs_io_read(io, t, (size_t)tsize, toff);
	if (rc < 0)
		goto out;
	rc = 1;
	if (bfs_le32(t) != SEEK_SKIP_MAGIC || bfs_le32(t + MAGIC_LEN) != tsize - SKIP_HDR_LEN)
		goto out;
	/* Every frame at least a minimal frame, none too big, tiling [0, toff) exactly. */
	e = t + SKIP_HDR_LEN;
	for (uint32_t i = 0; i < nframes; i++, e += esize) {
		uint32_t c = bfs_le32(e), u = bfs_le32(e + 4);

		if (c < FRAME_MIN || u == 0 || u > FRAME_USIZE_MAX)
			goto out;
		coff += c;
	}
	if (coff != toff)
		goto out;
	/* The first and the last frame's headers: servable, and their FCS agrees. */
	for (int end = 0; end < 2; end++) {
		const uint8_t *le = t + SKIP_HDR_LEN + (uint64_t)(nframes - 1) * esize;
		uint64_t at = end ? toff - bfs_le32(le) : 0;
		uint32_t u = bfs_le32((end ? le : t + SKIP_HDR_LEN) + 4);
		size_t got = toff - at < sizeof(h) ? (size_t)(toff - at) : sizeof(h);

		rc = bfs_io_read(io, h, got, at);
		if (rc < 0)
			goto out;
		rc = 1;
		if (bfs_le32(h) != ZMAGIC || parse_fhdr(h, got, &fh, &why) != 0 ||
		    unservable(&fh) || (fh.has_fcs && fh.fcs != u))
			goto out;
	}
	e = t + SKIP_HDR_LEN;
	coff = 0;
	for (uint32_t i = 0; i < nframes; i++, e += esize) {
		fsize = bfs_le32(e);
		rc = bfs_index_add(idx, coff, fsize, bfs_le32(e + 4),
				   esize == SEEK_ENTRY_CSUM_LEN ? BFS_BLK_CSUM : 0);
		if (rc < 0)
			goto out; /* -ENOMEM, -EFBIG: counts were checked */
		if (esize == SEEK_ENTRY_CSUM_LEN)
			idx->blk[idx->n - 1].aux = bfs_le32(e + 8);
		coff += fsize;
	}
	idx->block_size = idx->blk[0].usize;
	idx->source = BFS_SRC_SEEKTABLE;
	/* Sizes only the table states: an odd one is measured before it places others. */
	bfs_index_guess_irregular(idx, false);
	rc = 0;
out:
	if (rc != 0 && idx->n) {
		bfs_index_destroy(idx);
		bfs_index_init(idx, size);
	}
	free(t);
	return rc;
}

/* ---- the walk ---- */

struct span {
	uint64_t coff, clen;
	uint32_t usize;
	uint64_t kept; /* where its output went in the walk's spill, or BFS_KEPT_NONE */
};

struct walk {
	struct bfs_io *io;
	struct bfs_index *idx;
	struct rd rd;
	ZSTD_DCtx *d;	   /* for big frames */
	uint8_t *in, *out; /* CHUNK of input, SCRATCH of output */
	uint8_t *sout;	   /* SPAN of output, one span whole, for the walk's spill */
	bool spill;	   /* big frames' spans go to the walk's spill (index.h, kept) */
	struct span *spans;
	size_t nspans, spans_cap;
	bool any; /* a frame was served already: what follows cannot be -ENOTSUP */
};

static int add_span(struct walk *w, uint64_t coff, uint64_t clen, uint32_t usize)
{
	/* bfs_index_add() would refuse them at the end: stop decoding now */
	if (w->idx->n + w->nspans >= w->idx->max_blocks)
		return -EFBIG;
	if (w->nspans == w->spans_cap) {
		size_t ncap = w->spans_cap ? 2 * w->spans_cap : 64;
		struct span *ns = realloc(w->spans, ncap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		w->spans = ns;
		w->spans_cap = ncap;
	}
	w->spans[w->nspans] =
		(struct span){ .coff = coff, .clen = clen, .usize = usize, .kept = BFS_KEPT_NONE };
	/* its output, whole in sout, to the spill: recorded once the frame is proven */
	if (w->spill && bfs_index_keep_bytes(w->idx, w->sout, usize, &w->spans[w->nspans].kept) < 0)
		w->spans[w->nspans].kept = BFS_KEPT_NONE;
	w->nspans++;
	return 0;
}

/* The spans of the frame walked, into the index: the last one ends the frame iff @whole. */
static int commit_spans(struct walk *w, bool whole)
{
	for (size_t i = 0; i < w->nspans; i++) {
		const struct span *s = &w->spans[i];
		int rc = bfs_index_add(w->idx, s->coff, (uint32_t)s->clen, s->usize, BFS_BLK_CHAIN);

		if (rc < 0)
			return rc;
		w->idx->blk[w->idx->n - 1].aux =
			(uint32_t)i | (whole && i + 1 == w->nspans ? SPAN_END : 0);
		/* a frame decoded to its end, its checksum right: its spans' bytes are proven */
		if (whole && s->kept != BFS_KEPT_NONE)
			bfs_index_keep(w->idx, w->idx->n - 1, s->kept);
	}
	return 0;
}

/*
 * Decode the frame at @off whole, cutting its output into spans (see the
 * top of this file). Return: 0 and *@next after the frame; 1 when the
 * index was marked broken; -errno.
 */
static int walk_big(struct walk *w, uint64_t off, uint64_t *next)
{
	uint64_t size = w->io->size, base = off, span_coff = off;
	ZSTD_inBuffer in = { .src = w->in, .size = 0 };
	uint32_t span_out = 0;
	const char *why;
	int rc;

	if ((!w->d && !(w->d = ZSTD_createDCtx())) || (!w->in && !(w->in = malloc(CHUNK))) ||
	    (!w->out && !(w->out = malloc(SCRATCH))))
		return -ENOMEM;
	/* the spans' output to the walk's spill, when there is one and memory for a span */
	if (!w->sout && w->io->size >= BFS_KEPT_MIN && bfs_index_keep_begin(w->idx))
		w->sout = malloc(SPAN);
	w->spill = w->sout != NULL;
	/* Checksums always: the walk proves the frame before any span of it is served. */
	if (setup(w->d, true) < 0)
		return -ENOMEM;
	w->nspans = 0;
	for (;;) {
		ZSTD_outBuffer out = { .dst = w->out, .size = SPAN - span_out };
		size_t r, before;
		uint64_t at;

		if (w->spill)
			out.dst = w->sout + span_out; /* the span whole, for add_span() */
		else if (out.size > SCRATCH)
			out.size = SCRATCH;
		if (in.pos == in.size) {
			size_t want;

			base += in.size;
			if (base >= size) {
				/* cut inside the frame: the spans before the cut stand */
				rc = commit_spans(w, false);
				if (rc < 0)
					return rc;
				bfs_index_mark_broken(w->idx, span_coff,
						      "zstd: file ends inside "
						      "the frame at offset %" PRIu64,
						      off);
				return 1;
			}
			want = size - base < CHUNK ? (size_t)(size - base) : CHUNK;
			rc = bfs_io_read(w->io, w->in, want, base);
			if (rc < 0)
				return rc;
			in = (ZSTD_inBuffer){ .src = w->in, .size = want };
		}
		before = in.pos + out.pos;
		r = ZSTD_decompressStream(w->d, &out, &in);
		at = base + in.pos;
		if (ZSTD_isError(r)) {
			rc = zerr(r, &why);
			if (rc == -ENOMEM)
				return rc;
			goto lost;
		}
		span_out += (uint32_t)out.pos;
		if (r == 0) {
			/* the frame's end: the open span is its last (or the last grows to here) */
			rc = 0;
			if (span_out > 0)
				rc = add_span(w, span_coff, at - span_coff, span_out);
			else if (w->nspans > 0)
				w->spans[w->nspans - 1].clen = at - w->spans[w->nspans - 1].coff;
			if (rc == 0)
				rc = commit_spans(w, true);
			if (rc < 0)
				return rc;
			*next = at;
			return 0;
		}
		if (span_out == SPAN) {
			rc = add_span(w, span_coff, at - span_coff, SPAN);
			if (rc < 0)
				return rc;
			span_coff = at;
			span_out = 0;
		}
		if (at - span_coff > SPAN_CLEN_MAX) {
			why = "no zstd output in 64 MiB of input";
			goto lost;
		}
		if (in.pos + out.pos == before && in.pos < in.size) {
			why = "zstd decoder made no progress";
			goto lost;
		}
	}
lost:
	/* bytes decoded before an error may be wrong already: none of the frame is served */
	w->nspans = 0;
	bfs_index_mark_broken(w->idx, off, "zstd: %s in the frame at offset %" PRIu64, why, off);
	return 1;
}

/*
 * The frame [@off, @end), whose header says it holds @fcs bytes, as open
 * spans (BFS_BLK_OPEN): SPAN bytes each, every one stating the frame's
 * input, to be found by the first decoder that passes (open_decode()).
 * Return: 0 or -errno.
 */
static int open_spans(struct walk *w, uint64_t off, uint64_t end, uint64_t fcs)
{
	uint64_t n = (fcs + SPAN - 1) / SPAN;

	if (w->idx->n + n > w->idx->max_blocks)
		return -EFBIG;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t usize = i + 1 < n ? SPAN : (uint32_t)(fcs - i * SPAN);
		int rc = bfs_index_add(w->idx, off, (uint32_t)(end - off), usize,
				       BFS_BLK_CHAIN | BFS_BLK_OPEN);

		if (rc < 0)
			return rc;
		w->idx->blk[w->idx->n - 1].aux = (uint32_t)i | (i + 1 == n ? SPAN_END : 0);
	}
	return 0;
}

/*
 * One zstd frame at @off, its header @h parsed. Return: 0 and *@next
 * after it; 1 when the index was marked broken; -errno (-ENOTSUP for a
 * first frame blockfs cannot serve).
 */
static int walk_frame(struct walk *w, uint64_t off, const struct fhdr *h, uint64_t *next)
{
	struct bfs_index *idx = w->idx;
	const char *why = unservable(h);
	struct fblocks fb;
	uint64_t at = off;
	int rc;

	if (why) {
		snprintf(idx->why, sizeof(idx->why), "zstd: %s", why);
		if (!w->any)
			return -ENOTSUP;
		goto broken;
	}
	rc = walk_blocks(&w->rd, h, off + h->hlen, w->io->size, !h->has_fcs, &fb, &why, &at);
	if (rc == -EBADMSG && h->has_fcs && h->fcs > FRAME_USIZE_MAX)
		return walk_big(w, off, next); /* damaged (cut): serve the spans before it */
	if (rc == -EBADMSG)
		goto broken;
	if (rc < 0)
		return rc;
	if (fb.big && !h->has_fcs)
		return walk_big(w, off, next);
	*next = fb.end;
	if (h->has_fcs && ((fb.exact && fb.bound != h->fcs) || fb.bound < h->fcs)) {
		why = "zstd frame holds another size than its header says";
		at = off;
		goto broken;
	}
	if (h->fcs > FRAME_USIZE_MAX)
		return fb.end - off > UINT32_MAX ? walk_big(w, off, next) :
						   open_spans(w, off, fb.end, h->fcs);
	if (h->has_fcs ? h->fcs == 0 : fb.bound == 0)
		return 0; /* an empty frame: nothing to serve */
	if (h->has_fcs || fb.exact)
		rc = bfs_index_add(idx, off, (uint32_t)(fb.end - off),
				   (uint32_t)(h->has_fcs ? h->fcs : fb.bound), 0);
	else
		rc = bfs_index_add(idx, off, (uint32_t)(fb.end - off), (uint32_t)fb.bound,
				   BFS_BLK_GUESS);
	return rc;
broken:
	bfs_index_mark_broken(idx, at, "zstd: %s at offset %" PRIu64, why, at);
	return 1;
}

static int walk_file(struct walk *w)
{
	struct bfs_io *io = w->io;
	uint64_t off = 0;
	int rc = 0;

	while (off < io->size && rc == 0) {
		const uint8_t *p;
		struct fhdr h;
		const char *why = NULL;
		size_t got;
		uint32_t magic;

		rc = rd_get(&w->rd, off, HDR_MAX, true, &p, &got);
		if (rc < 0)
			return rc;
		magic = got >= MAGIC_LEN ? bfs_le32(p) : 0;
		if (got >= SKIP_HDR_LEN && is_skippable(magic)) {
			uint64_t skip = bfs_le32(p + MAGIC_LEN);

			if (!bfs_range_ok(off + SKIP_HDR_LEN, skip, io->size)) {
				why = "skippable frame runs past end of file";
				goto broken;
			}
			off += SKIP_HDR_LEN + skip;
			continue;
		}
		if (magic != ZMAGIC) {
			why = "not a zstd frame";
			goto broken;
		}
		rc = parse_fhdr(p, got, &h, &why);
		if (rc > 0) {
			why = "zstd frame header past end of file";
			goto broken;
		}
		if (rc < 0)
			goto broken;
		rc = walk_frame(w, off, &h, &off);
		if (rc == 0)
			w->any = w->idx->n > 0;
		continue;
broken:
		bfs_index_mark_broken(w->idx, off, "zstd: %s at offset %" PRIu64, why, off);
		return 0;
	}
	return rc < 0 ? rc : 0;
}

/*
 * Sizes a frame header (or an index cache entry) states but no decode has
 * proven yet are distrusted as a seek table's are: an odd one is measured
 * before it places a later block. Spans prove themselves (each decode
 * checks where it ends) and guesses are measured anyway: both keep their
 * flags. Return: 0 or -ENOMEM.
 */
static int distrust(struct bfs_index *idx)
{
	uint32_t *flags = malloc((idx->n ? idx->n : 1) * sizeof(*flags));
	size_t k;

	if (!flags)
		return -ENOMEM;
	for (k = 0; k < idx->n; k++)
		flags[k] = idx->blk[k].flags;
	bfs_index_guess_irregular(idx, false);
	for (k = 0; k < idx->n; k++)
		if (flags[k] & (BFS_BLK_CHAIN | BFS_BLK_GUESS))
			idx->blk[k].flags = flags[k];
	free(flags);
	for (k = 0; k < idx->n && !(idx->blk[k].flags & BFS_BLK_GUESS); k++)
		;
	atomic_store(&idx->nexact, k);
	return 0;
}

static int zstd_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct walk w = { .io = io, .idx = idx, .rd = { .io = io } };
	int rc;

	(void)side; /* zstd has no sidecar index */
	rc = scan_table(io, idx);
	if (rc <= 0)
		return rc;
	rc = walk_file(&w);
	free(w.rd.win);
	free(w.in);
	free(w.out);
	free(w.sout);
	free(w.spans);
	ZSTD_freeDCtx(w.d);
	if (rc < 0)
		return rc;
	idx->block_size = SPAN;
	for (size_t k = 0; k < idx->n; k++)
		if (!(idx->blk[k].flags & (BFS_BLK_CHAIN | BFS_BLK_GUESS | BFS_BLK_BAD)) &&
		    idx->blk[k].usize > idx->block_size)
			idx->block_size = idx->blk[k].usize;
	rc = distrust(idx);
	return rc < 0 ? rc : chains_attach(idx);
}

/* --- the index cache ------------------------------------------------------ */

/* A block a walk could have recorded: a frame, or a span of a big one. */
static bool zstd_check_entry(const struct bfs_blk *b)
{
	if (b->flags & BFS_BLK_OPEN)
		return b->flags == (BFS_BLK_CHAIN | BFS_BLK_OPEN) && b->usize <= SPAN &&
		       b->clen >= FRAME_MIN;
	if (b->flags & BFS_BLK_CHAIN)
		return !(b->flags & ~BFS_BLK_CHAIN) && b->usize <= SPAN && b->clen <= SPAN_CLEN_MAX;
	return !(b->flags & ~(BFS_BLK_GUESS | BFS_BLK_CLAIMED)) && b->aux == 0 &&
	       b->usize <= FRAME_USIZE_MAX && b->clen >= FRAME_MIN;
}

/*
 * Spans must chain as a walk makes them: numbered from 0 in each frame,
 * each starting where the one before ended (open spans: each stating the
 * same frame), only the last of a frame marked so, and nothing but a new
 * frame after it. Frame sizes are then
 * distrusted as the walk distrusts them (distrust()).
 */
static int zstd_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	(void)priv;
	if (len != 0)
		return 1;
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k], *p = k ? &idx->blk[k - 1] : NULL;
		bool p_open = p && (p->flags & BFS_BLK_CHAIN) && !(p->aux & SPAN_END);
		uint32_t seq = b->aux & SPAN_SEQ_MASK;

		if (!(b->flags & BFS_BLK_CHAIN)) {
			if (p_open)
				return 1;
			continue;
		}
		if (seq == 0 ? p_open :
			       !p_open || seq != (p->aux & SPAN_SEQ_MASK) + 1 ||
				       (b->flags ^ p->flags) & BFS_BLK_OPEN ||
				       ((b->flags & BFS_BLK_OPEN) ?
						b->coff != p->coff || b->clen != p->clen :
						b->coff != p->coff + p->clen))
			return 1;
	}
	if (idx->n && (idx->blk[idx->n - 1].flags & BFS_BLK_CHAIN) &&
	    !(idx->blk[idx->n - 1].aux & SPAN_END))
		return 1; /* an entry is never written for a broken index */
	if (distrust(idx) < 0 || chains_attach(idx) < 0)
		return -ENOMEM;
	return 0;
}

static const struct bfs_suffix zstd_suffixes[] = { { ".zst", "" },
						   { ".tzst", ".tar" },
						   { NULL, NULL } };

const struct bfs_codec bfs_codec_zstd = {
	.name = "zstd",
	.suffixes = zstd_suffixes,
	.probe = zstd_probe,
	.prelude = zstd_prelude,
	.scan = zstd_scan,
	.decode = zstd_decode,
	.prefix = true,
	.measure = zstd_measure,
	.resume = zstd_resume,
	.decode_open = zstd_decode_open,
	.chain_head = zstd_chain_head,
	.check_entry = zstd_check_entry,
	.cache_load = zstd_cache_load,
};

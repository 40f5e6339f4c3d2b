// SPDX-License-Identifier: MIT
/*
 * BGZF (the blocked gzip of htslib's SAM/BAM specification, section 4.1):
 * probe, index scan (from a .gzi sidecar or by walking member headers) and
 * the decoding of one member with zlib. This file knows bytes only: the
 * caller finds the sidecar, reads blocks and logs what went wrong.
 *
 * A BGZF file is a series of gzip members (RFC 1952), each at most 64 KiB
 * compressed and decompressed, whose extra field carries its own size:
 *
 *   offset  size
 *   0       4   ID1 ID2 CM FLG   1f 8b 08 04 (FLG.FEXTRA set)
 *   4       4   MTIME
 *   8       1   XFL
 *   9       1   OS
 *   10      2   XLEN             bytes of extra subfields that follow
 *   12      XLEN subfields, each SI1 SI2 SLEN(2) DATA(SLEN); one of them is
 *               'B' 'C' SLEN=2 BSIZE(2): total member bytes - 1
 *   12+XLEN ... CDATA            raw deflate (RFC 1951)
 *   BSIZE-7 4   CRC32            of the decompressed data
 *   BSIZE-3 4   ISIZE            decompressed bytes (<= 65536)
 *
 * bgzip writes XLEN=6 with BC as the only subfield (18-byte header) and
 * ends the file with an empty member, the 28-byte EOF marker. Empty
 * members carry no data, so they get no index entry, wherever they are.
 *
 * The .gzi sidecar (`bgzip -i`, `bgzip -r`), all little-endian:
 *
 *   uint64 count
 *   count x { uint64 compressed offset, uint64 uncompressed offset }
 *
 * one pair per member that starts new data, except the first (0, 0). What
 * htslib 1.16 really writes: the EOF marker is never listed; empty
 * members (the EOF markers of concatenated files) are folded into the
 * span of the data member before them, or of the first one at the start
 * of the file; an empty input gets count = 2^64 - 1 and no pairs. So a
 * span between two pairs may hold several whole members, and decode
 * accepts any run of whole members whose ISIZEs add up to the block's.
 *
 * Neither ISIZE nor the .gzi is under a checksum, yet each block's size
 * places every block after it. A size that differs from the one most
 * blocks share is therefore measured (inflated) before a read relies on
 * it (bfs_index_guess_irregular(), bgzf_measure()): bgzip's files cost
 * nothing more; a damaged one fails its own block instead of moving the
 * rest of the file.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "rfc1952.h"

/* RFC 1952 section 2.3, beyond rfc1952.h */
#define GZ_FIXED_LEN	12 /* ID1..OS plus XLEN */
#define GZ_SUBFIELD_LEN 4  /* SI1 SI2 SLEN */
#define GZ_ISIZE_LEN	4

/* SAM/BAM specification section 4.1 */
#define BGZF_SI1	'B'
#define BGZF_SI2	'C'
#define BGZF_SLEN	2
#define BGZF_HDR_MIN	(GZ_FIXED_LEN + GZ_SUBFIELD_LEN + BGZF_SLEN) /* 18 */
#define BGZF_MEMBER_MIN (GZ_FIXED_LEN + GZ_TRAILER_LEN)		     /* what BSIZE+1 must cover */
#define BGZF_BLOCK_MAX	65536 /* both compressed and decompressed */

/* .gzi: count, then pairs */
#define GZI_HDR_LEN  8
#define GZI_PAIR_LEN 16
/*
 * A .gzi span is one data member plus the empty members folded into it.
 * Twice the largest member leaves room for thousands of EOF markers yet
 * bounds what a lying sidecar can make a reader allocate per block.
 */
#define GZI_SPAN_MAX (2 * BGZF_BLOCK_MAX)

/*
 * Bytes read at each member start: enough for bgzip's 18-byte header and
 * a few foreign subfields. The trailer of one member and the header of
 * the next come in one read, so a walk costs one pread per member.
 */
#define WALK_PEEK 64
#define WALK_BUF  (GZ_FIXED_LEN + UINT16_MAX) /* the largest header: XLEN is 16 bits */

struct hdr {
	uint32_t member_len; /* BSIZE + 1 */
	uint32_t extra_end;  /* GZ_FIXED_LEN + XLEN */
};

/* Magic, method and flags: the first 4 bytes, or as many as @len shows. */
static bool magic_ok(const uint8_t *p, size_t len)
{
	static const uint8_t magic[] = { GZ_ID1, GZ_ID2, GZ_CM_DEFLATE };

	if (memcmp(p, magic, len < sizeof(magic) ? len : sizeof(magic)) != 0)
		return false;
	return len < 4 || ((p[3] & GZ_FEXTRA) && !(p[3] & GZ_FRESERVED));
}

/*
 * Look for the BC subfield among the extra subfields [GZ_FIXED_LEN, end),
 * reading only the first @vis bytes of @p. Other subfields may precede
 * it. Return: 1 with *@member_len; 0 when not (yet) seen; -1 malformed.
 */
static int find_bc(const uint8_t *p, size_t end, size_t vis, uint32_t *member_len)
{
	size_t pos = GZ_FIXED_LEN;

	while (pos < end && pos + GZ_SUBFIELD_LEN <= vis) {
		size_t slen = bfs_le16(p + pos + 2);

		if (end - pos < GZ_SUBFIELD_LEN || end - pos - GZ_SUBFIELD_LEN < slen)
			return -1;
		if (p[pos] == BGZF_SI1 && p[pos + 1] == BGZF_SI2 && slen == BGZF_SLEN) {
			if (pos + GZ_SUBFIELD_LEN + BGZF_SLEN > vis)
				return 0;
			*member_len = (uint32_t)bfs_le16(p + pos + GZ_SUBFIELD_LEN) + 1;
			return 1;
		}
		pos += GZ_SUBFIELD_LEN + slen;
	}
	return pos < end && end - pos < GZ_SUBFIELD_LEN && vis >= end ? -1 : 0;
}

/*
 * Parse a member header from the @len bytes at @p.
 * Return: 0; 1 when @len is too short to tell; -EBADMSG with *@why.
 */
static int parse_hdr(const uint8_t *p, size_t len, struct hdr *h, const char **why)
{
	size_t end;
	int rc;

	if (!magic_ok(p, len)) {
		*why = "not a BGZF member (no gzip magic or no FEXTRA)";
		return -EBADMSG;
	}
	if (len < GZ_FIXED_LEN)
		return 1;
	end = GZ_FIXED_LEN + bfs_le16(p + 10);
	if (len < end)
		return 1;
	rc = find_bc(p, end, end, &h->member_len);
	if (rc <= 0) {
		*why = rc < 0 ? "malformed gzip extra field" : "gzip member without a BC subfield";
		return -EBADMSG;
	}
	h->extra_end = (uint32_t)end;
	if (h->member_len < end + GZ_TRAILER_LEN) {
		*why = "BSIZE smaller than the member's header and trailer";
		return -EBADMSG;
	}
	return 0;
}

/* The BC subfield must lie within @len; a longer extra field may go on. */
static bool bgzf_probe(const uint8_t *head, size_t len)
{
	uint32_t member_len;

	if (len < BGZF_HDR_MIN || !magic_ok(head, len))
		return false;
	return find_bc(head, GZ_FIXED_LEN + bfs_le16(head + 10), len, &member_len) == 1;
}

/* ---- scan: walking members ---- */

struct walk {
	struct bfs_io *io;
	struct bfs_index *idx;
	uint8_t *buf;	  /* WALK_BUF bytes: a window on the file */
	uint64_t buf_off; /* file offset of buf[0] */
	size_t buf_len;	  /* valid bytes in buf */
};

/*
 * Point *@p at the bytes [off, off + need) of the file, reading up to
 * @want bytes (need <= want <= WALK_BUF) when the window misses.
 * The caller has checked that [off, off + need) lies inside the file.
 */
static int win_get(struct walk *w, uint64_t off, size_t need, size_t want, const uint8_t **p)
{
	uint64_t avail;
	int rc;

	if (off >= w->buf_off && off - w->buf_off <= w->buf_len &&
	    need <= w->buf_len - (off - w->buf_off)) {
		*p = w->buf + (off - w->buf_off);
		return 0;
	}
	avail = w->io->size - off;
	if (want > avail)
		want = (size_t)avail;
	w->buf_len = 0;
	rc = bfs_io_read(w->io, w->buf, want, off);
	if (rc < 0)
		return rc;
	w->buf_off = off;
	w->buf_len = want;
	*p = w->buf;
	return 0;
}

static int inflate_member(const uint8_t *m, size_t avail, uint8_t *dst, size_t room, bool verify,
			  bool measure, uint32_t *mlen, uint32_t *isize, const char **why);

/*
 * Is the member of @len bytes at @off, whose ISIZE is 0, really empty?
 * An EOF marker is in the window already, so this costs no read.
 * Return: 0 if it inflates to nothing; 1 with *@why if not; -errno.
 */
static int check_empty(struct walk *w, uint64_t off, uint32_t len, const char **why)
{
	uint32_t mlen, isize;
	const uint8_t *p;
	uint8_t none;
	int rc;

	rc = win_get(w, off, len, len, &p); /* len <= BGZF_BLOCK_MAX < WALK_BUF */
	if (rc < 0)
		return rc;
	rc = inflate_member(p, len, &none, 0, false, false, &mlen, &isize, why);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		*why = "member with ISIZE 0 does not inflate to nothing";
		return 1;
	}
	return 0;
}

/*
 * Add one index entry per non-empty member from @off to the end of the
 * file. Damage stops the walk with the index marked broken.
 */
static int walk_members(struct walk *w, uint64_t off)
{
	uint64_t size = w->io->size;
	const char *why;

	while (off < size) {
		uint64_t left = size - off;
		size_t fixed = left < GZ_FIXED_LEN ? (size_t)left : GZ_FIXED_LEN;
		size_t hlen;
		const uint8_t *p;
		struct hdr h;
		uint32_t isize;
		int rc;

		rc = win_get(w, off, fixed, WALK_PEEK, &p);
		if (rc < 0)
			return rc;
		rc = parse_hdr(p, fixed, &h, &why);
		if (rc < 0)
			goto broken;
		/* Now XLEN is known: bring in the whole extra field. */
		hlen = fixed < GZ_FIXED_LEN ? SIZE_MAX : (size_t)GZ_FIXED_LEN + bfs_le16(p + 10);
		if (hlen > left) {
			why = "truncated header";
			goto broken;
		}
		rc = win_get(w, off, hlen, hlen > WALK_PEEK ? hlen : WALK_PEEK, &p);
		if (rc < 0)
			return rc;
		rc = parse_hdr(p, hlen, &h, &why);
		if (rc < 0)
			goto broken;
		if (!bfs_range_ok(off, h.member_len, size)) {
			why = "BSIZE runs past the end of the file";
			goto broken;
		}
		/* ISIZE, and the next member's header with it */
		rc = win_get(w, off + h.member_len - GZ_ISIZE_LEN, GZ_ISIZE_LEN,
			     GZ_ISIZE_LEN + WALK_PEEK, &p);
		if (rc < 0)
			return rc;
		isize = bfs_le32(p);
		if (isize > BGZF_BLOCK_MAX) {
			bfs_index_mark_broken(w->idx, off,
					      "bgzf: ISIZE %" PRIu32
					      " over 65536 in member at offset %" PRIu64,
					      isize, off);
			return 0;
		}
		if (isize > 0) {
			rc = bfs_index_add(w->idx, off, h.member_len, isize, 0);
		} else {
			/*
			 * Empty members (EOF markers) carry nothing and get no
			 * entry; but an ISIZE damaged to 0 must not drop the
			 * member's data without a word.
			 */
			rc = check_empty(w, off, h.member_len, &why);
			if (rc > 0)
				goto broken;
		}
		if (rc < 0)
			return rc;
		off += h.member_len;
	}
	return 0;

broken:
	bfs_index_mark_broken(w->idx, off, "bgzf: %s at offset %" PRIu64, why, off);
	return 0;
}

/* ---- scan: the .gzi sidecar ---- */

/*
 * Read and check @side against the data file of @size bytes.
 * Return: 0 with *@tab (count pairs, caller frees) and *@count; 1 when
 * the sidecar is unusable; -ENOMEM.
 */
static int load_gzi(struct bfs_io *side, uint64_t size, size_t max_blocks, uint8_t **tab,
		    size_t *count)
{
	uint8_t head[GZI_HDR_LEN];
	uint64_t n, pc = 0, pu = 0;
	uint8_t *t;

	if (side->size < GZI_HDR_LEN || bfs_io_read(side, head, sizeof(head), 0) < 0)
		return 1;
	n = bfs_le64(head);
	/* Exact size first: it bounds the allocation by the sidecar's real size. */
	if (n > (side->size - GZI_HDR_LEN) / GZI_PAIR_LEN ||
	    side->size != GZI_HDR_LEN + n * GZI_PAIR_LEN || n >= max_blocks)
		return 1;
	if (n == 0) {
		*tab = NULL;
		*count = 0;
		return 0;
	}
	t = malloc((size_t)n * GZI_PAIR_LEN);
	if (!t)
		return -ENOMEM;
	if (bfs_io_read(side, t, (size_t)n * GZI_PAIR_LEN, GZI_HDR_LEN) < 0)
		goto unusable;
	for (size_t i = 0; i < n; i++) {
		uint64_t c = bfs_le64(t + i * GZI_PAIR_LEN);
		uint64_t u = bfs_le64(t + i * GZI_PAIR_LEN + 8);

		if (c <= pc || c - pc < BGZF_MEMBER_MIN || c - pc > GZI_SPAN_MAX || u <= pu ||
		    u - pu > BGZF_BLOCK_MAX || !bfs_range_ok(c, BGZF_MEMBER_MIN, size))
			goto unusable;
		pc = c;
		pu = u;
	}
	*tab = t;
	*count = (size_t)n;
	return 0;

unusable:
	free(t);
	return 1;
}

static int bgzf_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct walk w = { .io = io, .idx = idx };
	uint64_t off = 0;
	int rc;

	if (side) {
		uint64_t pc = 0, pu = 0;
		uint8_t *tab;
		size_t n;

		/*
		 * A sidecar that fails these checks is ignored and the members
		 * walked instead: it may be stale or foreign, and the data file
		 * alone is enough. One that passes but lies is caught by decode
		 * (offsets) or by settling (odd sizes, see below).
		 */
		rc = load_gzi(side, io->size, idx->max_blocks, &tab, &n);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			for (size_t i = 0; i < n; i++) {
				uint64_t c = bfs_le64(tab + i * GZI_PAIR_LEN);
				uint64_t u = bfs_le64(tab + i * GZI_PAIR_LEN + 8);

				rc = bfs_index_add(idx, pc, (uint32_t)(c - pc), (uint32_t)(u - pu),
						   0);
				if (rc < 0) {
					free(tab);
					return rc;
				}
				pc = c;
				pu = u;
			}
			free(tab);
			idx->source = BFS_SRC_GZI;
			/*
			 * The last span has no end in the sidecar: walk from its
			 * start, which also finds members appended since.
			 */
			off = pc;
		}
	}
	w.buf = malloc(WALK_BUF);
	if (!w.buf)
		return -ENOMEM;
	rc = walk_members(&w, off);
	free(w.buf);
	/*
	 * Neither ISIZE nor a .gzi offset is under a checksum, and each places
	 * every block after it: an odd one is measured before it is relied on.
	 */
	if (rc == 0)
		bfs_index_guess_irregular(idx, false);
	/*
	 * BGZF declares no block size; report what the writer used (bgzip:
	 * 65280), which the largest block is, or the format's limit.
	 */
	idx->block_size = idx->max_usize ? idx->max_usize : BGZF_BLOCK_MAX;
	return rc;
}

/* ---- decode ---- */

/*
 * One inflater per thread, allocated on first use: zlib's inflateInit
 * allocates about 40 KiB, which would cost more than inflating a small
 * block. The key is never deleted; each thread's state dies with it.
 * libdeflate (-Dlibdeflate), when built in, inflates whole buffers about
 * twice as fast as zlib, which is why bgzip uses it too.
 */
#if HAVE_LIBDEFLATE
typedef struct libdeflate_decompressor inflater;

static void inflater_free(void *p)
{
	libdeflate_free_decompressor(p);
}

static inflater *inflater_new(void)
{
	return libdeflate_alloc_decompressor();
}
#else
typedef z_stream inflater;

static void inflater_free(void *p)
{
	inflateEnd(p);
	free(p);
}

static inflater *inflater_new(void)
{
	z_stream *zs = calloc(1, sizeof(*zs));

	if (zs && inflateInit2(zs, -MAX_WBITS) != Z_OK) { /* raw deflate: BGZF frames it */
		free(zs);
		zs = NULL;
	}
	return zs;
}
#endif

static pthread_key_t zkey;
static pthread_once_t zkey_once = PTHREAD_ONCE_INIT;
static int zkey_err;

static void zkey_create(void)
{
	zkey_err = pthread_key_create(&zkey, inflater_free);
}

static inflater *thread_inflater(void)
{
	inflater *in;

	if (pthread_once(&zkey_once, zkey_create) != 0 || zkey_err != 0)
		return NULL;
	in = pthread_getspecific(zkey);
	if (in)
		return in;
	in = inflater_new();
	if (in && pthread_setspecific(zkey, in) != 0) {
		inflater_free(in);
		in = NULL;
	}
	return in;
}

/*
 * Inflate exactly @len bytes of deflate data at @in into at most @cap
 * bytes at @out; *@got: how many. A stream that wants more room or leaves
 * input behind is corrupt. Return: 0, or -EBADMSG / -ENOMEM with *@why.
 */
static int inflate_upto(const uint8_t *in, size_t len, uint8_t *out, size_t cap, size_t *got,
			const char **why)
{
	inflater *st = thread_inflater();

	if (!st) {
		*why = "no memory for an inflate state";
		return -ENOMEM;
	}
#if HAVE_LIBDEFLATE
	size_t used = 0;
	enum libdeflate_result r =
		libdeflate_deflate_decompress_ex(st, in, len, out, cap, &used, got);

	if (r != LIBDEFLATE_SUCCESS) {
		*why = r == LIBDEFLATE_INSUFFICIENT_SPACE ? "deflate data longer than ISIZE" :
							    "corrupt deflate data";
		return -EBADMSG;
	}
	if (used != len) {
		*why = "bytes after the deflate data";
		return -EBADMSG;
	}
#else
	int zrc;

	if (inflateReset(st) != Z_OK) {
		*why = "no memory for an inflate state";
		return -ENOMEM;
	}
	st->next_in = (Bytef *)(uintptr_t)in; /* zlib's API is not const */
	st->avail_in = (uInt)len;
	st->next_out = out;
	st->avail_out = (uInt)cap;
	zrc = inflate(st, Z_FINISH);
	if (zrc != Z_STREAM_END) {
		*why = zrc == Z_BUF_ERROR && st->avail_out == 0 ? "deflate data longer than ISIZE" :
								  "corrupt deflate data";
		return -EBADMSG;
	}
	if (st->avail_in != 0) {
		*why = "bytes after the deflate data";
		return -EBADMSG;
	}
	*got = cap - st->avail_out;
#endif
	return 0;
}

/* The same, filling exactly @out_len bytes: a stream that stops early is corrupt too. */
static int inflate_exact(const uint8_t *in, size_t len, uint8_t *out, size_t out_len,
			 const char **why)
{
	size_t got = 0;
	int rc = inflate_upto(in, len, out, out_len, &got, why);

	if (rc == 0 && got != out_len) {
		*why = "deflate data shorter than ISIZE";
		rc = -EBADMSG;
	}
	return rc;
}

static uint32_t crc_of(const uint8_t *p, size_t len)
{
#if HAVE_LIBDEFLATE
	return libdeflate_crc32(0, p, len);
#else
	return (uint32_t)crc32(crc32(0, Z_NULL, 0), p, (uInt)len);
#endif
}

/* Skip a zero-terminated header string (FNAME, FCOMMENT) inside [*pos, end). */
static bool skip_string(const uint8_t *p, size_t *pos, size_t end)
{
	const uint8_t *z = memchr(p + *pos, 0, end - *pos);

	if (!z)
		return false;
	*pos = (size_t)(z - p) + 1;
	return true;
}

/*
 * Inflate the one member at @m (@avail bytes from there to the block's
 * end) into @dst, which has room for @room bytes. Return: 0 with
 * *@mlen and *@isize; -EBADMSG, -EILSEQ or -ENOMEM with *@why.
 * With @measure, what the data inflates to within @room is *@isize, and
 * neither ISIZE nor CRC32 is checked.
 */
static int inflate_member(const uint8_t *m, size_t avail, uint8_t *dst, size_t room, bool verify,
			  bool measure, uint32_t *mlen, uint32_t *isize, const char **why)
{
	struct hdr h;
	size_t pos, data_end;
	uint32_t crc;
	int rc;

	rc = parse_hdr(m, avail, &h, why);
	if (rc != 0) {
		if (rc == 1)
			*why = "truncated member header";
		return -EBADMSG;
	}
	if (h.member_len > avail) {
		*why = "BSIZE does not match the block length";
		return -EBADMSG;
	}
	data_end = h.member_len - GZ_TRAILER_LEN;
	pos = h.extra_end;
	/* bgzip never sets these, but they are valid gzip; skip rather than fail. */
	if ((m[3] & GZ_FNAME) && !skip_string(m, &pos, data_end))
		goto bad_hdr;
	if ((m[3] & GZ_FCOMMENT) && !skip_string(m, &pos, data_end))
		goto bad_hdr;
	if (m[3] & GZ_FHCRC) {
		if (data_end - pos < 2)
			goto bad_hdr;
		pos += 2;
	}
	crc = bfs_le32(m + data_end);
	*isize = bfs_le32(m + h.member_len - GZ_ISIZE_LEN);
	*mlen = h.member_len;
	if (measure) {
		size_t got = 0;

		rc = inflate_upto(m + pos, data_end - pos, dst, room, &got, why);
		*isize = (uint32_t)got;
		return rc;
	}
	if (*isize > room) {
		*why = "ISIZE does not match the index";
		return -EBADMSG;
	}
	rc = inflate_exact(m + pos, data_end - pos, dst, *isize, why);
	if (rc < 0)
		return rc;
	if (verify && crc_of(dst, *isize) != crc) {
		*why = "CRC32 mismatch";
		return -EILSEQ;
	}
	return 0;

bad_hdr:
	*why = "malformed gzip header";
	return -EBADMSG;
}

/* Whole blocks only (.prefix false): a BGZF block is 64 KiB at most. */
static int bgzf_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		       uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *blk = &idx->blk[k];
	size_t pos = 0, out = 0;

	if (n != blk->usize) {
		*why = "BGZF blocks decode whole only";
		return -EINVAL;
	}
	/*
	 * Walked blocks are one member; .gzi spans may add empty members
	 * (see the top of this file). Either way the members must tile
	 * @src exactly and their data fill @dst exactly.
	 */
	while (pos < blk->clen) {
		uint32_t mlen, isize;
		int rc;

		rc = inflate_member(src + pos, blk->clen - pos, dst + out, blk->usize - out, verify,
				    false, &mlen, &isize, why);
		if (rc < 0)
			return rc;
		pos += mlen;
		out += isize;
	}
	if (out != blk->usize) {
		*why = "members hold fewer bytes than the index says";
		return -EBADMSG;
	}
	return 0;
}

/*
 * What a block really inflates to, for a size only the file states (an
 * odd ISIZE or .gzi span: bfs_index_guess_irregular()). Inflates every
 * member of the block into a scratch buffer; no CRC check, since the
 * length is all settling needs and decode checks the rest.
 */
static int bgzf_measure(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
			const char **why)
{
	uint8_t *tmp = malloc(BGZF_BLOCK_MAX);
	size_t pos = 0, out = 0;
	int rc = 0;

	if (!tmp) {
		*why = "no memory to measure a BGZF block";
		return -ENOMEM;
	}
	while (pos < blk->clen) {
		uint32_t mlen, isize;

		rc = inflate_member(src + pos, blk->clen - pos, tmp, BGZF_BLOCK_MAX - out, false,
				    true, &mlen, &isize, why);
		if (rc < 0)
			break;
		pos += mlen;
		out += isize;
	}
	free(tmp);
	if (rc == 0 && out == 0) {
		*why = "members hold no data"; /* the index has no room for an empty block */
		rc = -EBADMSG;
	}
	if (rc == 0)
		*usize = (uint32_t)out;
	return rc == -ENOMEM ? rc : rc < 0 ? -EBADMSG : 0;
}

/* --- the index cache ------------------------------------------------------ */

/* A block a BGZF walk could have recorded: one member, at most 64 KiB each way. */
static bool bgzf_check_entry(const struct bfs_blk *b)
{
	return b->usize <= BGZF_BLOCK_MAX && b->clen >= BGZF_MEMBER_MIN &&
	       b->clen <= BGZF_BLOCK_MAX && b->aux == 0 && !(b->flags & BFS_BLK_CSUM);
}

/* As after a walk: an odd ISIZE is measured before it places later members. */
static int bgzf_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	(void)priv;
	if (len != 0)
		return 1;
	bfs_index_guess_irregular(idx, false);
	return 0;
}

static const struct bfs_suffix bgzf_suffixes[] = {
	{ ".gz", "" }, { ".bgz", "" }, { ".tgz", ".tar" }, { NULL, NULL }, /* .gz wins a tie */
};

const struct bfs_codec bfs_codec_bgzf = {
	.name = "bgzf",
	.suffixes = bgzf_suffixes,
	.sidecar = ".gzi", /* bgzip -i writes NAME.gz.gzi */
	.probe = bgzf_probe,
	.scan = bgzf_scan,
	.decode = bgzf_decode,
	.measure = bgzf_measure, /* only for sizes bfs_index_guess_irregular() doubts */
	.check_entry = bgzf_check_entry,
	.cache_load = bgzf_cache_load,
};

// SPDX-License-Identifier: MIT
/*
 * Plain gzip (RFC 1952: one or more members, each a header, a raw
 * deflate stream (RFC 1951) and a CRC32/ISIZE trailer), from any writer:
 * gzip, pigz, zlib, Python. BGZF files are gzip too, but the registry
 * gives them to codec_bgzf.c first, and probe() refuses what BGZF's
 * probe claims. Knows bytes only: no paths, no cache, no locks.
 *
 * A deflate stream can only be entered at its start, so random access
 * needs checkpoints: one walk of the file inflates everything once and,
 * every -o gzip_span bytes of output (at the next deflate block boundary
 * after that many, or at the next member start, which needs nothing
 * saved), records where the inflater stands:
 *
 *   coff   the first input byte not yet consumed
 *   bits   0..7 bits of the byte before coff not yet consumed, and
 *   val    their value
 *   window the last 32 KiB of the member's output (fewer near its
 *          start), which later back-references may copy from; kept
 *          deflated (level 1: 7 KiB for source text; a fraction of a
 *          millisecond each, against a few for the span it starts)
 *
 * The scan is that whole walk, so it finishes before the file's size is
 * known to anyone (bfs_file_open(), at the first stat or open): the size
 * is the end of the stream, and the kernel asks for it before any read.
 *
 * A raw inflater restores that state with inflatePrime() and
 * inflateSetDictionary() (the idea of zlib's examples/zran.c). Each span
 * between two checkpoints is one block of the index: coff and clen its
 * input, usize its output, aux the CRC32 of its output; the checkpoints
 * themselves are the index's private data (struct gz_index). A span may
 * cross member boundaries: decode reads the trailer and the next header
 * as it meets them.
 *
 * Decoding a span proves its own extent: after usize bytes the inflater
 * must stand exactly where the next checkpoint says (its coff and bits,
 * at a deflate block boundary, or after a member's trailer), so a size
 * that is off by any amount fails that span, and with -o verify its
 * bytes must match the CRC32 the walk recorded. Sizes are settled by the
 * walk itself, so nothing is guessed and measure() is not needed.
 *
 * Damage found by the walk ends the index where the good data ends: a
 * deflate error, or a member whose CRC32 or ISIZE does not match, loses
 * that whole member (bytes inflated before an error may already be
 * wrong, so none of them are served); a header that is not gzip ends
 * the file at that header (zero bytes after the last member are padding
 * and ignored, as gzip does); a file that stops inside a member serves
 * what its input inflated to, which is all gzip -dc prints for it.
 *
 * Limits: a span holds at most SPAN_USIZE_MAX bytes of output and
 * SPAN_CLEN_MAX of input (a deflate block longer than that, which no
 * zlib-based writer makes, or a long run of empty members, ends the file
 * there as damage); a member header is at most HDR_MAX bytes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
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
#define GZ_FIXED_LEN 10 /* ID1 ID2 CM FLG MTIME(4) XFL OS */

/* RFC 1951: back-references reach 32 KiB */
#define WINDOW_MAX 32768u

/* Longest member header we take: FEXTRA alone may be 64 KiB. */
#define HDR_MAX (128u << 10)
/* Input read per pread during the walk; a header always fits. */
#define CHUNK	(256u << 10)
/* Output inflated per call during the walk. */
#define SCRATCH (256u << 10)

/* Bounds on one span: see the top of this file. */
#define SPAN_USIZE_MAX	(64u << 20)
#define SPAN_CLEN_MAX	(64u << 20)
/* A span is also cut at a boundary once its input reaches this many times the span. */
#define CLEN_CUT_FACTOR 4

/* Level for the windows: they are deflated once and inflated per random read. */
#define WINDOW_LEVEL 1

enum cp_kind {
	CP_MEMBER = 0, /* coff is a member header: nothing to restore */
	CP_BLOCK = 1,  /* coff is inside a deflate stream, at a block boundary */
};

/* How the last span ends (the others end where the next checkpoint starts). */
enum cp_end {
	END_TRAILER = 0, /* after a member's trailer, exactly at clen */
	END_OPEN = 1,	 /* the file stopped inside a member: usize is all there is */
};

struct gz_cp {
	uint32_t wlen; /* deflated window bytes at woff in the blob; 0 for CP_MEMBER */
	uint32_t wraw; /* the window's bytes, 1..WINDOW_MAX; 0 for CP_MEMBER */
	uint64_t woff;
	uint8_t bits; /* 0..7 */
	uint8_t val;  /* the bits, low-aligned: < 1 << bits */
	uint8_t kind; /* enum cp_kind */
	uint8_t end;  /* enum cp_end; only the last checkpoint's counts */
};

/* The index's private data: one checkpoint per span (block), windows in one blob. */
struct gz_index {
	size_t n;
	struct gz_cp *cp;
	uint8_t *blob;
	size_t blob_len;
};

/*
 * CRC32 of output, the walk's and verify's: libdeflate's (folding with
 * carry-less multiplication) when built in, about ten times zlib 1.2's,
 * which took a quarter of a walk's time. Same polynomial, same values.
 */
static uint32_t crc_of(const uint8_t *p, size_t len)
{
#if HAVE_LIBDEFLATE
	return libdeflate_crc32(0, p, len);
#else
	return (uint32_t)crc32(0, p, (uInt)len);
#endif
}

static void gz_index_free(void *p)
{
	struct gz_index *gi = p;

	free(gi->cp);
	free(gi->blob);
	free(gi);
}

/* ---- probe and member headers ---- */

/*
 * Parse the member header at @p (@avail bytes there; @more: the file goes
 * on after them). Return: 0 with *@hlen; 1 when @avail is too short to
 * tell and @more; -EBADMSG with *@why.
 */
static int parse_header(const uint8_t *p, size_t avail, bool more, size_t *hlen, const char **why)
{
	size_t pos = GZ_FIXED_LEN;
	uint8_t flg;

	if (avail > HDR_MAX)
		avail = HDR_MAX;
	if (avail < GZ_FIXED_LEN)
		goto short_hdr;
	if (p[0] != GZ_ID1 || p[1] != GZ_ID2 || p[2] != GZ_CM_DEFLATE) {
		*why = "not a gzip member";
		return -EBADMSG;
	}
	flg = p[3];
	if (flg & GZ_FRESERVED) {
		*why = "reserved gzip header flags set";
		return -EBADMSG;
	}
	if (flg & GZ_FEXTRA) {
		if (avail < pos + 2)
			goto short_hdr;
		pos += 2 + bfs_le16(p + pos);
		if (avail < pos)
			goto short_hdr;
	}
	for (uint8_t f = GZ_FNAME; f <= GZ_FCOMMENT; f <<= 1) {
		const uint8_t *z;

		if (!(flg & f))
			continue;
		z = pos < avail ? memchr(p + pos, 0, avail - pos) : NULL;
		if (!z)
			goto short_hdr;
		pos = (size_t)(z - p) + 1;
	}
	if (flg & GZ_FHCRC) {
		if (avail < pos + 2)
			goto short_hdr;
		/* the low 16 bits of the header's CRC32, which gzip and zlib check too */
		if (bfs_le16(p + pos) != (crc32(0, p, (uInt)pos) & 0xffff)) {
			*why = "gzip header CRC16 mismatch";
			return -EBADMSG;
		}
		pos += 2;
	}
	*hlen = pos;
	return 0;

short_hdr:
	if (more && avail < HDR_MAX)
		return 1;
	*why = avail >= HDR_MAX ? "gzip header longer than 128 KiB" : "truncated gzip header";
	return -EBADMSG;
}

/* A gzip member that BGZF's probe does not claim. */
static bool gzip_probe(const uint8_t *head, size_t len)
{
	if (len < GZ_FIXED_LEN || head[0] != GZ_ID1 || head[1] != GZ_ID2 ||
	    head[2] != GZ_CM_DEFLATE || (head[3] & GZ_FRESERVED))
		return false;
	return !bfs_codec_bgzf.probe(head, len);
}

/* ---- the walk ---- */

struct span {
	uint64_t coff, clen;
	uint64_t usize;
	uint32_t crc; /* of its output */
};

/* Where the walk stood when a member began: what dropping the member goes back to. */
struct mark {
	uint64_t at;	  /* the member's header */
	size_t nspans;	  /* spans closed by then; the open one is checkpoint nspans */
	struct span open; /* the open span as it was then */
};

struct walk {
	struct bfs_io *io;
	uint32_t span;	   /* -o gzip_span */
	uint64_t clen_cut; /* input after which a span ends at the next chance */
	uint8_t *in;	   /* CHUNK bytes of the file from in_off */
	uint64_t in_off;
	size_t in_len;
	uint8_t *out; /* SCRATCH bytes of output, discarded */
	uint8_t *win; /* WINDOW_MAX bytes: a window before deflating it */
	z_stream inf, def;
	bool inf_ok, def_ok;

	struct span *spans; /* closed spans */
	size_t nspans, spans_cap;
	struct gz_index *gi; /* a checkpoint per span, the open one included */
	size_t cp_cap, blob_cap;

	struct span cur; /* the open span (its clen is unused) */
	bool open;
	struct mark mark; /* the current member's start */

	bool broken; /* damage ends the index at why_at */
	const char *why;
	uint64_t why_at;
};

/* What inflate_member() tells the walk. */
enum member_end {
	MEMBER_DONE, /* its deflate data ended; the trailer is next */
	MEMBER_BAD,  /* damage inside it: drop the whole member */
	MEMBER_CUT,  /* the file ends inside it: the open span was ended there */
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* Read the file from @off into the input buffer: at most CHUNK bytes. */
static int fill(struct walk *w, uint64_t off)
{
	uint64_t left = w->io->size - off;
	size_t want = left < CHUNK ? (size_t)left : CHUNK;
	int rc;

	w->in_len = 0;
	w->in_off = off;
	rc = bfs_io_read(w->io, w->in, want, off);
	if (rc < 0)
		return rc;
	w->in_len = want;
	return 0;
}

/*
 * Up to @want bytes from @off (fewer at the end of the file) in the
 * buffer: *@p, and *@avail how many there are from *@p on.
 */
static int view(struct walk *w, uint64_t off, size_t want, const uint8_t **p, size_t *avail)
{
	uint64_t left = w->io->size - off;
	int rc;

	if (want > left)
		want = (size_t)left;
	if (off < w->in_off || off - w->in_off > w->in_len ||
	    want > w->in_len - (off - w->in_off)) {
		rc = fill(w, off);
		if (rc < 0)
			return rc;
	}
	*p = w->in + (off - w->in_off);
	*avail = w->in_len - (size_t)(off - w->in_off);
	return 0;
}

/* Begin a span at @coff with checkpoint @cp (its window already in the blob). */
static int open_span(struct walk *w, uint64_t coff, const struct gz_cp *cp)
{
	int rc = grow((void **)&w->gi->cp, &w->cp_cap, w->gi->n + 1, sizeof(*cp));

	if (rc < 0)
		return rc;
	w->gi->cp[w->gi->n++] = *cp;
	w->cur = (struct span){ .coff = coff };
	w->open = true;
	return 0;
}

/* End the open span at input offset @end. */
static int close_span(struct walk *w, uint64_t end, enum cp_end how)
{
	int rc = grow((void **)&w->spans, &w->spans_cap, w->nspans + 1, sizeof(*w->spans));

	if (rc < 0)
		return rc;
	w->gi->cp[w->gi->n - 1].end = (uint8_t)how;
	w->cur.clen = end - w->cur.coff;
	w->spans[w->nspans++] = w->cur;
	w->open = false;
	return 0;
}

/* The file is damaged at @at: the index ends before it. */
static void damage(struct walk *w, uint64_t at, const char *why)
{
	w->broken = true;
	w->why = why;
	w->why_at = at;
}

/*
 * Forget the current member: the spans closed inside it with their
 * checkpoints and windows, and its output in the span open when it began,
 * which is open again as it stood then.
 */
static void drop_member(struct walk *w)
{
	struct gz_index *gi = w->gi;
	size_t keep = w->mark.nspans + 1; /* checkpoints up to the then open span's */

	/* Checkpoints after it were made inside the member: each has a window. */
	if (gi->n > keep) {
		gi->blob_len = gi->cp[keep].woff;
		gi->n = keep;
	}
	w->nspans = w->mark.nspans;
	w->cur = w->mark.open;
	w->open = true;
}

/* Output @len bytes with CRC32 @crc (of just those) joined the open span. */
static void account(struct walk *w, size_t len, uint32_t crc)
{
	w->cur.crc = (uint32_t)crc32_combine(w->cur.crc, crc, (z_off_t)len);
	w->cur.usize += len;
}

/* Should the open span end at the next place it can, @in being where the input stands? */
static bool span_full(const struct walk *w, uint64_t in)
{
	return w->cur.usize >= w->span || (w->cur.usize > 0 && in - w->cur.coff >= w->clen_cut);
}

/* Absolute input offset of the inflater's next byte. */
static uint64_t in_pos(const struct walk *w)
{
	return w->in_off + (uint64_t)(w->inf.next_in - w->in);
}

/*
 * A checkpoint here, at a block boundary inside a member: @in is the
 * input offset of the next unconsumed byte, and @bits of @last (the byte
 * before it) are still unused. Ends the open span and begins the next.
 */
static int checkpoint_block(struct walk *w, uint64_t in, unsigned int bits, uint8_t last)
{
	struct gz_index *gi = w->gi;
	struct gz_cp cp = { .kind = CP_BLOCK, .bits = (uint8_t)bits };
	uInt wraw = 0;
	uLong bound;
	int rc;

	cp.val = bits ? (uint8_t)(last >> (8 - bits)) : 0;
	if (inflateGetDictionary(&w->inf, w->win, &wraw) != Z_OK || wraw == 0 || wraw > WINDOW_MAX)
		return 0; /* no output in this member yet: no checkpoint here */
	bound = deflateBound(&w->def, wraw);
	rc = grow((void **)&gi->blob, &w->blob_cap, gi->blob_len + bound, 1);
	if (rc < 0)
		return rc;
	if (deflateReset(&w->def) != Z_OK)
		return -ENOMEM;
	w->def.next_in = w->win;
	w->def.avail_in = wraw;
	w->def.next_out = gi->blob + gi->blob_len;
	w->def.avail_out = (uInt)bound;
	if (deflate(&w->def, Z_FINISH) != Z_STREAM_END)
		return -ENOMEM; /* the bound is zlib's own: only memory can fail */
	cp.woff = gi->blob_len;
	cp.wlen = (uint32_t)(bound - w->def.avail_out);
	cp.wraw = wraw;
	gi->blob_len += cp.wlen;
	rc = close_span(w, in, END_TRAILER); /* (end: read only on the last span) */
	if (rc == 0)
		rc = open_span(w, in, &cp);
	return rc;
}

/*
 * Point the inflater at the file from @at. The buffer starts one byte
 * early, so that the byte before the next one, whose unused bits a
 * checkpoint records, is always in it.
 */
static int feed(struct walk *w, uint64_t at)
{
	int rc = fill(w, at - 1); /* at > 0: a member header comes first */

	if (rc < 0)
		return rc;
	w->inf.next_in = w->in + 1;
	w->inf.avail_in = (uInt)(w->in_len - 1);
	return 0;
}

/*
 * Inflate one member's deflate data from @off (after its header) to its
 * end, with its CRC32 and length into *@crc, *@isize.
 * Return: enum member_end (*@end: the offset after the deflate data when
 * MEMBER_DONE), or -errno.
 */
static int inflate_member(struct walk *w, uint64_t off, uint64_t *end, uint32_t *crc,
			  uint64_t *isize)
{
	uint64_t size = w->io->size;
	int rc, zrc;

	if (inflateReset(&w->inf) != Z_OK)
		return -ENOMEM;
	*crc = 0;
	*isize = 0;
	rc = feed(w, off);
	if (rc < 0)
		return rc;
	for (bool full = false;;) {
		uInt avail_in;
		size_t got;

		/* (a call that filled the output may hold more without more input) */
		if (w->inf.avail_in == 0 && !full) {
			uint64_t at = in_pos(w);

			if (at >= size) {
				/* The file stops inside this member: keep what it gave. */
				if (w->cur.usize > 0) {
					rc = close_span(w, size, END_OPEN);
					if (rc < 0)
						return rc;
				}
				damage(w, size, "file ends inside a gzip member");
				return MEMBER_CUT;
			}
			rc = feed(w, at);
			if (rc < 0)
				return rc;
		}
		avail_in = w->inf.avail_in;
		w->inf.next_out = w->out;
		w->inf.avail_out = SCRATCH;
		zrc = inflate(&w->inf, Z_BLOCK);
		got = SCRATCH - w->inf.avail_out;
		full = w->inf.avail_out == 0;
		if (got) {
			uint32_t c = crc_of(w->out, got);

			*crc = (uint32_t)crc32_combine(*crc, c, (z_off_t)got);
			*isize += got;
			account(w, got, c);
		}
		if (zrc == Z_MEM_ERROR)
			return -ENOMEM;
		if (w->cur.usize > SPAN_USIZE_MAX || in_pos(w) - w->cur.coff > SPAN_CLEN_MAX) {
			damage(w, w->mark.at, "no deflate block boundary within 64 MiB");
			return MEMBER_BAD;
		}
		if (zrc == Z_STREAM_END) {
			*end = in_pos(w);
			return MEMBER_DONE;
		}
		if ((zrc != Z_OK && zrc != Z_BUF_ERROR) ||
		    (got == 0 && avail_in == w->inf.avail_in && avail_in > 0)) {
			damage(w, w->mark.at, "corrupt deflate data");
			return MEMBER_BAD;
		}
		if ((w->inf.data_type & 128) && !(w->inf.data_type & 64) &&
		    span_full(w, in_pos(w))) {
			unsigned int bits = (unsigned int)w->inf.data_type & 7;

			rc = checkpoint_block(w, in_pos(w), bits, w->inf.next_in[-1]);
			if (rc < 0)
				return rc;
		}
	}
}

/* After the last member from @off: only zero padding may follow. Return: 0 or -errno. */
static int check_tail(struct walk *w, uint64_t off)
{
	uint64_t at = off;

	while (at < w->io->size) {
		const uint8_t *p;
		size_t avail;
		int rc = view(w, at, CHUNK, &p, &avail);

		if (rc < 0)
			return rc;
		for (size_t i = 0; i < avail; i++) {
			if (p[i] != 0) {
				damage(w, off, "bytes after the last gzip member are not a member");
				return 0;
			}
		}
		at += avail;
	}
	return 0;
}

/*
 * One member at @off. Return: 0 with *@next after it; 1 when the walk
 * ends before it (*@next = @off: a header that is not gzip, padding, or
 * a member dropped as damaged), 2 when it ended inside it; -errno.
 */
static int walk_member(struct walk *w, uint64_t off, bool first, uint64_t *next)
{
	uint64_t size = w->io->size, dend, isize;
	const uint8_t *p;
	size_t avail, hlen = 0;
	const char *why;
	uint32_t crc;
	int rc;

	*next = off;
	rc = view(w, off, HDR_MAX, &p, &avail);
	if (rc < 0)
		return rc;
	if (!first && p[0] == 0) {
		rc = check_tail(w, off);
		return rc < 0 ? rc : 1;
	}
	rc = parse_header(p, avail, false, &hlen, &why);
	if (rc < 0) {
		damage(w, off, why);
		return 1;
	}
	if (w->open && w->cur.usize == 0 && off - w->cur.coff > SPAN_CLEN_MAX) {
		damage(w, off, "64 MiB of gzip members without data");
		return 1;
	}
	/* A member start needs no window: the cheapest checkpoint. */
	if (!w->open || span_full(w, off)) {
		struct gz_cp cp = { .kind = CP_MEMBER };

		if (w->open) {
			rc = close_span(w, off, END_TRAILER);
			if (rc < 0)
				return rc;
		}
		rc = open_span(w, off, &cp);
		if (rc < 0)
			return rc;
	}
	w->mark = (struct mark){ .at = off, .nspans = w->nspans, .open = w->cur };
	rc = inflate_member(w, off + hlen, &dend, &crc, &isize);
	if (rc < 0)
		return rc;
	if (rc == MEMBER_CUT)
		return 2;
	if (rc == MEMBER_DONE && !bfs_range_ok(dend, GZ_TRAILER_LEN, size)) {
		/* All of its data, but nothing to check it by: as a cut inside the data. */
		if (w->cur.usize > 0) {
			rc = close_span(w, size, END_OPEN);
			if (rc < 0)
				return rc;
		}
		damage(w, size, "file ends inside a gzip trailer");
		return 2;
	}
	if (rc == MEMBER_DONE) {
		rc = view(w, dend, GZ_TRAILER_LEN, &p, &avail);
		if (rc < 0)
			return rc;
		if (bfs_le32(p) != crc || bfs_le32(p + 4) != (uint32_t)isize) {
			damage(w, off,
			       bfs_le32(p) != crc ? "gzip member CRC32 mismatch" :
						    "gzip member ISIZE mismatch");
			rc = MEMBER_BAD;
		}
	}
	if (rc == MEMBER_BAD) {
		drop_member(w);
		return 1;
	}
	*next = dend + GZ_TRAILER_LEN;
	return 0;
}

static int walk_file(struct walk *w)
{
	uint64_t off = 0;
	int rc = 0;

	for (bool first = true; off < w->io->size && rc == 0; first = false) {
		rc = walk_member(w, off, first, &off);
		if (rc < 0)
			return rc;
	}
	if (!w->open)
		return 0;
	if (w->cur.usize > 0) /* it ends after the last good member */
		return close_span(w, off, END_TRAILER);
	/*
	 * An open span without output has no block: its checkpoint goes
	 * (commit()), and the span before it becomes the last. After a cut
	 * it decodes what it holds and no more is known; otherwise it takes
	 * over the empty members and final empty block to the end.
	 */
	if (w->nspans > 0) {
		struct span *last = &w->spans[w->nspans - 1];

		if (rc == 2) {
			w->gi->cp[w->nspans - 1].end = END_OPEN;
		} else {
			last->clen = off - last->coff;
			w->gi->cp[w->nspans - 1].end = END_TRAILER;
		}
	}
	return 0;
}

/* Free what the walk built but did not hand over. */
static void walk_free(struct walk *w)
{
	if (w->inf_ok)
		inflateEnd(&w->inf);
	if (w->def_ok)
		deflateEnd(&w->def);
	free(w->in);
	free(w->out);
	free(w->win);
	free(w->spans);
	if (w->gi)
		gz_index_free(w->gi);
}

/* Hand the closed spans to @idx, and their checkpoints as its private data. */
static int commit(struct walk *w, struct bfs_index *idx)
{
	struct gz_index *gi = w->gi;
	int rc;

	/* An open span that held nothing has no block, and its window goes too. */
	if (gi->n > w->nspans) {
		if (gi->cp[w->nspans].wlen)
			gi->blob_len = gi->cp[w->nspans].woff;
		gi->n = w->nspans;
	}
	for (size_t i = 0; i < w->nspans; i++) {
		const struct span *s = &w->spans[i];

		rc = bfs_index_add(idx, s->coff, (uint32_t)s->clen, (uint32_t)s->usize, 0);
		if (rc < 0)
			return rc;
		idx->blk[idx->n - 1].aux = s->crc;
	}
	idx->priv = gi;
	idx->priv_free = gz_index_free;
	idx->priv_bytes = sizeof(*gi) + gi->n * sizeof(*gi->cp) + gi->blob_len;
	w->gi = NULL;
	if (w->broken)
		bfs_index_mark_broken(idx, w->why_at, "gzip: %s at offset %" PRIu64, w->why,
				      w->why_at);
	return 0;
}

static int gzip_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct walk w = { .io = io, .span = bfs_codec_config(idx)->gzip_span };
	int rc = -ENOMEM;

	(void)side; /* plain gzip has no sidecar */
	if (w.span < BFS_GZIP_SPAN_MIN || w.span > BFS_GZIP_SPAN_MAX)
		w.span = BFS_GZIP_SPAN_DEFAULT;
	w.clen_cut = (uint64_t)CLEN_CUT_FACTOR * w.span;
	if (w.clen_cut > SPAN_CLEN_MAX / 4)
		w.clen_cut = SPAN_CLEN_MAX / 4;
	w.in = malloc(CHUNK);
	w.out = malloc(SCRATCH);
	w.win = malloc(WINDOW_MAX);
	w.gi = calloc(1, sizeof(*w.gi));
	if (!w.in || !w.out || !w.win || !w.gi)
		goto out;
	if (inflateInit2(&w.inf, -MAX_WBITS) != Z_OK)
		goto out;
	w.inf_ok = true;
	if (deflateInit2(&w.def, WINDOW_LEVEL, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		goto out;
	w.def_ok = true;
	rc = walk_file(&w);
	if (rc == 0)
		rc = commit(&w, idx);
	idx->block_size = w.span;
out:
	walk_free(&w);
	return rc;
}

/* ---- decode ---- */

/* Per thread: an inflater for spans and one for windows, and a window buffer. */
struct tls {
	z_stream inf, winf;
	uint8_t win[WINDOW_MAX];
#if HAVE_LIBDEFLATE
	struct libdeflate_decompressor *ld; /* whole spans: lib_span() */
	uint8_t *lin, *lout;		    /* its input and output, grown as needed */
	size_t lin_cap, lout_cap;
	uint16_t code[256]; /* fixed-Huffman literals, as lib_span() writes them */
	uint8_t clen[256];
#endif
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_err;

static void tls_free(void *p)
{
	struct tls *t = p;

	inflateEnd(&t->inf);
	inflateEnd(&t->winf);
#if HAVE_LIBDEFLATE
	libdeflate_free_decompressor(t->ld);
	free(t->lin);
	free(t->lout);
#endif
	free(t);
}

static void tls_create(void)
{
	tls_err = pthread_key_create(&tls_key, tls_free);
}

#if HAVE_LIBDEFLATE
static unsigned int fixed_lit(unsigned int c, unsigned int *len);
#endif

static struct tls *tls_get(void)
{
	struct tls *t;

	if (pthread_once(&tls_once, tls_create) != 0 || tls_err != 0)
		return NULL;
	t = pthread_getspecific(tls_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (inflateInit2(&t->inf, -MAX_WBITS) != Z_OK) {
		free(t);
		return NULL;
	}
	if (inflateInit2(&t->winf, -MAX_WBITS) != Z_OK) {
		inflateEnd(&t->inf);
		free(t);
		return NULL;
	}
#if HAVE_LIBDEFLATE
	t->ld = libdeflate_alloc_decompressor(); /* NULL: zlib does every span */
	for (unsigned int c = 0; c < 256; c++) {
		unsigned int len;

		t->code[c] = (uint16_t)fixed_lit(c, &len);
		t->clen[c] = (uint8_t)len;
	}
#endif
	if (pthread_setspecific(tls_key, t) != 0) {
		tls_free(t);
		return NULL;
	}
	return t;
}

/* Inflate the window of CP_BLOCK checkpoint @cp into t->win. Return: 0, -EBADMSG, -ENOMEM. */
static int restore_window(struct tls *t, const struct gz_index *gi, const struct gz_cp *cp,
			  const char **why)
{
	int zrc;

	if (inflateReset(&t->winf) != Z_OK)
		goto nomem;
	t->winf.next_in = gi->blob + cp->woff;
	t->winf.avail_in = cp->wlen;
	t->winf.next_out = t->win;
	t->winf.avail_out = WINDOW_MAX;
	zrc = inflate(&t->winf, Z_FINISH);
	if (zrc == Z_MEM_ERROR)
		goto nomem;
	if (zrc != Z_STREAM_END || t->winf.avail_in != 0 ||
	    WINDOW_MAX - t->winf.avail_out != cp->wraw) {
		*why = "gzip checkpoint window does not inflate";
		return -EBADMSG;
	}
	return 0;
nomem:
	*why = "no memory for an inflate state";
	return -ENOMEM;
}

/* Restore checkpoint @cp of @gi into t->inf. Return: 0, -EBADMSG, -ENOMEM. */
static int restore(struct tls *t, const struct gz_index *gi, const struct gz_cp *cp,
		   const char **why)
{
	int rc;

	if (inflateReset(&t->inf) != Z_OK) {
		*why = "no memory for an inflate state";
		return -ENOMEM;
	}
	if (cp->kind == CP_MEMBER)
		return 0;
	rc = restore_window(t, gi, cp, why);
	if (rc < 0)
		return rc;
	if ((cp->bits && inflatePrime(&t->inf, cp->bits, cp->val) != Z_OK) ||
	    inflateSetDictionary(&t->inf, t->win, cp->wraw) != Z_OK) {
		*why = "gzip checkpoint cannot be restored";
		return -EBADMSG;
	}
	return 0;
}

/* Where decoding a span stands between inflate calls. */
struct dstate {
	const uint8_t *src;
	size_t clen, ipos; /* input consumed */
	bool in_header;	   /* at a member header (after a trailer, or a CP_MEMBER start) */
	bool at_block;	   /* the last inflate stopped at a non-final block boundary */
};

/*
 * One step: a header, a trailer or an inflate call with @room bytes of
 * output at @dst. Return: bytes written (>= 0), or -EBADMSG/-ENOMEM;
 * *@progress false when nothing moved.
 */
static ssize_t step(struct tls *t, struct dstate *d, uint8_t *dst, size_t room, bool *progress,
		    const char **why)
{
	size_t hlen, before;
	int zrc, rc;

	*progress = true;
	d->at_block = false;
	if (d->in_header) {
		rc = parse_header(d->src + d->ipos, d->clen - d->ipos, false, &hlen, why);
		if (rc < 0)
			return rc;
		if (inflateReset(&t->inf) != Z_OK) {
			*why = "no memory for an inflate state";
			return -ENOMEM;
		}
		d->ipos += hlen;
		d->in_header = false;
		return 0;
	}
	t->inf.next_in = (Bytef *)(uintptr_t)(d->src + d->ipos); /* zlib's API is not const */
	t->inf.avail_in = (uInt)(d->clen - d->ipos);
	t->inf.next_out = dst;
	t->inf.avail_out = (uInt)room;
	before = d->clen - d->ipos;
	zrc = inflate(&t->inf, Z_BLOCK);
	d->ipos += before - t->inf.avail_in;
	if (zrc == Z_STREAM_END) {
		if (d->clen - d->ipos < GZ_TRAILER_LEN) {
			*why = "gzip span ends inside a trailer";
			return -EBADMSG;
		}
		d->ipos += GZ_TRAILER_LEN;
		d->in_header = true;
	} else if (zrc == Z_MEM_ERROR) {
		*why = "no memory for an inflate state";
		return -ENOMEM;
	} else if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
		*why = "corrupt deflate data";
		return -EBADMSG;
	} else {
		d->at_block = (t->inf.data_type & 128) && !(t->inf.data_type & 64);
		*progress = before != t->inf.avail_in || room != t->inf.avail_out;
	}
	return (ssize_t)(room - t->inf.avail_out);
}

#if HAVE_LIBDEFLATE
/*
 * libdeflate inflates about twice as fast as zlib, but only a whole
 * stream: no dictionary, no start at a bit offset, no stop between
 * blocks. So a span that starts and ends at block boundaries inside one
 * member is made into a stream of its own, in t->lin:
 *
 *   a fixed-Huffman block (not final) whose literals are G filler bytes
 *     and then the checkpoint's window,
 *   the span's input as it is in the file, starting with the checkpoint's
 *     bits in the byte before it,
 *   an empty final stored block where the next checkpoint's block starts,
 *
 * and inflated into t->lout; the span is what follows the window. The
 * input is copied, not shifted: a stored block inside the span (pigz's
 * flushes, incompressible data) pads to a byte boundary, which must stay
 * where the file has it. So the first block must end at the bit where the
 * span starts within its byte, and G (0 to 7 literals of 9 bits) makes it
 * so. The filler is history older than the window: a reference into it
 * is beyond the window, which only damaged data makes, and only when the
 * window is shorter than 32 KiB (near a member's start) could it reach
 * the filler, so such spans are left to zlib when G > 0.
 *
 * The extent proves itself as zlib's does: the stream must end exactly at
 * the appended block, with exactly G + wraw + usize bytes out (a member
 * that ends inside the span ends the stream early; spans that cross a
 * member are left to zlib anyway). Buffers above LIB_KEEP are freed after
 * use, so a rare big span does not pin its memory to the thread.
 */
#define LIB_KEEP (4u << 20)
#define FILLER	 0xff /* a 9-bit literal */

static atomic_uint_fast64_t lib_spans;

static int grow_buf(uint8_t **p, size_t *cap, size_t need)
{
	uint8_t *n;

	if (need <= *cap)
		return 0;
	n = realloc(*p, need);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = need;
	return 0;
}

static void shrink_bufs(struct tls *t)
{
	if (t->lin_cap > LIB_KEEP) {
		free(t->lin);
		t->lin = NULL;
		t->lin_cap = 0;
	}
	if (t->lout_cap > LIB_KEEP) {
		free(t->lout);
		t->lout = NULL;
		t->lout_cap = 0;
	}
}

/* RFC 1951 3.2.6: literal @c's fixed code, bit-reversed for LSB-first packing; its length. */
static unsigned int fixed_lit(unsigned int c, unsigned int *len)
{
	unsigned int code = c < 144 ? 0x30 + c : 0x190 + (c - 144), r = 0;

	*len = c < 144 ? 8 : 9;
	for (unsigned int i = 0; i < *len; i++)
		r |= ((code >> i) & 1u) << (*len - 1 - i);
	return r;
}

/* LSB-first bit writer into a buffer with room. */
struct bits {
	uint8_t *q;
	uint64_t acc;
	unsigned int n; /* bits in acc, < 8 between calls */
};

static void put_bits(struct bits *w, uint64_t v, unsigned int n)
{
	w->acc |= v << w->n;
	w->n += n;
	while (w->n >= 8) {
		*w->q++ = (uint8_t)w->acc;
		w->acc >>= 8;
		w->n -= 8;
	}
}

/* Span @k as one stream for libdeflate; 1 when it is not such a span (use zlib). */
static int lib_span(struct tls *t, const struct gz_index *gi, const struct gz_cp *cp,
		    const struct gz_cp *next, const struct bfs_blk *b, const uint8_t *src,
		    uint8_t *dst, const char **why)
{
	unsigned int g, high = 0, want = (8u - cp->bits) & 7u;
	struct bits w = { 0 };
	size_t ilen, olen, got_in, got_out;
	uint64_t nbits;
	enum libdeflate_result r;
	uint8_t *q;
	int rc;

	if (b->clen == 0 || !t->ld)
		return 1;
	rc = restore_window(t, gi, cp, why);
	if (rc < 0)
		return rc;
	/* the first block's bits: 3 + 9 g + 8 wraw + (literals of 9 bits) + 7 */
	for (size_t i = 0; i < cp->wraw; i++)
		high += t->win[i] >= 144;
	g = (want + 16u - ((3u + high + 7u) & 7u)) & 7u;
	if (g && cp->wraw < WINDOW_MAX)
		return 1;
	olen = g + (size_t)cp->wraw + b->usize;
	/* at most 9 bits a literal, the span and its byte before, the final block */
	ilen = 1 + (9 * (g + (size_t)cp->wraw) + 10) / 8 + 1 + b->clen + 6;
	if (grow_buf(&t->lin, &t->lin_cap, ilen) < 0 ||
	    grow_buf(&t->lout, &t->lout_cap, olen) < 0) {
		shrink_bufs(t);
		*why = "no memory for a gzip span";
		return -ENOMEM;
	}
	w.q = t->lin;
	put_bits(&w, 2, 3); /* BFINAL 0, BTYPE 01 (fixed) */
	for (unsigned int i = 0; i < g; i++)
		put_bits(&w, t->code[FILLER], t->clen[FILLER]);
	for (size_t i = 0; i < cp->wraw; i++)
		put_bits(&w, t->code[t->win[i]], t->clen[t->win[i]]);
	put_bits(&w, 0, 7); /* end of block: code 256, seven 0 bits */
	if (w.n != want) {
		*why = "gzip span: filler miscounted"; /* cannot happen: the sum above */
		return -EINVAL;
	}
	/* the byte before the span: the block's last bits, then the checkpoint's */
	q = w.q;
	if (cp->bits)
		*q++ = (uint8_t)(w.acc | (uint64_t)cp->val << want);
	memcpy(q, src, b->clen);
	/* cut after the span's last bit, then BFINAL 1, BTYPE 00 and padding */
	nbits = (uint64_t)b->clen * 8 - next->bits;
	q += nbits / 8;
	*q = (uint8_t)((*q & ((1u << (nbits % 8)) - 1)) | (1u << (nbits % 8)));
	if (nbits % 8 > 5) /* the 3 bits spill into the next byte: all zero */
		*++q = 0;
	q++;
	*q++ = 0; /* LEN 0, NLEN 0xffff */
	*q++ = 0;
	*q++ = 0xff;
	*q++ = 0xff;
	ilen = (size_t)(q - t->lin);
	r = libdeflate_deflate_decompress_ex(t->ld, t->lin, ilen, t->lout, olen, &got_in, &got_out);
	if (r != LIBDEFLATE_SUCCESS || got_in != ilen || got_out != olen) {
		shrink_bufs(t);
		return 1; /* zlib decides: it says where and why */
	}
	memcpy(dst, t->lout + g + cp->wraw, b->usize);
	shrink_bufs(t);
	atomic_fetch_add_explicit(&lib_spans, 1, memory_order_relaxed);
	return 0;
}
#endif

uint64_t bfs_codec_gzip_lib_spans(void)
{
#if HAVE_LIBDEFLATE
	return atomic_load_explicit(&lib_spans, memory_order_relaxed);
#else
	return 0;
#endif
}

/*
 * The first @n bytes of span @k: restore its checkpoint and inflate that
 * far. The whole span (@n its usize) must also end exactly where the
 * next checkpoint stands, and with @verify match its CRC32; a prefix
 * cannot be held to either, only to inflating without error (a random
 * reader's first read of a span, read.c; its second decodes it whole).
 */
static int gzip_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		       uint32_t n_want, bool verify, const char **why)
{
	const struct gz_index *gi = idx->priv;
	const struct bfs_blk *b = &idx->blk[k];
	const struct gz_cp *cp, *next;
	struct dstate d = { .src = src, .clen = b->clen };
	struct tls *t = tls_get();
	size_t out = 0;
	bool progress;
	ssize_t n;
	int rc;

	if (!t) {
		*why = "no memory for an inflate state";
		return -ENOMEM;
	}
	if (!gi || k >= gi->n) {
		*why = "gzip span without a checkpoint";
		return -EBADMSG;
	}
	if (n_want > b->usize) {
		*why = "gzip span prefix out of range";
		return -EINVAL;
	}
	cp = &gi->cp[k];
	next = k + 1 < gi->n ? &gi->cp[k + 1] : NULL;
#if HAVE_LIBDEFLATE
	/* a whole span between two block checkpoints: the common case */
	if (n_want == b->usize && cp->kind == CP_BLOCK && next && next->kind == CP_BLOCK &&
	    b->usize > 0) {
		rc = lib_span(t, gi, cp, next, b, src, dst, why);
		if (rc < 0)
			return rc;
		if (rc == 0)
			goto check;
	}
#endif
	rc = restore(t, gi, cp, why);
	if (rc < 0)
		return rc;
	d.in_header = cp->kind == CP_MEMBER;
	while (out < n_want) {
		n = step(t, &d, dst + out, n_want - out, &progress, why);
		if (n < 0)
			return (int)n;
		out += (size_t)n;
		if (out < n_want && (!progress || (d.in_header && d.ipos == d.clen))) {
			*why = "gzip span holds fewer bytes than the index says";
			return -EBADMSG;
		}
	}
	if (n_want < b->usize)
		return 0;
	/*
	 * Prove the extent: go on without room for output until the place the
	 * next checkpoint (or the last span's end) says; a byte more or less
	 * of output would stand elsewhere.
	 */
	if (next || cp->end == END_TRAILER) {
		bool want_block = next && next->kind == CP_BLOCK;

		for (;;) {
			if (want_block && d.at_block)
				break;
			if (!want_block && d.in_header && d.ipos == d.clen)
				break;
			n = step(t, &d, dst + b->usize, 0, &progress, why);
			if (n < 0)
				return (int)n;
			if (!progress || (d.in_header && d.ipos == d.clen && want_block)) {
				*why = "gzip span holds more bytes than the index says";
				return -EBADMSG;
			}
		}
		if (d.ipos != d.clen ||
		    (want_block && ((unsigned int)t->inf.data_type & 7) != next->bits)) {
			*why = "gzip span does not end at the next checkpoint";
			return -EBADMSG;
		}
	}
#if HAVE_LIBDEFLATE
check:
#endif
	if (verify && crc_of(dst, b->usize) != b->aux) {
		*why = "gzip span CRC32 mismatch";
		return -EILSEQ;
	}
	return 0;
}

/* ---- the index cache ---- */

/*
 * Private bytes: a count, then per checkpoint wlen(4) wraw(4) bits val
 * kind end (1 each), then the deflated windows one after another.
 */
#define PRIV_HDR 8
#define PRIV_CP	 12

static int gzip_cache_save(const struct bfs_index *idx, uint8_t **out, size_t *len)
{
	const struct gz_index *gi = idx->priv;
	size_t total;
	uint8_t *p, *q;

	if (!gi)
		return -EINVAL;
	total = PRIV_HDR + gi->n * PRIV_CP + gi->blob_len;
	p = calloc(1, total);
	if (!p)
		return -ENOMEM;
	bfs_put_le32(p, (uint32_t)gi->n);
	q = p + PRIV_HDR;
	for (size_t i = 0; i < gi->n; i++, q += PRIV_CP) {
		const struct gz_cp *cp = &gi->cp[i];

		bfs_put_le32(q, cp->wlen);
		bfs_put_le32(q + 4, cp->wraw);
		q[8] = cp->bits;
		q[9] = cp->val;
		q[10] = cp->kind;
		q[11] = cp->end;
	}
	if (gi->blob_len) /* no window at all: blob may be NULL */
		memcpy(q, gi->blob, gi->blob_len);
	*out = p;
	*len = total;
	return 0;
}

static bool gzip_check_entry(const struct bfs_blk *b)
{
	/* a span may take over empty members up to the limit (walk_file()) */
	return b->flags == 0 && b->usize <= SPAN_USIZE_MAX && b->clen <= 2 * SPAN_CLEN_MAX + 16;
}

/*
 * Checkpoints must be what a walk writes: the first at the file's first
 * member, windows only inside deflate streams, bits and their value in
 * range, windows tiling the blob. What they say is then proven span by
 * span as decode meets it (see the top of this file), and each span's
 * bytes checked by its CRC32; sizes are not re-measured, because that
 * would cost the walk the entry saves.
 */
static int gzip_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	struct gz_index *gi;
	const uint8_t *q;
	uint64_t woff = 0;
	size_t n;

	/* made with another -o gzip_span: walk again, so that the option takes effect */
	if (len < PRIV_HDR || bfs_le32(priv + 4) != 0 ||
	    idx->block_size != bfs_codec_config(idx)->gzip_span)
		return 1;
	n = bfs_le32(priv);
	if (n != idx->n || (len - PRIV_HDR) / PRIV_CP < n || idx->blk[0].coff != 0)
		return 1;
	gi = calloc(1, sizeof(*gi));
	if (!gi)
		return -ENOMEM;
	gi->cp = calloc(n, sizeof(*gi->cp));
	if (!gi->cp)
		goto nomem;
	q = priv + PRIV_HDR;
	for (size_t i = 0; i < n; i++, q += PRIV_CP) {
		struct gz_cp *cp = &gi->cp[i];

		*cp = (struct gz_cp){ .wlen = bfs_le32(q),
				      .wraw = bfs_le32(q + 4),
				      .bits = q[8],
				      .val = q[9],
				      .kind = q[10],
				      .end = q[11],
				      .woff = woff };
		if (cp->bits > 7 || cp->val >= 1u << cp->bits || cp->end != END_TRAILER)
			goto bad;
		if (cp->kind == CP_MEMBER) {
			if (cp->bits || cp->wlen || cp->wraw)
				goto bad;
		} else if (cp->kind != CP_BLOCK || i == 0 || cp->wlen == 0 || cp->wraw == 0 ||
			   cp->wraw > WINDOW_MAX || cp->wlen > len) {
			goto bad;
		}
		woff += cp->wlen;
	}
	if (woff != len - PRIV_HDR - n * PRIV_CP)
		goto bad;
	gi->blob_len = (size_t)woff;
	gi->blob = malloc(woff ? (size_t)woff : 1);
	if (!gi->blob)
		goto nomem;
	memcpy(gi->blob, q, (size_t)woff);
	gi->n = n;
	idx->priv = gi;
	idx->priv_free = gz_index_free;
	idx->priv_bytes = sizeof(*gi) + n * sizeof(*gi->cp) + gi->blob_len;
	return 0;

bad:
	gz_index_free(gi);
	return 1;
nomem:
	gz_index_free(gi);
	return -ENOMEM;
}

static const struct bfs_suffix gzip_suffixes[] = { { ".gz", "" },
						   { ".tgz", ".tar" },
						   { NULL, NULL } };

const struct bfs_codec bfs_codec_gzip = {
	.name = "gzip",
	.suffixes = gzip_suffixes,
	.probe = gzip_probe,
	.scan = gzip_scan,
	.decode = gzip_decode,
	.prefix = true,
	.check_entry = gzip_check_entry,
	.cache_save = gzip_cache_save,
	.cache_load = gzip_cache_load,
};

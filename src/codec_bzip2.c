// SPDX-License-Identifier: MIT
/*
 * bzip2 (the format of bzip2 1.0.x and libbz2, which every writer we meet
 * shares: bzip2, pbzip2, lbzip2, Python's bz2): probe, a walk that finds
 * and checks every block, and the decoding of one block with libbz2.
 * Knows bytes only: no paths, no cache, no locks.
 *
 *   file    := stream+                   (zero bytes may pad the end)
 *   stream  := "BZh" level | block* | eos | pad
 *   level   := '1'..'9'                  blocks hold up to level x 100000 bytes
 *   block   := magic 0x314159265359 (48 bits) | block CRC (32) | randomised (1) |
 *              origPtr (24) | symbol map, Huffman tables, symbols (Huffman-coded)
 *   eos     := magic 0x177245385090 (48 bits) | combined CRC (32)
 *   pad     := 0..7 zero bits to the next byte
 *
 * Bits are packed most significant first and nothing after the stream
 * header is byte-aligned: a block starts at any bit, right where the one
 * before it ends, and only the end of the stream is padded. pbzip2 writes
 * one stream per block, lbzip2 and bzip2 one stream per file; cat joins
 * streams. The combined CRC of a stream is, over its blocks in order,
 * crc = (crc <<< 1) ^ block CRC, from 0.
 *
 * Blocks are independent (each starts from an empty state), but where one
 * ends is known only by decoding it: the magic can also occur inside the
 * coded data of a block. So the walk decodes every block once (libbz2, a
 * sink for the output), which proves where it ends and gives its exact
 * size: it looks for the next magic (either one) after the block's start,
 * and decodes the bits in between as a stream of their own. That succeeds
 * only when the block ends exactly there with its CRC right; a candidate
 * magic inside the data makes the decoder read on past it, which tells it
 * from damage, and the next candidate is tried (up to MAX_TRIES). So that
 * the walk does not take as long as bzip2 -dc, it looks ahead: it finds
 * the candidate magics of the next blocks and decodes the spans between
 * them at once on several threads (try_ahead()); a span that decodes
 * whole with its CRC right is the block the one-by-one walk would find,
 * and where one does not, that walk takes over. The index cache keeps
 * the result. What the walk decodes is not thrown away when the file is
 * big enough (BFS_KEPT_MIN): a block that decoded whole, its CRC right,
 * is written to the spill as a piece (index.h, kept) by the thread that
 * decoded it, and the walk records where once it takes the block, so
 * reads are served from there instead of decoding every block again.
 *
 * A block is one index entry: coff is the byte holding its first bit,
 * clen reaches to the byte holding the first bit of what follows it (the
 * next block or the end-of-stream marker), so entries never share a byte;
 * aux keeps the bit offset of its start in the first byte, its stream's
 * level, and the 0..7 bits of its end that lie in the byte after clen:
 *
 *   aux bits 0-2  bits of byte coff before the block
 *            3-6  level of its stream
 *            7-9  bits of the block in byte coff + clen (its tail)
 *            10-16 those bits, right-aligned
 *
 * libbz2 decodes streams only, from a byte boundary, so decode() makes
 * the block a stream of its own: "BZh" level, the block's bits shifted to
 * the byte boundary, and an end-of-stream marker whose combined CRC is
 * the block's own CRC (that of a stream of one block). libbz2 checks the
 * block CRC, and that combined CRC, whatever -o verify says: it has no
 * way to skip them, and they cost little beside the decoding.
 *
 * Damage ends the file where it starts: a block that does not decode has
 * an unknown size, and that size places every block after it, so nothing
 * after it can be served at a known offset. A stream whose combined CRC is
 * wrong keeps its blocks (each proved by its own CRC) and ends the file
 * after them. Bytes after the last stream that are not a stream, and not
 * all zero, are damage too (bzip2 -d warns of them).
 */
#include "config.h"

#include <bzlib.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"

#define HDR_LEN	    4 /* "BZh" level */
#define MAGIC_BITS  48
#define CRC_BITS    32
#define MAGIC_MASK  ((UINT64_C(1) << MAGIC_BITS) - 1)
#define MAGIC_BLOCK UINT64_C(0x314159265359)
#define MAGIC_EOS   UINT64_C(0x177245385090)
#define EOS_BITS    (MAGIC_BITS + CRC_BITS)

/* A block holds its magic, CRC, randomised bit and origPtr at least. */
#define MIN_BLOCK_BITS (MAGIC_BITS + CRC_BITS + 1 + 24)

/*
 * A block of a stream of level L holds up to L x 100000 symbols, whose
 * Huffman codes are at most 20 bits long (what libbz2 reads); its symbol
 * map, selectors and code tables take well under TABLES_MAX as writers
 * make them. A longer block (only a forged one) counts as damage.
 */
#define LEVEL_UNIT    100000u
#define MAX_CODE_BITS 20u
#define TABLES_MAX    (64u << 10)
/* The bytes a run of five encodes at most (4 equal and a count of 255): 259 of 5. */
#define EXPANSION_MAX 52u

/* Bytes read per pread by the walk. */
#define CHUNK	    (256u << 10)
/* Zeros kept after the window's bytes, so that 8-byte loads never leave it. */
#define GUARD	    8
/* Output decoded per call while walking, then dropped (or kept: KEEP_MAX). */
#define SINK	    (1u << 20)
/*
 * The walk's output goes to the spill (index.h, kept) when the file is at
 * least BFS_KEPT_MIN bytes, one piece per block of at most KEEP_MAX bytes
 * (a bigger one, which only long runs of one byte make, is decoded again
 * when read).
 */
#define KEEP_MAX    (8u << 20)
/* Candidate ends tried for one block before it is called damaged. */
#define MAX_TRIES   8
/*
 * The walk finds the candidate starts of up to BATCH blocks (BATCH_BYTES
 * of input) ahead and decodes them at once on up to THREADS threads: a
 * block's candidate end is the next candidate's start.
 */
#define BATCH	    64
#define BATCH_BYTES (16u << 20)
#define THREADS	    4

#define AUX_SBIT(a)  ((a)&7u)
#define AUX_LEVEL(a) (((a) >> 3) & 15u)
#define AUX_TBITS(a) (((a) >> 7) & 7u)
#define AUX_TAIL(a)  (((a) >> 10) & 0x7fu)
#define AUX_USED     17

static uint32_t make_aux(unsigned int sbit, unsigned int level, unsigned int tbits,
			 unsigned int tail)
{
	return sbit | level << 3 | tbits << 7 | tail << 10;
}

/* Largest compressed block a stream of @level can hold, in bytes. */
static uint64_t clen_max(unsigned int level)
{
	return (uint64_t)level * LEVEL_UNIT * MAX_CODE_BITS / 8 + TABLES_MAX;
}

/* Largest output of one block of @level. */
static uint64_t usize_max(unsigned int level)
{
	return (uint64_t)level * LEVEL_UNIT * EXPANSION_MAX;
}

static bool header_ok(const uint8_t *p)
{
	return p[0] == 'B' && p[1] == 'Z' && p[2] == 'h' && p[3] >= '1' && p[3] <= '9';
}

static uint64_t be48(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 6; i++)
		v = v << 8 | p[i];
	return v;
}

/* A stream header followed by a block or the end-of-stream marker, byte-aligned. */
static bool bz2_probe(const uint8_t *head, size_t len)
{
	uint64_t m;

	if (len < HDR_LEN + MAGIC_BITS / 8 || !header_ok(head))
		return false;
	m = be48(head + HDR_LEN);
	return m == MAGIC_BLOCK || m == MAGIC_EOS;
}

/* ---- bits ---- */

/* @n <= 32 bits of @src from bit @bit, reading only the bytes that hold them. */
static uint32_t get_bits(const uint8_t *src, uint64_t bit, unsigned int n)
{
	uint32_t v = 0;

	for (unsigned int i = 0; i < n; i++, bit++)
		v = v << 1 | ((src[bit / 8] >> (7 - bit % 8)) & 1u);
	return v;
}

/* A most-significant-first bit writer into a buffer with room. */
struct bw {
	uint8_t *q;
	uint64_t acc;
	unsigned int n; /* bits in acc, < 8 between calls */
};

static void put_bits(struct bw *w, uint32_t v, unsigned int n)
{
	w->acc = w->acc << n | (v & (n < 32 ? (1u << n) - 1 : UINT32_MAX));
	w->n += n;
	while (w->n >= 8) {
		w->n -= 8;
		*w->q++ = (uint8_t)(w->acc >> w->n);
	}
	w->acc &= (UINT64_C(1) << w->n) - 1;
}

/* Bytes of a one-block stream whose block has @bits bits. */
static size_t stream_len(uint64_t bits)
{
	return HDR_LEN + (size_t)((bits + EOS_BITS + 7) / 8);
}

/*
 * Write into @out (stream_len(@nbits + @tbits) bytes) a stream of one
 * block: the header for @level, @nbits bits of @src from bit @sbit (the
 * block from its magic on), @tbits bits of @tail (the rest of it), and
 * the end-of-stream marker with the block's CRC as the combined CRC.
 * @nbits >= EOS_BITS (its magic and CRC). Return: the bit where the marker starts.
 */
static uint64_t build(uint8_t *out, unsigned int level, const uint8_t *src, unsigned int sbit,
		      uint64_t nbits, uint32_t tail, unsigned int tbits)
{
	struct bw w = { .q = out + HDR_LEN };
	uint32_t crc = get_bits(src, sbit + MAGIC_BITS, CRC_BITS);
	uint64_t whole = nbits / 8;

	memcpy(out, "BZh", 3);
	out[3] = (uint8_t)('0' + level);
	if (sbit == 0) {
		memcpy(w.q, src, (size_t)whole);
	} else {
		/* the last byte read is the one holding bit sbit + 8 whole - 1: inside */
		for (uint64_t j = 0; j < whole; j++)
			w.q[j] = (uint8_t)(src[j] << sbit | src[j + 1] >> (8 - sbit));
	}
	w.q += whole;
	put_bits(&w, get_bits(src, sbit + whole * 8, (unsigned int)(nbits % 8)),
		 (unsigned int)(nbits % 8));
	put_bits(&w, tail, tbits);
	put_bits(&w, (uint32_t)(MAGIC_EOS >> 16), 32);
	put_bits(&w, (uint32_t)(MAGIC_EOS & 0xffff), 16);
	put_bits(&w, crc, CRC_BITS);
	if (w.n)
		put_bits(&w, 0, 8 - w.n);
	return HDR_LEN * 8 + nbits + tbits;
}

/* ---- decoding a one-block stream ---- */

struct run {
	uint64_t in;  /* bytes the decoder fetched */
	uint64_t out; /* bytes it produced */
};

/*
 * Where a walk's decode puts its output: a buffer of cap bytes, grown up
 * to KEEP_MAX while whole (it holds all of the output so far, to be kept),
 * else reused from its start for each SINK of output (counted, dropped).
 */
struct sink {
	uint8_t *p;
	size_t cap;
	bool whole;
};

/* Room for more output in @k after @out bytes: grown while whole, else from its start. */
static void sink_more(struct sink *k, uint64_t out, bz_stream *s)
{
	if (k->whole && out == k->cap && k->cap < KEEP_MAX) {
		size_t ncap = k->cap * 2 < KEEP_MAX ? k->cap * 2 : KEEP_MAX;
		uint8_t *np = realloc(k->p, ncap);

		if (np) {
			k->p = np;
			k->cap = ncap;
			s->next_out = (char *)np + out;
			s->avail_out = (unsigned int)(ncap - out);
			return;
		}
	}
	k->whole = false;
	s->next_out = (char *)k->p;
	s->avail_out = (unsigned int)k->cap;
}

static uint64_t total(unsigned int hi, unsigned int lo)
{
	return (uint64_t)hi << 32 | lo;
}

/*
 * Decode the stream of @len bytes at @in. With @dst: exactly @cap bytes
 * into it (with @prefix, the first @cap bytes, and stop there). Without:
 * into @sink (sink_more()), the output staying under @cap.
 * Return: 0; -EBADMSG or -ENOMEM with *@why; *@r either way.
 */
static int run(const uint8_t *in, size_t len, uint8_t *dst, uint64_t cap, bool prefix,
	       struct sink *sink, struct run *r, const char **why)
{
	bz_stream s;
	uint8_t extra;
	int rc = 0, br;

	memset(&s, 0, sizeof(s));
	*r = (struct run){ 0 };
	if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK) {
		*why = "no memory for a bzip2 decoder";
		return -ENOMEM;
	}
	s.next_in = (char *)(uintptr_t)in; /* libbz2's API is not const */
	s.avail_in = (unsigned int)len;
	s.next_out = (char *)(dst ? dst : sink->p);
	s.avail_out = dst ? (unsigned int)cap : (unsigned int)sink->cap;
	for (;;) {
		unsigned int ain = s.avail_in, aout = s.avail_out;

		br = BZ2_bzDecompress(&s);
		r->in = total(s.total_in_hi32, s.total_in_lo32);
		r->out = total(s.total_out_hi32, s.total_out_lo32);
		if (br == BZ_STREAM_END)
			break;
		if (br == BZ_MEM_ERROR) {
			*why = "no memory for a bzip2 decoder";
			rc = -ENOMEM;
			goto out;
		}
		if (br != BZ_OK) {
			*why = "corrupt bzip2 block (data or CRC)";
			goto bad;
		}
		if (s.avail_out == 0) {
			if (dst && prefix)
				goto out;
			/* libbz2 says BZ_STREAM_END only once asked for more */
			if (r->out > cap || (dst && s.next_out != (char *)dst + cap)) {
				*why = "bzip2 block longer than the index says";
				goto bad;
			}
			if (dst) {
				s.next_out = (char *)&extra;
				s.avail_out = 1;
			} else {
				sink_more(sink, r->out, &s);
			}
			continue;
		}
		if (s.avail_in == 0) {
			*why = "bzip2 block ends early";
			goto bad;
		}
		if (ain == s.avail_in && aout == s.avail_out) {
			*why = "bzip2 decoder makes no progress";
			goto bad;
		}
	}
	if (r->out > cap || (dst && r->out != cap)) {
		*why = r->out > cap ? "bzip2 block longer than the index says" :
				      "bzip2 block shorter than the index says";
		goto bad;
	}
	if (s.avail_in != 0) {
		*why = "bzip2 block ends before its end";
		goto bad;
	}
	goto out;
bad:
	rc = -EBADMSG;
out:
	BZ2_bzDecompressEnd(&s);
	return rc;
}

/* ---- scan: the walk ---- */

struct walk {
	struct bfs_io *io;
	struct bfs_index *idx;
	uint8_t *buf; /* file bytes [off, off + len), then GUARD zeros */
	uint64_t off;
	size_t len, cap;
	uint64_t keep;	/* the window never drops bytes from here on */
	uint8_t *synth; /* one block as a stream of its own */
	size_t synth_cap;
	struct sink sink;
	bool spill;	     /* blocks' output goes to the spill (index.h, kept) */
	bool second[256];    /* can this byte follow the first of a magic? */
	struct trial *ahead; /* BATCH blocks tried ahead (try_ahead()) */
	size_t nahead, next; /* tried, and the next one to take */
};

/* A block tried ahead: its candidate bits [p, q) and what decoding them said. */
struct trial {
	uint64_t p, q;
	uint64_t usize;
	uint64_t kept; /* where its output went in the spill, or BFS_KEPT_NONE */
	int rc;	       /* try_block()'s */
	bool past;
	const char *why;
};

/* For every shift, the second byte under a magic starting in the first. */
static void init_filter(struct walk *w)
{
	for (unsigned int s = 0; s < 8; s++) {
		w->second[(MAGIC_BLOCK >> (32 + s)) & 0xff] = true;
		w->second[(MAGIC_EOS >> (32 + s)) & 0xff] = true;
	}
}

/*
 * Make the window hold the file's bytes [w->keep, @end) (@end clipped to
 * the file's size), reading on in CHUNKs.
 */
static int window(struct walk *w, uint64_t end)
{
	uint64_t size = w->io->size;

	if (end > size)
		end = size;
	if (w->keep >= w->off && end <= w->off + w->len)
		return 0;
	if (w->keep < w->off || w->keep > w->off + w->len) {
		w->off = w->keep;
		w->len = 0;
	} else if (w->keep > w->off) {
		size_t drop = (size_t)(w->keep - w->off);

		memmove(w->buf, w->buf + drop, w->len - drop);
		w->len -= drop;
		w->off = w->keep;
	}
	while (w->off + w->len < end) {
		uint64_t at = w->off + w->len;
		size_t want = size - at < CHUNK ? (size_t)(size - at) : CHUNK;
		int rc;

		if (w->len + want + GUARD > w->cap) {
			size_t ncap = w->len + want + CHUNK + GUARD;
			uint8_t *nb = realloc(w->buf, ncap);

			if (!nb)
				return -ENOMEM;
			w->buf = nb;
			w->cap = ncap;
		}
		rc = bfs_io_read(w->io, w->buf + w->len, want, at);
		if (rc < 0)
			return rc;
		w->len += want;
	}
	memset(w->buf + w->len, 0, GUARD);
	return 0;
}

/* The 48 bits at file bit @bit, which the window holds (zeros past the file). */
static uint64_t peek48(const struct walk *w, uint64_t bit)
{
	const uint8_t *p = w->buf + (bit / 8 - w->off);
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (v >> (16 - bit % 8)) & MAGIC_MASK;
}

/*
 * The first bit in [@from, @limit] where either magic starts and ends
 * inside the file. Return: 0 with *@at; 1 when there is none; -errno.
 */
static int find_magic(struct walk *w, uint64_t from, uint64_t limit, uint64_t *at)
{
	uint64_t size_bits = w->io->size * 8;

	if (size_bits < MAGIC_BITS)
		return 1;
	if (limit > size_bits - MAGIC_BITS)
		limit = size_bits - MAGIC_BITS;
	for (uint64_t byte = from / 8; byte * 8 <= limit;) {
		uint64_t stop;
		int rc = window(w, byte + CHUNK);

		if (rc < 0)
			return rc;
		/* bytes whose 8-byte load holds file bytes only (or zeros past its end) */
		stop = w->off + w->len;
		if (stop < w->io->size)
			stop = stop - 7 > byte ? stop - 7 : byte + 1;
		if (stop > limit / 8 + 1)
			stop = limit / 8 + 1;
		for (; byte < stop; byte++) {
			const uint8_t *p = w->buf + (byte - w->off);
			uint64_t v = 0;

			if (!w->second[p[1]])
				continue;
			for (int i = 0; i < 8; i++)
				v = v << 8 | p[i];
			for (unsigned int s = 0; s < 8; s++) {
				uint64_t c = byte * 8 + s, m = (v >> (16 - s)) & MAGIC_MASK;

				if (c >= from && c <= limit &&
				    (m == MAGIC_BLOCK || m == MAGIC_EOS)) {
					*at = c;
					return 0;
				}
			}
		}
	}
	return 1;
}

/*
 * Decode file bits [@p, @q) as a block of a stream of @level, the window
 * holding them. Return: 0 with *@usize, and *@kept where its output went
 * in the spill (BFS_KEPT_NONE: nowhere); 1 with *@why when it is not a
 * block that ends at @q, *@past telling whether the decoder read beyond
 * @q (so the block may end later); -ENOMEM.
 */
static int try_with(const struct walk *w, uint8_t **synth, size_t *synth_cap, struct sink *sink,
		    uint64_t p, uint64_t q, unsigned int level, uint64_t *usize, uint64_t *kept,
		    bool *past, const char **why)
{
	size_t len = stream_len(q - p);
	uint64_t cut;
	struct run r;
	int rc;

	if (len > *synth_cap) {
		uint8_t *ns = realloc(*synth, len);

		if (!ns)
			return -ENOMEM;
		*synth = ns;
		*synth_cap = len;
	}
	cut = build(*synth, level, w->buf + (p / 8 - w->off), (unsigned int)(p % 8), q - p, 0, 0);
	sink->whole = w->spill;
	*kept = BFS_KEPT_NONE;
	rc = run(*synth, len, NULL, usize_max(level), false, sink, &r, why);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && r.out > 0 && r.out <= UINT32_MAX) {
		/* decoded whole, its CRC right: proven, for the spill to keep */
		if (sink->whole && bfs_index_keep_bytes(w->idx, sink->p, (size_t)r.out, kept) < 0)
			*kept = BFS_KEPT_NONE;
		*usize = r.out;
		return 0;
	}
	if (rc == 0)
		*why = "bzip2 block of no bytes";
	*past = r.in * 8 > cut;
	return 1;
}

static int try_block(struct walk *w, uint64_t p, uint64_t q, unsigned int level, uint64_t *usize,
		     uint64_t *kept, bool *past, const char **why)
{
	return try_with(w, &w->synth, &w->synth_cap, &w->sink, p, q, level, usize, kept, past, why);
}

/* The blocks of a batch, tried by several threads; the window is read only meanwhile. */
struct batch {
	const struct walk *w;
	unsigned int level;
	atomic_size_t next;
};

static void *try_some(void *arg)
{
	struct batch *b = arg;
	const struct walk *w = b->w;
	uint8_t *synth = NULL;
	struct sink sink = { .p = malloc(SINK), .cap = SINK };
	size_t cap = 0, i;

	while ((i = atomic_fetch_add(&b->next, 1)) < w->nahead) {
		struct trial *t = &w->ahead[i];

		t->why = "no memory for a bzip2 decoder";
		t->rc = sink.p ? try_with(w, &synth, &cap, &sink, t->p, t->q, b->level, &t->usize,
					  &t->kept, &t->past, &t->why) :
				 -ENOMEM;
	}
	free(synth);
	free(sink.p);
	return NULL;
}

/*
 * From the block whose magic is at file bit @p: find the candidate
 * starts of the blocks after it (each the first magic past the one
 * before, up to an end of stream, BATCH of them or BATCH_BYTES), and try
 * each span between two as a block, in parallel. A span that decodes
 * whole, its CRC right, is the block the sequential walk would find; one
 * that does not is left to it (walk_block()). Return: 0 or -errno.
 */
static int try_ahead(struct walk *w, uint64_t p, unsigned int level)
{
	struct batch b = { .w = w, .level = level };
	pthread_t th[THREADS - 1];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nth = 0, want;
	int rc;

	w->nahead = w->next = 0;
	if (!w->ahead && !(w->ahead = malloc(BATCH * sizeof(*w->ahead))))
		return -ENOMEM;
	w->keep = p / 8;
	while (w->nahead < BATCH && (p - w->keep * 8) / 8 < BATCH_BYTES) {
		uint64_t q;

		rc = find_magic(w, p + MIN_BLOCK_BITS, p + clen_max(level) * 8, &q);
		if (rc < 0)
			return rc;
		if (rc > 0)
			break;
		w->ahead[w->nahead++] = (struct trial){ .p = p, .q = q, .kept = BFS_KEPT_NONE };
		if (peek48(w, q) == MAGIC_EOS)
			break;
		p = q;
	}
	if (w->nahead == 0)
		return 0;
	rc = window(w, w->ahead[w->nahead - 1].q / 8 + 1);
	if (rc < 0)
		return rc;
	want = cpus > 1 ? (size_t)cpus : 1;
	if (want > THREADS)
		want = THREADS;
	if (want > w->nahead)
		want = w->nahead;
	while (nth + 1 < want && pthread_create(&th[nth], NULL, try_some, &b) == 0)
		nth++;
	try_some(&b);
	while (nth > 0)
		pthread_join(th[--nth], NULL);
	for (size_t i = 0; i < w->nahead; i++)
		if (w->ahead[i].rc == -ENOMEM)
			return -ENOMEM;
	return 0;
}

/* The file is damaged at byte @at: the index ends there. Return: 1. */
static int damage(struct walk *w, uint64_t at, const char *why)
{
	bfs_index_mark_broken(w->idx, at, "bzip2: %s at offset %" PRIu64, why, at);
	return 1;
}

/*
 * The block whose magic is at file bit @p: where it ends (*@q, the next
 * magic) and its size. Return: 0; 1 damage (recorded); -errno.
 */
static int walk_block(struct walk *w, uint64_t p, unsigned int level, uint64_t *q, uint64_t *usize,
		      uint64_t *kept)
{
	uint64_t from = p + MIN_BLOCK_BITS, limit = p + clen_max(level) * 8;
	const char *why = "no end of block";

	w->keep = p / 8;
	for (int tries = 0; tries < MAX_TRIES; tries++) {
		bool past = false;
		int rc = find_magic(w, from, limit, q);

		if (rc < 0)
			return rc;
		if (rc > 0)
			return damage(w, p / 8,
				      tries ? why : "bzip2 block without an end (truncated?)");
		rc = window(w, *q / 8 + 1); /* (the search may have slid it) */
		if (rc < 0)
			return rc;
		rc = try_block(w, p, *q, level, usize, kept, &past, &why);
		if (rc <= 0)
			return rc;
		if (!past)
			return damage(w, p / 8, why);
		from = *q + 1; /* a magic inside the block's data */
	}
	return damage(w, p / 8, "too many block markers inside one bzip2 block");
}

/*
 * The stream whose header is at @start. Return: 0 with *@next, the byte
 * after it; 1 damage (recorded); -errno.
 */
static int walk_stream(struct walk *w, uint64_t start, unsigned int level, uint64_t *next)
{
	uint64_t bit = (start + HDR_LEN) * 8, size_bits = w->io->size * 8;
	uint32_t comb = 0;

	for (;;) {
		uint64_t m, q, usize, kept;
		uint32_t crc, aux;
		int rc;

		w->keep = bit / 8;
		rc = window(w, bit / 8 + MAGIC_BITS / 8 + CRC_BITS / 8 + 1);
		if (rc < 0)
			return rc;
		if (size_bits - bit < EOS_BITS)
			return damage(w, bit / 8, "bzip2 stream cut short");
		m = peek48(w, bit);
		crc = (uint32_t)(peek48(w, bit + MAGIC_BITS) >> 16);
		if (m == MAGIC_EOS) {
			if (crc != comb)
				return damage(w, bit / 8, "bzip2 stream CRC mismatch");
			*next = (bit + EOS_BITS + 7) / 8;
			return 0;
		}
		if (m != MAGIC_BLOCK)
			return damage(w, bit / 8, "no bzip2 block where one must start");
		if (w->next >= w->nahead || w->ahead[w->next].p != bit) {
			rc = try_ahead(w, bit, level);
			if (rc < 0)
				return rc;
		}
		if (w->next < w->nahead && w->ahead[w->next].p == bit &&
		    w->ahead[w->next].rc == 0) {
			q = w->ahead[w->next].q;
			kept = w->ahead[w->next].kept;
			usize = w->ahead[w->next++].usize;
		} else {
			w->nahead = w->next = 0; /* the sequential walk takes over here */
			rc = walk_block(w, bit, level, &q, &usize, &kept);
			if (rc != 0)
				return rc;
		}
		aux = make_aux((unsigned int)(bit % 8), level, (unsigned int)(q % 8),
			       (unsigned int)(peek48(w, q - q % 8) >> (48 - q % 8)));
		rc = bfs_index_add(w->idx, bit / 8, (uint32_t)(q / 8 - bit / 8), (uint32_t)usize,
				   0);
		if (rc < 0)
			return rc;
		w->idx->blk[w->idx->n - 1].aux = aux;
		if (kept != BFS_KEPT_NONE)
			bfs_index_keep(w->idx, w->idx->n - 1, kept);
		comb = (comb << 1 | comb >> 31) ^ crc;
		bit = q;
	}
}

/* Are the bytes from @at to the end of the file all zero? */
static int zeros_to_end(struct walk *w, uint64_t at)
{
	while (at < w->io->size) {
		size_t n;
		int rc;

		w->keep = at;
		rc = window(w, at + CHUNK);
		if (rc < 0)
			return rc;
		n = (size_t)(w->off + w->len - at);
		for (size_t i = 0; i < n; i++)
			if (w->buf[at - w->off + i] != 0)
				return 0;
		at += n;
	}
	return 1;
}

static int walk_file(struct walk *w)
{
	uint64_t off = 0, size = w->io->size;

	for (bool first = true; off < size; first = false) {
		const uint8_t *p;
		int rc;

		w->keep = off;
		rc = window(w, off + CHUNK);
		if (rc < 0)
			return rc;
		p = w->buf + (off - w->off);
		if (size - off < HDR_LEN || !header_ok(p)) {
			if (!first) {
				rc = zeros_to_end(w, off);
				if (rc != 0)
					return rc < 0 ? rc : 0;
			}
			damage(w, off,
			       first ? "not a bzip2 stream" :
				       "bytes after the last bzip2 stream are not a stream");
			return 0;
		}
		if (first)
			w->idx->block_size = (uint32_t)(p[3] - '0') * LEVEL_UNIT;
		rc = walk_stream(w, off, (unsigned int)(p[3] - '0'), &off);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	return 0;
}

static int bz2_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct walk w = { .io = io, .idx = idx };
	int rc = -ENOMEM;

	(void)side; /* bzip2 has no sidecar */
	init_filter(&w);
	w.sink = (struct sink){ .p = malloc(SINK), .cap = SINK };
	w.spill = io->size >= BFS_KEPT_MIN && bfs_index_keep_begin(idx);
	if (w.sink.p)
		rc = walk_file(&w);
	if (idx->block_size == 0)
		idx->block_size = 9 * LEVEL_UNIT;
	/* bfs_measure() seals the spill: the blocks added are proven, damage or not */
	free(w.buf);
	free(w.synth);
	free(w.sink.p);
	free(w.ahead);
	return rc;
}

/* ---- decode ---- */

/* The first @n bytes of the block (all of them when @n is its usize). */
static int decode_n(const struct bfs_blk *blk, const uint8_t *src, uint8_t *dst, uint32_t n,
		    const char **why)
{
	unsigned int sbit = AUX_SBIT(blk->aux), level = AUX_LEVEL(blk->aux);
	unsigned int tbits = AUX_TBITS(blk->aux);
	uint64_t nbits;
	uint8_t *s;
	size_t len;
	struct run r;
	int rc;

	if (level < 1 || level > 9 || (uint64_t)blk->clen * 8 + tbits < sbit + MIN_BLOCK_BITS ||
	    n > blk->usize || blk->clen > clen_max(level)) {
		*why = "bzip2 block entry out of range";
		return -EBADMSG;
	}
	nbits = (uint64_t)blk->clen * 8 - sbit; /* at least the magic and CRC: see above */
	len = stream_len(nbits + tbits);
	s = malloc(len);
	if (!s) {
		*why = "no memory for a bzip2 block";
		return -ENOMEM;
	}
	build(s, level, src, sbit, nbits, AUX_TAIL(blk->aux), tbits);
	rc = run(s, len, dst, n, n < blk->usize, NULL, &r, why);
	free(s);
	return rc;
}

/*
 * libbz2 checks the block CRC whatever @verify says: see the top of this
 * file. A prefix skips the output of the rest of the block, not its decoding:
 * libbz2 reads the whole block before it writes a byte, so the first KiB
 * of a 900 kB block costs about a third of the whole. Nothing checks the
 * prefix but the decoding itself: the block CRC covers the whole output
 * (the walk checked it once, whole).
 */
static int bz2_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		      uint32_t n, bool verify, const char **why)
{
	(void)verify;
	return decode_n(&idx->blk[k], src, dst, n, why);
}

/* ---- the index cache ---- */

/* A block a walk could have recorded. */
static bool bz2_check_entry(const struct bfs_blk *b)
{
	unsigned int level = AUX_LEVEL(b->aux), tbits = AUX_TBITS(b->aux);

	return b->flags == 0 && (b->aux >> AUX_USED) == 0 && level >= 1 && level <= 9 &&
	       AUX_TAIL(b->aux) < (1u << tbits) &&
	       (uint64_t)b->clen * 8 + tbits >= AUX_SBIT(b->aux) + MIN_BLOCK_BITS &&
	       b->clen <= clen_max(level) && b->usize <= usize_max(level);
}

/*
 * Everything is in the entries. Their sizes are what the walk decoded,
 * and decode proves each again (its exact length, its CRC).
 */
static int bz2_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	(void)idx;
	(void)priv;
	return len != 0;
}

static const struct bfs_suffix bz2_suffixes[] = {
	{ ".bz2", "" },
	{ ".tbz2", ".tar" },
	{ ".tbz", ".tar" },
	{ NULL, NULL },
};

const struct bfs_codec bfs_codec_bzip2 = {
	.name = "bzip2",
	.suffixes = bz2_suffixes,
	.probe = bz2_probe,
	.scan = bz2_scan,
	.decode = bz2_decode,
	.prefix = true,
	.check_entry = bz2_check_entry,
	.cache_load = bz2_cache_load,
};

// SPDX-License-Identifier: MIT
/*
 * LZ4 frames with linked blocks (lz4_Frame_format.md, FLG bit 5 clear:
 * lz4 -BD, liblz4's frame API and python-lz4 by default): a block may
 * copy from the 64 KiB of the frame's output before it, so a block
 * decodes only with that much history. codec_lz4.c parses the frame
 * header and calls bfs_lz4_lwalk_frame() for the blocks (the block
 * layout is the same as in independent frames; see there).
 *
 * Random access needs checkpoints, as plain gzip does (codec_gzip.c):
 * the scan decodes every linked frame once and cuts it into spans, runs
 * of whole LZ4 blocks of about SPAN_TARGET bytes of output. Each span is
 * one block of the index (coff its first block's size word, clen up to
 * the end of its last block, usize its output, aux the frame's block max
 * with BFS_LZ4_SPAN_TAG) and has a checkpoint in idx->priv:
 *
 *   dict   the part of the frame's last 64 KiB of output before the span
 *          that the span's blocks copy from: from the first byte they
 *          copy to the span's start, the bytes they do not copy zeroed,
 *          kept LZ4-compressed (raw when that does not shrink it); none
 *          when they copy nothing (a frame's first span). A decoder that
 *          reaches before it fails, as at a frame's start
 *   hash   XXH32 (seed 0) of the span's output, for -o verify
 *
 * A span decodes block by block, each with everything before it as its
 * dictionary (LZ4_decompress_safe_usingDict: the checkpoint and the
 * span's own output, made one contiguous history in a scratch buffer for
 * the blocks in the span's first 64 KiB, the span's output after that).
 * A prefix stops at the block that holds its last byte, decoding only as
 * far as needed. A whole span proves its extent: its blocks fill clen
 * exactly and decode to exactly usize bytes.
 *
 * The scan decodes everything, so what a frame states is checked as
 * lz4 -d checks it: block checksums, the content checksum and the
 * content size. Damage ends the file: at the damaged block, keeping the
 * spans before it, when each block is vouched for by its own checksum or
 * nothing vouches for any; the whole frame is dropped when only the
 * content checksum would have vouched for its blocks (a block that fails
 * shows the data is damaged, and earlier damage may have decoded without
 * error). A file that stops inside a frame serves what its blocks hold.
 *
 * The spacing: a random 4 KiB read that misses the cache decodes from a
 * span's start to the read (half a span on average) after restoring a
 * checkpoint; a read of an independent-block file decodes from its
 * block's start. Spans of 128 KiB keep a cold read under twice the
 * independent one, with checkpoints that hold only the history bytes a
 * span copies; blocks of 256 KiB and more make one span each
 * (doc/decisions/0014-lz4-linked-spans.md).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/xxh32.h"
#include "lz4_linked.h"

/* lz4_Frame_format.md, "Data Blocks" */
#define BLK_HDR_LEN   4
#define BLK_STORED    0x80000000u
#define BLK_SIZE_MASK 0x7FFFFFFFu
#define ENDMARK	      0u
#define BLK_CSUM_LEN  4
#define C_CSUM_LEN    4
#define BMAX_LARGEST  (4u << 20)

/* lz4_Block_format.md: a match offset is 16 bits, so 64 KiB of history is all a block sees. */
#define HIST	 65536u
/* From here on in a span, its own output is a block's whole history. */
#define OWN_HIST 65535u

/* Bytes of output a span is cut after; its input is also cut after CLEN_CUT. */
#define SPAN_TARGET (128u << 10)
#define CLEN_CUT    (16u << 20)

/* Input read per pread during the walk (at least a whole block). */
#define CHUNK	 (1u << 20)
/* Output decoded between moves of the history, beyond a block max. */
#define OUT_ROOM (1u << 20)

/* Scratch a decoding thread keeps between calls; more is freed after use. */
#define SCRATCH_KEEP (1u << 20)

enum cp_kind {
	CP_NONE = 0, /* a frame's first span: no history */
	CP_RAW = 1,  /* dict stored as it is */
	CP_LZ4 = 2,  /* dict LZ4-compressed (one block) */
};

struct cp {
	uint32_t blk;  /* the span's block in the index */
	uint32_t hash; /* XXH32 of its output */
	uint32_t dlen; /* dict bytes, 0..HIST */
	uint32_t zlen; /* bytes kept in the blob */
	uint64_t off;  /* where in the blob */
	uint8_t kind;  /* enum cp_kind */
};

/* The index's private data: a checkpoint per span, in block order. */
struct lk_index {
	size_t n;
	struct cp *cp;
	uint8_t *blob;
	size_t blob_len;
};

static void lk_index_free(void *p)
{
	struct lk_index *li = p;

	if (!li)
		return;
	free(li->cp);
	free(li->blob);
	free(li);
}

static size_t lk_bytes(const struct lk_index *li)
{
	return sizeof(*li) + li->n * sizeof(*li->cp) + li->blob_len;
}

static bool is_span(const struct bfs_blk *b)
{
	return b->aux & BFS_LZ4_SPAN_TAG;
}

/* ---- the walk ---- */

/* Where a span of the frame being walked lies, until the frame is done. */
struct ext {
	uint64_t coff, clen;
	uint32_t usize;
};

struct bfs_lz4_lwalk {
	struct bfs_io *io;
	struct lk_index *li;
	size_t cp_cap, blob_cap;
	struct ext *ext; /* the frame's spans: ext[i] is cp[first + i] */
	size_t ext_cap;
	uint8_t *in; /* in_cap bytes of the file from in_off, in_len valid */
	size_t in_cap, in_len;
	uint64_t in_off;
	uint8_t *out; /* history and output: out_cap bytes */
	size_t out_cap;
	void *lz4_state; /* for compressing checkpoints */
	uint8_t *zbuf;	 /* LZ4_COMPRESSBOUND(HIST) */
	/* the open span's checkpoint until its first 64 KiB of output are decoded */
	bool pending;
	uint32_t plen; /* history bytes at pdict */
	uint8_t pdict[HIST];
	uint8_t mask[HIST]; /* 1: a byte of pdict the span copies */
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

static int lwalk_new(struct bfs_lz4_lwalk **out, struct bfs_io *io)
{
	struct bfs_lz4_lwalk *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->io = io;
	w->li = calloc(1, sizeof(*w->li));
	w->lz4_state = malloc((size_t)LZ4_sizeofState());
	w->zbuf = malloc((size_t)LZ4_COMPRESSBOUND(HIST));
	if (!w->li || !w->lz4_state || !w->zbuf) {
		bfs_lz4_lwalk_end(w, NULL, false);
		return -ENOMEM;
	}
	*out = w;
	return 0;
}

void bfs_lz4_lwalk_end(struct bfs_lz4_lwalk *w, struct bfs_index *idx, bool keep)
{
	if (!w)
		return;
	if (keep && idx && w->li->n > 0) {
		idx->priv = w->li;
		idx->priv_free = lk_index_free;
		idx->priv_bytes = lk_bytes(w->li);
		w->li = NULL;
	}
	lk_index_free(w->li);
	free(w->ext);
	free(w->in);
	free(w->out);
	free(w->lz4_state);
	free(w->zbuf);
	free(w);
}

/* @len bytes of the file at @off in the input buffer (the caller checked the range). */
static int view(struct bfs_lz4_lwalk *w, uint64_t off, size_t len, const uint8_t **p)
{
	uint64_t left = w->io->size - off;
	size_t want;
	int rc;

	if (off < w->in_off || off - w->in_off > w->in_len || len > w->in_len - (off - w->in_off)) {
		want = left < w->in_cap ? (size_t)left : w->in_cap;
		w->in_len = 0;
		w->in_off = off;
		rc = bfs_io_read(w->io, w->in, want, off);
		if (rc < 0)
			return rc;
		w->in_len = want;
	}
	*p = w->in + (off - w->in_off);
	return 0;
}

/*
 * Begin a span at @coff whose history is the @hlen bytes at @hist: its
 * checkpoint is made once the blocks that may copy from it are decoded
 * (end_checkpoint()).
 */
static int open_span(struct bfs_lz4_lwalk *w, uint64_t coff, const uint8_t *hist, uint32_t hlen,
		     size_t first)
{
	struct lk_index *li = w->li;
	int rc;

	rc = grow((void **)&li->cp, &w->cp_cap, li->n + 1, sizeof(*li->cp));
	if (rc == 0)
		rc = grow((void **)&w->ext, &w->ext_cap, li->n - first + 1, sizeof(*w->ext));
	if (rc < 0)
		return rc;
	li->cp[li->n++] = (struct cp){ .kind = CP_NONE };
	w->ext[li->n - 1 - first] = (struct ext){ .coff = coff };
	memcpy(w->pdict, hist, hlen);
	memset(w->mask, 0, hlen);
	w->plen = hlen;
	w->pending = hlen > 0;
	return 0;
}

/*
 * Mark the history bytes the LZ4 block @p (@len bytes, decoded already,
 * so well formed; still parsed with bounds) copies, its output starting
 * @at bytes into the open span. Only matches in the span's first 64 KiB
 * of output reach back that far.
 */
static void mark_refs(struct bfs_lz4_lwalk *w, const uint8_t *p, size_t len, uint64_t at)
{
	const uint8_t *end = p + len;
	int64_t q = (int64_t)at;

	while (p < end && q < (int64_t)OWN_HIST) {
		size_t lit, ml, off;
		unsigned int token = *p++;
		int64_t from, to;
		uint8_t b;

		lit = token >> 4;
		if (lit == 15)
			do {
				if (p == end)
					return;
				b = *p++;
				lit += b;
			} while (b == 255);
		if (lit >= (size_t)(end - p))
			return; /* the last literals */
		p += lit;
		q += (int64_t)lit;
		if (end - p < 2)
			return;
		off = bfs_le16(p);
		p += 2;
		ml = token & 15;
		if (ml == 15)
			do {
				if (p == end)
					return;
				b = *p++;
				ml += b;
			} while (b == 255);
		ml += 4;
		/* the copy reads [q - off, q - off + ml); history is [-plen, 0) */
		from = q - (int64_t)off;
		to = from + (int64_t)ml;
		if (from < -(int64_t)w->plen)
			from = -(int64_t)w->plen;
		if (to > 0)
			to = 0;
		if (from < to)
			memset(w->mask + w->plen + from, 1, (size_t)(to - from));
		q += (int64_t)ml;
	}
}

/*
 * The open span's checkpoint: the history from the first byte its blocks
 * copy on (none when they copy none), the bytes they do not copy zeroed,
 * kept compressed when that is smaller. Return: 0 or -ENOMEM.
 */
static int end_checkpoint(struct bfs_lz4_lwalk *w)
{
	struct lk_index *li = w->li;
	struct cp *cp = &li->cp[li->n - 1];
	const uint8_t *keep;
	uint32_t m = 0;
	int rc, z;

	if (!w->pending)
		return 0;
	w->pending = false;
	while (m < w->plen && !w->mask[m])
		m++;
	if (m == w->plen)
		return 0; /* nothing copied: CP_NONE */
	for (uint32_t i = m; i < w->plen; i++)
		if (!w->mask[i])
			w->pdict[i] = 0;
	cp->dlen = w->plen - m;
	z = LZ4_compress_fast_extState(w->lz4_state, (const char *)w->pdict + m, (char *)w->zbuf,
				       (int)cp->dlen, LZ4_COMPRESSBOUND(HIST), 1);
	if (z > 0 && (uint32_t)z < cp->dlen) {
		cp->kind = CP_LZ4;
		cp->zlen = (uint32_t)z;
		keep = w->zbuf;
	} else {
		cp->kind = CP_RAW;
		cp->zlen = cp->dlen;
		keep = w->pdict + m;
	}
	rc = grow((void **)&li->blob, &w->blob_cap, li->blob_len + cp->zlen, 1);
	if (rc < 0)
		return rc;
	cp->off = li->blob_len;
	memcpy(li->blob + li->blob_len, keep, cp->zlen);
	li->blob_len += cp->zlen;
	return 0;
}

/* Forget the open span (it holds no output), and its checkpoint. */
static void drop_open(struct bfs_lz4_lwalk *w)
{
	struct lk_index *li = w->li;

	li->n--;
	li->blob_len = li->cp[li->n].kind == CP_NONE ? li->blob_len : li->cp[li->n].off;
}

/* Forget the whole frame's spans, from checkpoint @first on. */
static void drop_frame(struct bfs_lz4_lwalk *w, size_t first)
{
	struct lk_index *li = w->li;

	for (size_t i = first; i < li->n; i++) {
		if (li->cp[i].kind != CP_NONE) {
			li->blob_len = li->cp[i].off;
			break;
		}
	}
	li->n = first;
}

/* Add the frame's spans, checkpoints [@first, n), to @idx. */
static int commit(struct bfs_lz4_lwalk *w, struct bfs_index *idx, size_t first,
		  const struct bfs_lz4_lframe *f)
{
	for (size_t i = first; i < w->li->n; i++) {
		const struct ext *e = &w->ext[i - first];
		int rc = bfs_index_add(idx, e->coff, (uint32_t)e->clen, e->usize,
				       f->bcsum ? BFS_BLK_CSUM : 0);

		if (rc < 0)
			return rc;
		idx->blk[idx->n - 1].aux = f->bmax | BFS_LZ4_SPAN_TAG;
		w->li->cp[i].blk = (uint32_t)(idx->n - 1);
	}
	return 0;
}

/* What ends a frame's walk. */
enum stop {
	STOP_END, /* the EndMark (and checks after it) */
	STOP_CUT, /* the file ends inside the frame: keep what decoded */
	STOP_BAD, /* damage at a block */
};

struct fwalk {
	const struct bfs_lz4_lframe *f;
	size_t first; /* the frame's first checkpoint */
	bool open;    /* a span is open: cp[n - 1], ext[n - 1 - first] */
	struct bfs_xxh32 content, span;
	uint64_t total; /* the frame's output so far */
	size_t p;	/* where the next block's output goes in w->out */
	const char *why;
	uint64_t at;
};

static int close_span(struct bfs_lz4_lwalk *w, struct fwalk *fw)
{
	struct ext *e = &w->ext[w->li->n - 1 - fw->first];
	int rc = end_checkpoint(w);

	if (rc < 0)
		return rc;
	if (e->usize == 0)
		drop_open(w);
	else
		w->li->cp[w->li->n - 1].hash = bfs_xxh32_digest(&fw->span);
	fw->open = false;
	return 0;
}

/*
 * Decode the block at @pos (@clen bytes: size word, data, checksum) into
 * the output buffer after the history, within the open span (opened here
 * if none is). Return: 0, 1 (fw->why set: the block is damaged), -errno.
 */
static int one_block(struct bfs_lz4_lwalk *w, struct fwalk *fw, uint64_t pos, uint32_t clen)
{
	const struct bfs_lz4_lframe *f = fw->f;
	uint32_t word, dlen, hlen = fw->total < HIST ? (uint32_t)fw->total : HIST;
	const uint8_t *src;
	struct ext *e;
	uint32_t at;
	int rc, got;

	rc = view(w, pos, clen, &src);
	if (rc < 0)
		return rc;
	word = bfs_le32(src);
	dlen = word & BLK_SIZE_MASK;
	if (f->bcsum &&
	    bfs_xxh32(src + BLK_HDR_LEN, dlen, 0) != bfs_le32(src + BLK_HDR_LEN + dlen)) {
		fw->why = "block checksum mismatch";
		return 1;
	}
	/* keep the history and room for a whole block after it */
	if (fw->p + f->bmax > w->out_cap) {
		memmove(w->out + HIST - hlen, w->out + fw->p - hlen, hlen);
		fw->p = HIST;
	}
	if (!fw->open) {
		bfs_xxh32_init(&fw->span, 0);
		rc = open_span(w, pos, w->out + fw->p - hlen, hlen, fw->first);
		if (rc < 0)
			return rc;
		fw->open = true;
	}
	e = &w->ext[w->li->n - 1 - fw->first];
	at = e->usize;
	if (word & BLK_STORED) {
		memcpy(w->out + fw->p, src + BLK_HDR_LEN, dlen);
		got = (int)dlen;
	} else {
		got = LZ4_decompress_safe_usingDict((const char *)src + BLK_HDR_LEN,
						    (char *)w->out + fw->p, (int)dlen, (int)f->bmax,
						    (const char *)w->out + fw->p - hlen, (int)hlen);
		if (got < 0) {
			fw->why = "lz4 block does not decode";
			return 1;
		}
		if (w->pending)
			mark_refs(w, src + BLK_HDR_LEN, dlen, at);
	}
	if (f->ccsum)
		bfs_xxh32_update(&fw->content, w->out + fw->p, (size_t)got);
	bfs_xxh32_update(&fw->span, w->out + fw->p, (size_t)got);
	fw->p += (size_t)got;
	fw->total += (uint64_t)got;
	e->usize += (uint32_t)got;
	e->clen = pos + clen - e->coff;
	if (e->usize >= OWN_HIST) {
		rc = end_checkpoint(w);
		if (rc < 0)
			return rc;
	}
	if (e->usize >= SPAN_TARGET || e->clen >= CLEN_CUT)
		return close_span(w, fw);
	return 0;
}

/* The blocks of the frame: Return: enum stop (fw->why, fw->at), or -errno. */
static int walk_blocks(struct bfs_lz4_lwalk *w, struct fwalk *fw, uint64_t *end)
{
	const struct bfs_lz4_lframe *f = fw->f;
	uint64_t size = w->io->size, pos = f->data;
	uint32_t csum = f->bcsum ? BLK_CSUM_LEN : 0;
	int rc;

	for (;;) {
		const uint8_t *h;
		uint32_t word, dlen;

		fw->at = pos;
		if (!bfs_range_ok(pos, BLK_HDR_LEN, size)) {
			fw->why = "block header past end of file";
			return STOP_CUT;
		}
		rc = view(w, pos, BLK_HDR_LEN, &h);
		if (rc < 0)
			return rc;
		word = bfs_le32(h);
		if (word == ENDMARK)
			break;
		dlen = word & BLK_SIZE_MASK;
		if (dlen == 0) {
			fw->why = "empty stored block";
			return STOP_BAD;
		}
		if (dlen > f->bmax) {
			fw->why = "block size above the frame's block max";
			return STOP_BAD;
		}
		if (!bfs_range_ok(pos, BLK_HDR_LEN + dlen + csum, size)) {
			fw->why = "block runs past end of file";
			return STOP_CUT;
		}
		rc = one_block(w, fw, pos, BLK_HDR_LEN + dlen + csum);
		if (rc < 0)
			return rc;
		if (rc > 0)
			return STOP_BAD;
		pos += BLK_HDR_LEN + dlen + csum;
	}
	pos += BLK_HDR_LEN;
	fw->at = pos;
	if (f->ccsum) {
		const uint8_t *c;

		if (!bfs_range_ok(pos, C_CSUM_LEN, size)) {
			fw->why = "content checksum past end of file";
			return STOP_CUT;
		}
		rc = view(w, pos, C_CSUM_LEN, &c);
		if (rc < 0)
			return rc;
		if (bfs_le32(c) != bfs_xxh32_digest(&fw->content)) {
			fw->why = "content checksum mismatch";
			return STOP_BAD;
		}
		pos += C_CSUM_LEN;
		fw->at = pos;
	}
	*end = pos;
	return STOP_END;
}

int bfs_lz4_lwalk_frame(struct bfs_lz4_lwalk **lwp, struct bfs_io *io, struct bfs_index *idx,
			const struct bfs_lz4_lframe *f, uint64_t *next)
{
	struct fwalk fw = { .f = f, .p = HIST };
	struct bfs_lz4_lwalk *w = *lwp;
	uint64_t end = 0;
	size_t need;
	int rc, stop;

	if (f->bmax > BMAX_LARGEST)
		return -EINVAL;
	if (!w) {
		rc = lwalk_new(lwp, io);
		if (rc < 0)
			return rc;
		w = *lwp;
	}
	need = f->bmax + BLK_HDR_LEN + BLK_CSUM_LEN > CHUNK ? f->bmax + 8 : CHUNK;
	if (w->in_cap < need) {
		free(w->in);
		w->in_len = w->in_cap = 0;
		w->in = malloc(need);
		if (!w->in)
			return -ENOMEM;
		w->in_cap = need;
	}
	need = HIST + f->bmax + OUT_ROOM;
	if (w->out_cap < need) {
		free(w->out);
		w->out_cap = 0;
		w->out = malloc(need);
		if (!w->out)
			return -ENOMEM;
		w->out_cap = need;
	}
	fw.first = w->li->n;
	bfs_xxh32_init(&fw.content, 0);
	stop = walk_blocks(w, &fw, &end);
	if (stop < 0)
		return stop;
	if (fw.open) {
		rc = close_span(w, &fw);
		if (rc < 0)
			return rc;
	}
	/*
	 * Blocks before the damage are kept when each proved itself by its
	 * checksum, or when nothing could prove any of them; dropped when
	 * only the content checksum (now unreachable or wrong) could have.
	 */
	if (stop == STOP_BAD && f->ccsum && !f->bcsum) {
		drop_frame(w, fw.first);
		bfs_index_mark_broken(idx, f->start,
				      "lz4: %s at offset %" PRIu64
				      " (the linked frame from offset %" PRIu64 " is dropped)",
				      fw.why, fw.at, f->start);
		return 1;
	}
	rc = commit(w, idx, fw.first, f);
	if (rc < 0)
		return rc;
	if (stop != STOP_END) {
		bfs_index_mark_broken(idx, fw.at, "lz4: %s at offset %" PRIu64, fw.why, fw.at);
		return 1;
	}
	/* A stated size of 0 means "unknown" to liblz4 too. */
	if (f->csize && fw.total != f->csize) {
		bfs_index_mark_broken(idx, end,
				      "lz4: frame ending at %" PRIu64 " holds %" PRIu64
				      " bytes, its header says %" PRIu64,
				      end, fw.total, f->csize);
		return 1;
	}
	*next = end;
	return 0;
}

/* ---- decoding a span ---- */

/* Per thread: a scratch buffer for a checkpoint, and the output near a span's start. */
struct tls {
	uint8_t *s;
	size_t cap;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_err;

static void tls_free(void *p)
{
	struct tls *t = p;

	free(t->s);
	free(t);
}

static void tls_create(void)
{
	tls_err = pthread_key_create(&tls_key, tls_free);
}

/* This thread's state; NULL without memory. */
static struct tls *tls_get(void)
{
	struct tls *t;

	if (pthread_once(&tls_once, tls_create) != 0 || tls_err != 0)
		return NULL;
	t = pthread_getspecific(tls_key);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		if (pthread_setspecific(tls_key, t) != 0) {
			free(t);
			return NULL;
		}
	}
	return t;
}

/* At least @need bytes of scratch, keeping what it holds. Return: 0 or -ENOMEM. */
static int scratch(struct tls *t, size_t need, const char **why)
{
	uint8_t *ns;

	if (t->cap >= need)
		return 0;
	ns = realloc(t->s, need);
	if (!ns) {
		*why = "no memory for an lz4 span";
		return -ENOMEM;
	}
	t->s = ns;
	t->cap = need;
	return 0;
}

static void tls_shrink(struct tls *t)
{
	if (t->cap > SCRATCH_KEEP) {
		free(t->s);
		t->s = NULL;
		t->cap = 0;
	}
}

/* The checkpoint of span @k: binary search by block number. */
static const struct cp *find_cp(const struct lk_index *li, size_t k)
{
	size_t lo = 0, hi = li ? li->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (li->cp[mid].blk < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < (li ? li->n : 0) && li->cp[lo].blk == k ? &li->cp[lo] : NULL;
}

/* Put checkpoint @cp's dict at s[HIST - dlen, HIST). Return: 0 or -EBADMSG. */
static int restore(const struct lk_index *li, const struct cp *cp, uint8_t *s, const char **why)
{
	uint8_t *at = s + HIST - cp->dlen;

	if (cp->kind == CP_RAW) {
		memcpy(at, li->blob + cp->off, cp->dlen);
	} else if (cp->kind == CP_LZ4) {
		int got = LZ4_decompress_safe((const char *)li->blob + cp->off, (char *)at,
					      (int)cp->zlen, (int)cp->dlen);

		if (got != (int)cp->dlen) {
			*why = "lz4 checkpoint does not decode";
			return -EBADMSG;
		}
	}
	return 0;
}

/* Where decoding a span stands. */
struct sdec {
	const uint8_t *src;
	uint32_t clen, ipos; /* input consumed */
	uint32_t bmax, csum;
	bool verify;
};

/*
 * The next block's data: *@data, *@dlen and whether it is stored.
 * Return: 0, or -EBADMSG/-EILSEQ when its header or checksum is wrong.
 */
static int next_block(struct sdec *d, const uint8_t **data, uint32_t *dlen, bool *stored,
		      const char **why)
{
	uint32_t word;

	if (d->clen - d->ipos < BLK_HDR_LEN) {
		*why = "lz4 span ends inside a block header";
		return -EBADMSG;
	}
	word = bfs_le32(d->src + d->ipos);
	*dlen = word & BLK_SIZE_MASK;
	*stored = word & BLK_STORED;
	if (*dlen == 0 || *dlen > d->bmax ||
	    d->clen - d->ipos - BLK_HDR_LEN < (uint64_t)*dlen + d->csum) {
		*why = "block header does not match the index";
		return -EBADMSG;
	}
	*data = d->src + d->ipos + BLK_HDR_LEN;
	if (d->verify && d->csum && bfs_xxh32(*data, *dlen, 0) != bfs_le32(*data + *dlen)) {
		*why = "block checksum mismatch";
		return -EILSEQ;
	}
	d->ipos += BLK_HDR_LEN + *dlen + d->csum;
	return 0;
}

/*
 * Decode one LZ4 block of @dlen bytes at @data to @out, with the @hlen
 * bytes at @hist as the history before it (right before @out, or not).
 * @room: how many bytes are wanted; @whole: all of the block (then @out
 * has room for @cap bytes, at least @room). Return: bytes of output
 * (more than @room only when @whole, which the caller refuses), or -1.
 */
static int lz4_block(const uint8_t *data, uint32_t dlen, uint8_t *out, const uint8_t *hist,
		     uint32_t hlen, uint32_t room, uint32_t cap, bool whole)
{
	if (!whole && room < cap)
		return LZ4_decompress_safe_partial_usingDict((const char *)data, (char *)out,
							     (int)dlen, (int)room, (int)room,
							     (const char *)hist, (int)hlen);
	return LZ4_decompress_safe_usingDict((const char *)data, (char *)out, (int)dlen, (int)cap,
					     (const char *)hist, (int)hlen);
}

/*
 * Where a block's history is, as decoding a span goes on. Before the
 * span's own output is a whole history (OWN_HIST) the checkpoint is part
 * of it: the first block decodes into @dst with the checkpoint (restored
 * at s[HIST - dlen, HIST)) as its dictionary; later ones there decode in
 * the scratch after it, the span's output so far copied to s[HIST, ...)
 * so that checkpoint and output make one history. After that, and in a
 * span without a checkpoint, the output in @dst is the whole history.
 */
enum mode {
	M_DST,	   /* history: dst[0, pos) */
	M_FIRST,   /* history: the checkpoint; pos is 0 */
	M_SCRATCH, /* history: the checkpoint and s[HIST, HIST + pos) */
};

int bfs_lz4_span_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
			uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	const struct lk_index *li = idx->priv;
	const struct cp *cp = find_cp(li, k);
	struct sdec d = { .src = src,
			  .clen = b->clen,
			  .verify = verify,
			  .bmax = b->aux & ~BFS_LZ4_SPAN_TAG,
			  .csum = b->flags & BFS_BLK_CSUM ? BLK_CSUM_LEN : 0 };
	bool whole = n == b->usize;
	enum mode mode = M_DST;
	uint32_t pos = 0;
	struct tls *t;
	int rc = 0;

	if (!is_span(b) || !cp) {
		*why = "lz4 span without a checkpoint";
		return -EBADMSG;
	}
	if (n == 0 || n > b->usize || d.bmax < (64u << 10) || d.bmax > BMAX_LARGEST) {
		*why = "lz4 span prefix out of range";
		return -EINVAL;
	}
	t = tls_get();
	if (!t) {
		*why = "no memory for an lz4 span";
		return -ENOMEM;
	}
	if (cp->dlen > 0) {
		rc = scratch(t, HIST, why);
		if (rc == 0)
			rc = restore(li, cp, t->s, why);
		if (rc < 0)
			goto out;
		mode = M_FIRST;
	}
	while (whole ? d.ipos < d.clen : pos < n) {
		uint32_t dlen, room = n - pos, take;
		const uint8_t *data;
		bool stored;
		int got;

		rc = next_block(&d, &data, &dlen, &stored, why);
		if (rc < 0)
			goto out;
		if (stored) {
			got = (int)dlen;
			take = dlen < room ? dlen : room;
			memcpy(dst + pos, data, take);
			if (mode == M_SCRATCH)
				memcpy(t->s + HIST + pos, data, dlen);
		} else if (mode == M_SCRATCH) {
			uint8_t *out = t->s + HIST + pos;

			got = lz4_block(data, dlen, out, t->s + HIST - cp->dlen, cp->dlen + pos,
					room, d.bmax, whole);
			take = got < 0 ? 0 : (uint32_t)got < room ? (uint32_t)got : room;
			memcpy(dst + pos, out, take);
		} else if (room >= d.bmax || !whole) {
			if (mode == M_FIRST)
				got = lz4_block(data, dlen, dst, t->s + HIST - cp->dlen, cp->dlen,
						room, d.bmax, whole);
			else
				got = lz4_block(data, dlen, dst + pos, dst, pos, room, d.bmax,
						whole);
			take = got < 0 ? 0 : (uint32_t)got < room ? (uint32_t)got : room;
		} else {
			/* the last block of a whole span: exactly room, else retry with slack */
			const uint8_t *h = mode == M_FIRST ? t->s + HIST - cp->dlen : dst;
			uint32_t hlen = mode == M_FIRST ? cp->dlen : pos;

			got = lz4_block(data, dlen, dst + pos, h, hlen, room, room, true);
			if (got < 0) {
				if (mode == M_DST && hlen > HIST) {
					h = dst + pos - HIST;
					hlen = HIST;
				}
				rc = scratch(t, 2 * HIST + d.bmax, why);
				if (rc < 0)
					goto out;
				/* the history right before the output, from wherever it is */
				memmove(t->s + HIST - hlen,
					mode == M_FIRST ? t->s + HIST - hlen : h, hlen);
				got = lz4_block(data, dlen, t->s + HIST, t->s + HIST - hlen, hlen,
						room, d.bmax, true);
				if (got >= 0 && (uint32_t)got <= room)
					memcpy(dst + pos, t->s + HIST, (size_t)got);
			}
			take = got < 0 ? 0 : (uint32_t)got < room ? (uint32_t)got : room;
		}
		if (got < 0) {
			*why = "lz4 block does not decode";
			rc = -EBADMSG;
			goto out;
		}
		if (whole && (uint32_t)got > room) {
			*why = "lz4 span holds more bytes than the index says";
			rc = -EBADMSG;
			goto out;
		}
		pos += take;
		if (pos >= OWN_HIST) {
			mode = M_DST;
		} else if (mode == M_FIRST && pos > 0) {
			/* later blocks see the checkpoint and this output as one history */
			rc = scratch(t, HIST + OWN_HIST + d.bmax, why);
			if (rc < 0)
				goto out;
			memcpy(t->s + HIST, dst, pos);
			mode = M_SCRATCH;
		}
		if (!whole && pos < n && d.ipos == d.clen) {
			*why = "lz4 span holds fewer bytes than the index says";
			rc = -EBADMSG;
			goto out;
		}
	}
	if (whole && pos != n) {
		*why = "lz4 span holds fewer bytes than the index says";
		rc = -EBADMSG;
		goto out;
	}
	if (whole && verify && bfs_xxh32(dst, n, 0) != cp->hash) {
		*why = "lz4 span XXH32 mismatch";
		rc = -EILSEQ;
	}
out:
	tls_shrink(t);
	return rc;
}

/* ---- the index cache ---- */

/*
 * Private bytes: a count (4) and SPAN_TARGET (4), then per checkpoint
 * blk hash dlen zlen (4 each), kind (1) and 3 zero bytes, then the
 * checkpoints' bytes one after another.
 */
#define PRIV_HDR 8
#define PRIV_CP	 20

int bfs_lz4_lsave(const struct bfs_index *idx, uint8_t **out, size_t *len)
{
	const struct lk_index *li = idx->priv;
	size_t total;
	uint8_t *p, *q;

	*out = NULL;
	*len = 0;
	if (!li)
		return 0;
	total = PRIV_HDR + li->n * PRIV_CP + li->blob_len;
	p = calloc(1, total);
	if (!p)
		return -ENOMEM;
	bfs_put_le32(p, (uint32_t)li->n);
	bfs_put_le32(p + 4, SPAN_TARGET);
	q = p + PRIV_HDR;
	for (size_t i = 0; i < li->n; i++, q += PRIV_CP) {
		const struct cp *cp = &li->cp[i];

		bfs_put_le32(q, cp->blk);
		bfs_put_le32(q + 4, cp->hash);
		bfs_put_le32(q + 8, cp->dlen);
		bfs_put_le32(q + 12, cp->zlen);
		q[16] = cp->kind;
	}
	if (li->blob_len)
		memcpy(q, li->blob, li->blob_len);
	*out = p;
	*len = total;
	return 0;
}

/* A checkpoint record as a walk writes it. */
static bool cp_ok(const struct cp *cp, const uint8_t *q)
{
	if (q[17] || q[18] || q[19])
		return false;
	switch (cp->kind) {
	case CP_NONE:
		return cp->dlen == 0 && cp->zlen == 0;
	case CP_RAW:
		return cp->dlen > 0 && cp->dlen <= HIST && cp->zlen == cp->dlen;
	case CP_LZ4:
		return cp->dlen > 0 && cp->dlen <= HIST && cp->zlen > 0 && cp->zlen < cp->dlen;
	default:
		return false;
	}
}

/*
 * One record per span of @idx, in order, each as a walk writes it, the
 * bytes tiling the rest; made with this SPAN_TARGET (else walk again, so
 * that a new spacing takes effect). A checkpoint's contents are proven
 * when used: a compressed one must decode to exactly its length, and a
 * span must fill its clen and usize exactly (XXH32 with -o verify).
 */
int bfs_lz4_lload(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	size_t spans = 0, n, j = 0;
	struct lk_index *li;
	const uint8_t *q;
	uint64_t off = 0;

	for (size_t k = 0; k < idx->n; k++)
		spans += is_span(&idx->blk[k]);
	if (len == 0)
		return spans ? 1 : 0;
	if (len < PRIV_HDR || bfs_le32(priv + 4) != SPAN_TARGET)
		return 1;
	n = bfs_le32(priv);
	if (n == 0 || n != spans || (len - PRIV_HDR) / PRIV_CP < n)
		return 1;
	li = calloc(1, sizeof(*li));
	if (!li)
		return -ENOMEM;
	li->cp = calloc(n, sizeof(*li->cp));
	if (!li->cp)
		goto nomem;
	q = priv + PRIV_HDR;
	for (size_t i = 0; i < n; i++, q += PRIV_CP) {
		struct cp *cp = &li->cp[i];

		*cp = (struct cp){ .blk = bfs_le32(q),
				   .hash = bfs_le32(q + 4),
				   .dlen = bfs_le32(q + 8),
				   .zlen = bfs_le32(q + 12),
				   .kind = q[16],
				   .off = off };
		/* the next span of the index, in order */
		while (j < idx->n && !is_span(&idx->blk[j]))
			j++;
		if (j >= idx->n || cp->blk != j || !cp_ok(cp, q))
			goto bad;
		j++;
		off += cp->zlen;
	}
	if (off != len - PRIV_HDR - n * PRIV_CP)
		goto bad;
	li->blob_len = (size_t)off;
	li->blob = malloc(off ? (size_t)off : 1);
	if (!li->blob)
		goto nomem;
	memcpy(li->blob, q, (size_t)off);
	li->n = n;
	idx->priv = li;
	idx->priv_free = lk_index_free;
	idx->priv_bytes = lk_bytes(li);
	return 0;
bad:
	lk_index_free(li);
	return 1;
nomem:
	lk_index_free(li);
	return -ENOMEM;
}

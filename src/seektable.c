// SPDX-License-Identifier: MIT
/*
 * The LZ4 seek table (layout in seektable.h and man 5 blockfs): the
 * writer that blockfs-pack uses and the checked reader that the LZ4 scan
 * and blockfs-pack -t use. Bytes only; the reader's I/O goes through a
 * struct bfs_io.
 *
 * The checks make a table that is damaged or does not belong to its file
 * fail here, so the scan walks the blocks instead. A table that passes
 * them and still lies is the LZ4 scan's to catch: bytes between entries
 * that are no frame boundary make it refuse the table, an odd size is
 * measured before it is relied on, and decode compares the block's size
 * word with clen and the decoded length with usize.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/io.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"

/* Entry "info" word */
#define INFO_USIZE_MASK 0x007FFFFFu
#define INFO_BMAX_SHIFT 24
#define INFO_BMAX_MASK	7u
#define INFO_CSUM	0x80000000u
#define INFO_RESERVED	0x78800000u

/* lz4_Frame_format.md: block max ids 4..7, header 7..19 bytes, EndMark 4 */
#define BMAX_ID_MIN   4
#define BMAX_ID_MAX   7
#define FRAME_HDR_MIN 7
#define ENDMARK_LEN   4
#define BLK_HDR_LEN   4
#define BLK_CSUM_LEN  4

/* Footer fields */
#define F_TABLE_OFF  0
#define F_USIZE	     8
#define F_COUNT	     16
#define F_BLOCK_SIZE 20
#define F_VERSION    24
#define F_CSUM	     28
#define F_MAGIC	     32

static int bmax_id(uint32_t bmax)
{
	for (int id = BMAX_ID_MIN; id <= BMAX_ID_MAX; id++)
		if (bmax == 1u << (8 + 2 * id))
			return id;
	return -1;
}

/* The limits every entry must respect, on both sides of the format. */
static bool entry_ok(const struct bfs_seektable_entry *e)
{
	uint32_t over = BLK_HDR_LEN + (e->csum ? BLK_CSUM_LEN : 0);

	return bmax_id(e->bmax) >= 0 && e->usize >= 1 && e->usize <= e->bmax && e->clen > over &&
	       e->clen - over <= e->bmax && e->coff >= FRAME_HDR_MIN;
}

/*
 * Blocks of one frame follow each other directly; between frames lie at
 * least an EndMark and the next frame's header. Blocks whose frame
 * properties differ cannot share a frame.
 */
static bool follows(const struct bfs_seektable_entry *prev, const struct bfs_seektable_entry *e)
{
	uint64_t end = prev->coff + prev->clen;

	if (e->coff < end)
		return false;
	if (e->coff - end < ENDMARK_LEN + FRAME_HDR_MIN)
		return e->coff == end && e->bmax == prev->bmax && e->csum == prev->csum;
	return true;
}

int bfs_seektable_writer_add(struct bfs_seektable_writer *w, const struct bfs_seektable_entry *e)
{
	uint8_t *p;

	if (w->err)
		return w->err;
	if (!entry_ok(e) || (w->n && !follows(&w->last, e))) {
		w->err = -EINVAL;
		return w->err;
	}
	if (w->n >= (UINT32_MAX - BFS_SEEK_OVERHEAD) / BFS_SEEK_ENTRY_LEN) {
		w->err = -EFBIG; /* the frame size word would overflow */
		return w->err;
	}
	if (BFS_SEEK_HDR_LEN + (w->n + 1) * BFS_SEEK_ENTRY_LEN + BFS_SEEK_FOOTER_LEN > w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 4096;
		uint8_t *nb = realloc(w->buf, cap);

		if (!nb) {
			w->err = -ENOMEM;
			return w->err;
		}
		w->buf = nb;
		w->cap = cap;
	}
	p = w->buf + BFS_SEEK_HDR_LEN + w->n * BFS_SEEK_ENTRY_LEN;
	bfs_put_le64(p, e->coff);
	bfs_put_le32(p + 8, e->clen);
	bfs_put_le32(p + 12, e->usize | (uint32_t)bmax_id(e->bmax) << INFO_BMAX_SHIFT |
				     (e->csum ? INFO_CSUM : 0));
	w->n++;
	w->usize += e->usize;
	w->last = *e;
	return 0;
}

int bfs_seektable_writer_finish(struct bfs_seektable_writer *w, uint64_t table_off,
				uint32_t block_size, const uint8_t **out, size_t *len)
{
	size_t size = (size_t)bfs_seektable_size(w->n);
	uint8_t *f;

	if (w->err)
		return w->err;
	if (w->n && table_off < w->last.coff + w->last.clen + ENDMARK_LEN)
		return -EINVAL;
	if (size > w->cap) {
		uint8_t *nb = realloc(w->buf, size);

		if (!nb)
			return -ENOMEM;
		w->buf = nb;
		w->cap = size;
	}
	bfs_put_le32(w->buf, BFS_SEEK_MAGIC);
	bfs_put_le32(w->buf + 4, (uint32_t)(size - BFS_SEEK_HDR_LEN));
	f = w->buf + size - BFS_SEEK_FOOTER_LEN;
	bfs_put_le64(f + F_TABLE_OFF, table_off);
	bfs_put_le64(f + F_USIZE, w->usize);
	bfs_put_le32(f + F_COUNT, (uint32_t)w->n);
	bfs_put_le32(f + F_BLOCK_SIZE, block_size);
	bfs_put_le32(f + F_VERSION, BFS_SEEK_VERSION);
	bfs_put_le32(f + F_CSUM,
		     bfs_xxh32(w->buf + BFS_SEEK_HDR_LEN, size - BFS_SEEK_HDR_LEN - 8, 0));
	bfs_put_le32(f + F_MAGIC, BFS_SEEK_FOOTER_MAGIC);
	*out = w->buf;
	*len = size;
	return 0;
}

void bfs_seektable_writer_release(struct bfs_seektable_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static int bad(const char **why, const char *what)
{
	*why = what;
	return -EBADMSG;
}

int bfs_seektable_decode(const uint8_t *buf, size_t len, uint64_t file_size, size_t max_entries,
			 struct bfs_seektable *t, size_t *need, const char **why)
{
	const uint8_t *f, *tab;
	uint64_t n, size, table_off, sum = 0;
	struct bfs_seektable_entry *e;

	if (len > file_size || len < BFS_SEEK_FOOTER_LEN)
		return 1;
	f = buf + len - BFS_SEEK_FOOTER_LEN;
	if (bfs_le32(f + F_MAGIC) != BFS_SEEK_FOOTER_MAGIC)
		return 1;
	if (bfs_le32(f + F_VERSION) != BFS_SEEK_VERSION)
		return bad(why, "seek table of an unknown version");
	n = bfs_le32(f + F_COUNT);
	if (n > max_entries)
		return bad(why, "seek table has more entries than the file can hold");
	size = bfs_seektable_size(n);
	table_off = bfs_le64(f + F_TABLE_OFF);
	if (size > file_size || table_off != file_size - size)
		return bad(why, "seek table does not match the file's size (moved or truncated)");
	if (size > len) {
		*need = (size_t)size;
		return -EAGAIN;
	}
	tab = buf + len - size;
	if (bfs_le32(tab) != BFS_SEEK_MAGIC || bfs_le32(tab + 4) != size - BFS_SEEK_HDR_LEN)
		return bad(why, "seek table frame header is wrong");
	if (bfs_xxh32(tab + BFS_SEEK_HDR_LEN, (size_t)size - BFS_SEEK_HDR_LEN - 8, 0) !=
	    bfs_le32(f + F_CSUM))
		return bad(why, "seek table checksum mismatch");

	e = malloc(n ? (size_t)n * sizeof(*e) : 1);
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = tab + BFS_SEEK_HDR_LEN + i * BFS_SEEK_ENTRY_LEN;
		uint32_t info = bfs_le32(p + 12);

		e[i] = (struct bfs_seektable_entry){
			.coff = bfs_le64(p),
			.clen = bfs_le32(p + 8),
			.usize = info & INFO_USIZE_MASK,
			.bmax = 1u << (8 + 2 * ((info >> INFO_BMAX_SHIFT) & INFO_BMAX_MASK)),
			.csum = info & INFO_CSUM,
		};
		if ((info & INFO_RESERVED) ||
		    ((info >> INFO_BMAX_SHIFT) & INFO_BMAX_MASK) < BMAX_ID_MIN ||
		    !entry_ok(&e[i])) {
			free(e);
			return bad(why, "seek table entry out of limits");
		}
		if (!bfs_range_ok(e[i].coff, e[i].clen, table_off) ||
		    table_off - e[i].coff - e[i].clen < ENDMARK_LEN ||
		    (i > 0 && !follows(&e[i - 1], &e[i]))) {
			free(e);
			return bad(why, "seek table entries overlap or leave the frames");
		}
		sum += e[i].usize;
	}
	if (sum != bfs_le64(f + F_USIZE) || sum > (uint64_t)INT64_MAX) {
		free(e);
		return bad(why, "seek table sizes do not add up");
	}
	*t = (struct bfs_seektable){
		.e = e,
		.n = (size_t)n,
		.table_off = table_off,
		.usize = sum,
		.block_size = bfs_le32(f + F_BLOCK_SIZE),
	};
	return 0;
}

int bfs_seektable_load(struct bfs_io *io, size_t max_entries, struct bfs_seektable *t,
		       const char **why)
{
	uint8_t tail[BFS_SEEK_TAIL_LEN], *big;
	size_t len = io->size < sizeof(tail) ? (size_t)io->size : sizeof(tail), need = 0;
	int rc;

	if (len < BFS_SEEK_FOOTER_LEN)
		return 1;
	rc = bfs_io_read(io, tail, len, io->size - len);
	if (rc < 0)
		return rc;
	rc = bfs_seektable_decode(tail, len, io->size, max_entries, t, &need, why);
	if (rc != -EAGAIN)
		return rc;
	/* need <= file size and <= 16 * max_entries + 44: checked by decode */
	big = malloc(need);
	if (!big)
		return -ENOMEM;
	rc = bfs_io_read(io, big, need, io->size - need);
	if (rc == 0)
		rc = bfs_seektable_decode(big, need, io->size, max_entries, t, &need, why);
	if (rc == -EAGAIN)
		rc = bad(why, "seek table changed while read");
	free(big);
	return rc;
}

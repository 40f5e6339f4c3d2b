// SPDX-License-Identifier: MIT
/*
 * Fuzzes the seek-table reader (bfs_seektable_load, bfs_seektable_decode) and the LZ4
 * scan that trusts it. The input is the file whose end holds the table.
 * Each input runs twice: as given, and with the table frame's header,
 * offset and XXH32 repaired, so that the fuzzer reaches the entry checks
 * instead of stopping at a checksum it cannot forge.
 *
 * Checks: load and decode of the tail agree; a table accepted has sound
 * entries (in order, inside the frames, sizes adding up, within the
 * count limit) and is exactly what bfs_seektable_writer writes for them, byte
 * for byte; the LZ4 scan of the file then builds a sound index, and every
 * block decodes or fails cleanly inside its clen and usize buffers.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"
#include "fuzz.h"

#define F_COUNT 16
#define F_CSUM	28
#define F_MAGIC 32

static void check_accepted(const uint8_t *data, size_t size, size_t max,
			   const struct bfs_seektable *t)
{
	struct bfs_seektable_writer w = { 0 };
	const uint8_t *out;
	uint64_t sum = 0;
	size_t len;

	FZ_CHECK(t->n <= max);
	FZ_CHECK(t->table_off + bfs_seektable_size(t->n) == size);
	for (size_t i = 0; i < t->n; i++) {
		const struct bfs_seektable_entry *e = &t->e[i];

		FZ_CHECK(e->usize >= 1 && e->usize <= e->bmax && e->bmax <= (4u << 20));
		FZ_CHECK(bfs_range_ok(e->coff, e->clen, t->table_off));
		FZ_CHECK(i == 0 || e->coff >= t->e[i - 1].coff + t->e[i - 1].clen);
		sum += e->usize;
	}
	FZ_CHECK(sum == t->usize);
	/* what the reader accepts, the writer writes back identically */
	for (size_t i = 0; i < t->n; i++)
		FZ_CHECK(bfs_seektable_writer_add(&w, &t->e[i]) == 0);
	FZ_CHECK(bfs_seektable_writer_finish(&w, t->table_off, t->block_size, &out, &len) == 0);
	FZ_CHECK(len == bfs_seektable_size(t->n) && memcmp(out, data + t->table_off, len) == 0);
	bfs_seektable_writer_release(&w);
}

static void check_file(const uint8_t *data, size_t size)
{
	size_t max = size / 4 + 1, tail = size < BFS_SEEK_TAIL_LEN ? size : BFS_SEEK_TAIL_LEN;
	size_t need = 0;
	struct bfs_seektable t, t2;
	const char *why = NULL, *why2 = NULL;
	struct bfs_index idx;
	struct bfs_io io;
	int rc, rc2;

	bfs_io_init_mem(&io, data, size);
	rc = bfs_seektable_load(&io, max, &t, &why);
	FZ_CHECK(rc == 0 || rc == 1 || rc == -EBADMSG || rc == -ENOMEM);
	FZ_CHECK(rc != -EBADMSG || why != NULL);

	/* the same checks on the bytes in memory, as blockfs-pack -t makes them */
	rc2 = bfs_seektable_decode(data + size - tail, tail, size, max, &t2, &need, &why2);
	if (rc2 == -EAGAIN) {
		FZ_CHECK(need > tail && need <= size);
		rc2 = bfs_seektable_decode(data + size - need, need, size, max, &t2, &need, &why2);
	}
	FZ_CHECK(rc2 == rc);
	if (rc == 0) {
		FZ_CHECK(t2.n == t.n && t2.table_off == t.table_off && t2.usize == t.usize &&
			 t2.block_size == t.block_size);
		for (size_t i = 0; i < t.n; i++) /* field by field: padding differs */
			FZ_CHECK(t.e[i].coff == t2.e[i].coff && t.e[i].clen == t2.e[i].clen &&
				 t.e[i].usize == t2.e[i].usize && t.e[i].bmax == t2.e[i].bmax &&
				 t.e[i].csum == t2.e[i].csum);
		check_accepted(data, size, max, &t);
		free(t.e);
		free(t2.e);
	}

	/* the scan that trusts the table: lies cost EIO, never a wild access */
	bfs_index_init(&idx, size);
	rc = bfs_codec_lz4.scan(&io, NULL, &idx);
	FZ_CHECK(rc == 0 || rc == -ENOTSUP || rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0)
		fz_check_blocks(&bfs_codec_lz4, &idx, data, size, NULL);
	bfs_index_destroy(&idx);
}

/* Make the table frame the footer describes well-formed; false if none. */
static bool repair(uint8_t *p, size_t size)
{
	uint8_t *f = p + size - BFS_SEEK_FOOTER_LEN;
	uint64_t tsize;
	uint8_t *tab;

	if (size < BFS_SEEK_OVERHEAD || bfs_le32(f + F_MAGIC) != BFS_SEEK_FOOTER_MAGIC)
		return false;
	tsize = bfs_seektable_size(bfs_le32(f + F_COUNT));
	if (tsize > size)
		return false;
	tab = p + size - tsize;
	bfs_put_le32(tab, BFS_SEEK_MAGIC);
	bfs_put_le32(tab + 4, (uint32_t)(tsize - BFS_SEEK_HDR_LEN));
	bfs_put_le64(f, size - tsize);
	bfs_put_le32(f + F_CSUM,
		     bfs_xxh32(tab + BFS_SEEK_HDR_LEN, (size_t)tsize - BFS_SEEK_HDR_LEN - 8, 0));
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	check_file(data, size);
	copy = malloc(size ? size : 1);
	FZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	if (repair(copy, size))
		check_file(copy, size);
	free(copy);
	return 0;
}

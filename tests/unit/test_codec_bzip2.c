// SPDX-License-Identifier: MIT
/*
 * bzip2 codec: probe, the walk (levels 1 to 9, text, random bytes and
 * long runs, several streams, empty streams, padding), the decoding of
 * every block at its bit offset, whole and as a prefix, a false block or
 * end-of-stream magic inside a block, damage (flipped bits at many
 * places, a wrong stream CRC, truncation at every point, trailing
 * garbage), entries that lie, the index cache round trip, and the
 * blocks the walk keeps in the spill. Files are made in memory with libbz2.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <bzlib.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/spill.h"
#include "builders.h"

#define LEVEL_UNIT 100000

/* Append one bzip2 stream of @d (@len bytes) at @level, made by libbz2. */
static void stream(struct tb_buf *b, const uint8_t *d, size_t len, int level)
{
	unsigned int cap = (unsigned int)(len + len / 100 + 1024);
	char *out = malloc(cap);

	assert_non_null(out);
	assert_int_equal(BZ2_bzBuffToBuffCompress(out, &cap, (char *)(uintptr_t)d,
						  (unsigned int)len, level, 0, 30),
			 BZ_OK);
	tb_put(b, out, cap);
	free(out);
}

/* Scan @f into @idx (initialised here) as the daemon does; the scan must succeed. */
static void scan(const struct tb_buf *f, struct bfs_index *idx)
{
	struct bfs_io io;

	bfs_io_init_mem(&io, f->p, f->len);
	bfs_index_init(idx, f->len);
	assert_int_equal(bfs_codec_bzip2.scan(&io, NULL, idx), 0);
	assert_int_equal(bfs_measure(idx, &io, &bfs_codec_bzip2, NULL), 0);
}

/* Decode block @k of @idx from an exact copy of its bytes. Return: decode's. */
static int decode(const struct bfs_index *idx, const struct tb_buf *f, size_t k, uint8_t **out)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(b->usize);
	const char *why = NULL;
	int rc;

	assert_non_null(src);
	assert_non_null(dst);
	memcpy(src, f->p + b->coff, b->clen);
	rc = tb_decode(&bfs_codec_bzip2, b, src, dst, true, &why);
	free(src);
	if (rc == 0) {
		*out = dst;
	} else {
		assert_non_null(why);
		free(dst);
		*out = NULL;
	}
	return rc;
}

/*
 * The first @good blocks decode to @d, each in its place; @good is all of
 * them when the index is not broken, which must then hold @len bytes.
 */
static void check_blocks(const struct bfs_index *idx, const struct tb_buf *f, const uint8_t *d,
			 size_t len, size_t good)
{
	for (size_t k = 0; k < good; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *out;

		assert_false(b->flags & BFS_BLK_BAD);
		assert_true(b->uoff + b->usize <= len);
		assert_int_equal(decode(idx, f, k, &out), 0);
		assert_memory_equal(out, d + b->uoff, b->usize);
		free(out);
	}
	if (!idx->broken) {
		assert_int_equal(good, idx->n);
		assert_int_equal(atomic_load(&idx->usize), len);
	}
}

static size_t count_blocks(const struct bfs_index *idx)
{
	return idx->n - (idx->broken ? 1 : 0);
}

/* ---- probe ---- */

static void test_probe(void **state)
{
	uint8_t *d = tb_text(1000, 1);
	struct tb_buf f = { 0 }, e = { 0 };
	uint8_t head[16];

	(void)state;
	stream(&f, d, 1000, 9);
	assert_true(bfs_codec_bzip2.probe(f.p, BFS_PROBE_LEN));
	assert_true(bfs_codec_bzip2.probe(f.p, 10));
	assert_false(bfs_codec_bzip2.probe(f.p, 9));
	stream(&e, d, 0, 1); /* empty: the end-of-stream marker follows */
	assert_int_equal(e.len, 14);
	assert_true(bfs_codec_bzip2.probe(e.p, e.len));
	assert_true(bfs_codec_probe(NULL, e.p, e.len) == &bfs_codec_bzip2);
	memcpy(head, f.p, 10);
	head[3] = '0';
	assert_false(bfs_codec_bzip2.probe(head, 10));
	head[3] = ':';
	assert_false(bfs_codec_bzip2.probe(head, 10));
	head[3] = '9';
	head[9] ^= 1; /* not a magic */
	assert_false(bfs_codec_bzip2.probe(head, 10));
	head[9] ^= 1;
	head[2] = 'H';
	assert_false(bfs_codec_bzip2.probe(head, 10));
	free(f.p);
	free(e.p);
	free(d);
}

/* ---- the walk ---- */

/* Text, random bytes and runs at each level: every block found, in place, exact. */
static void test_levels(void **state)
{
	(void)state;
	for (int level = 1; level <= 9; level += 2) {
		for (int kind = 0; kind < 3; kind++) {
			size_t len = (size_t)level * LEVEL_UNIT * 3 + 12345;
			uint8_t *d = kind == 0 ? tb_text(len, (uint64_t)level) :
				     kind == 1 ? tb_random(len, (uint64_t)level) :
						 calloc(1, len);
			struct tb_buf f = { 0 };
			struct bfs_index idx;

			assert_non_null(d);
			if (kind == 2) /* runs, which RLE1 folds: large blocks */
				for (size_t i = 0; i < len; i += 3000)
					d[i] = (uint8_t)i;
			stream(&f, d, len, level);
			scan(&f, &idx);
			assert_false(idx.broken);
			/* bzip2 cuts a block before level x 100000 bytes of RLE1 output */
			assert_true(idx.n >= (kind == 2 ? 1u : 4u));
			assert_int_equal(idx.block_size, (uint32_t)level * LEVEL_UNIT);
			for (size_t k = 0; k < idx.n; k++)
				assert_int_equal((idx.blk[k].aux >> 3) & 15u, (unsigned int)level);
			check_blocks(&idx, &f, d, len, idx.n);
			bfs_index_destroy(&idx);
			free(f.p);
			free(d);
		}
	}
}

/* Blocks start and end inside bytes: the aux bits are used, and reads stay in clen. */
static void test_bit_offsets(void **state)
{
	size_t len = 2200000, shifted = 0, tails = 0;
	uint8_t *d = tb_text(len, 5);
	struct tb_buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	stream(&f, d, len, 1);
	scan(&f, &idx);
	assert_true(idx.n >= 20);
	for (size_t k = 0; k < idx.n; k++) {
		shifted += (idx.blk[k].aux & 7u) != 0;
		tails += ((idx.blk[k].aux >> 7) & 7u) != 0;
		/* entries tile the file between the header and the end marker */
		if (k > 0)
			assert_int_equal(idx.blk[k].coff,
					 idx.blk[k - 1].coff + idx.blk[k - 1].clen);
	}
	assert_int_equal(idx.blk[0].coff, 4);
	assert_true(shifted > idx.n / 2 && tails > idx.n / 2);
	check_blocks(&idx, &f, d, len, idx.n);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* Streams of several levels joined, empty ones among them, as cat and pbzip2 make them. */
static void test_several_streams(void **state)
{
	size_t la = 250000, lb = 1300000, lc = 7;
	uint8_t *d = tb_text(la + lb + lc, 9);
	struct tb_buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	stream(&f, d, 0, 9);
	stream(&f, d, la, 1);
	stream(&f, d, 0, 3);
	stream(&f, d + la, lb, 9);
	stream(&f, d + la + lb, lc, 5);
	stream(&f, d, 0, 9);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 3 + 2 + 1);
	assert_int_equal(idx.block_size, 9 * LEVEL_UNIT); /* the first stream's */
	assert_int_equal((idx.blk[0].aux >> 3) & 15u, 1);
	assert_int_equal((idx.blk[3].aux >> 3) & 15u, 9);
	assert_int_equal((idx.blk[5].aux >> 3) & 15u, 5);
	assert_int_equal(idx.blk[5].usize, lc);
	check_blocks(&idx, &f, d, la + lb + lc, idx.n);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

static void test_empty_streams(void **state)
{
	struct tb_buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	stream(&f, (const uint8_t *)"", 0, 9);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 0);
	assert_int_equal(atomic_load(&idx.usize), 0);
	bfs_index_destroy(&idx);
	stream(&f, (const uint8_t *)"", 0, 1);
	stream(&f, (const uint8_t *)"", 0, 5);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 0);
	bfs_index_destroy(&idx);
	free(f.p);
}

/* Zero bytes after the last stream are padding; anything else is damage after the data. */
static void test_trailing_bytes(void **state)
{
	size_t len = 300000;
	uint8_t *d = tb_text(len, 3), zeros[700] = { 0 };
	struct tb_buf f = { 0 };
	struct bfs_index idx;
	size_t end;

	(void)state;
	stream(&f, d, len, 1);
	end = f.len;
	tb_put(&f, zeros, sizeof(zeros));
	scan(&f, &idx);
	assert_false(idx.broken);
	check_blocks(&idx, &f, d, len, idx.n);
	bfs_index_destroy(&idx);

	f.p[f.len - 1] = 'x'; /* garbage after zeros */
	scan(&f, &idx);
	assert_true(idx.broken);
	assert_int_equal(idx.blk[idx.n - 1].coff, end);
	check_blocks(&idx, &f, d, len, count_blocks(&idx));
	assert_int_equal(idx.blk[idx.n - 1].uoff, len); /* all the data, then EIO */
	bfs_index_destroy(&idx);

	f.len = end;
	tb_put(&f, "BZh9garbage", 11); /* a stream header, then nothing valid */
	scan(&f, &idx);
	assert_true(idx.broken);
	assert_int_equal(idx.blk[idx.n - 1].uoff, len);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/*
 * The bytes present in a block decide its symbol map: 16 bits saying
 * which ranges of 16 byte values occur, then 16 bits per such range
 * saying which values do (bzip2's format, most significant bit first).
 * Data made of the values whose bits spell a magic in three range words
 * puts that magic in every block's header, at bit 121 of the block.
 */
static uint8_t *magic_in_map(size_t len, uint64_t magic, uint64_t seed)
{
	uint8_t vals[256], *d = malloc(len);
	size_t nv = 0;

	assert_non_null(d);
	for (unsigned int r = 0; r < 16; r++) {
		unsigned int word =
			r < 3 ? (unsigned int)(magic >> (32 - 16 * r)) & 0xffffu : 0xffffu;

		for (unsigned int j = 0; j < 16; j++)
			if (word & (0x8000u >> j))
				vals[nv++] = (uint8_t)(r * 16 + j);
	}
	for (size_t i = 0; i < len; i++)
		d[i] = vals[tb_rng(&seed) % nv];
	return d;
}

/* Search @f's bits for @magic; count the places. */
static size_t count_magic(const struct tb_buf *f, uint64_t magic)
{
	uint64_t v = 0;
	size_t n = 0;

	for (uint64_t bit = 0; bit < (uint64_t)f->len * 8; bit++) {
		v = (v << 1 | ((f->p[bit / 8] >> (7 - bit % 8)) & 1u)) & ((1ull << 48) - 1);
		n += bit >= 47 && v == magic;
	}
	return n;
}

/* A block or end-of-stream magic inside a block is not where it ends. */
static void test_false_magic(void **state)
{
	static const uint64_t magics[] = { 0x314159265359ull, 0x177245385090ull };

	(void)state;
	for (size_t m = 0; m < 2; m++) {
		size_t len = 330000;
		uint8_t *d = magic_in_map(len, magics[m], m + 1);
		struct tb_buf f = { 0 };
		struct bfs_index idx;

		stream(&f, d, len, 1);
		stream(&f, d, len, 2);
		scan(&f, &idx);
		/* the magic is there, more often than blocks and streams account for */
		assert_true(count_magic(&f, magics[m]) >= idx.n + (m ? 2 : idx.n));
		assert_false(idx.broken);
		assert_true(idx.n >= 5);
		for (size_t k = 0; k < idx.n; k++)
			assert_true(idx.blk[k].usize > 10000);
		/* the second stream repeats the first */
		{
			uint8_t *dd = malloc(2 * len);

			assert_non_null(dd);
			memcpy(dd, d, len);
			memcpy(dd + len, d, len);
			check_blocks(&idx, &f, dd, 2 * len, idx.n);
			free(dd);
		}
		bfs_index_destroy(&idx);
		free(f.p);
		free(d);
	}
}

/* ---- damage ---- */

/*
 * A bit flipped anywhere after the header: the index keeps exactly the
 * blocks that end before the flip (or all of them, if the flip is in the
 * end marker's padding), never wrong bytes.
 */
static void test_flipped_bits(void **state)
{
	size_t len = 450000;
	uint8_t *d = tb_text(len, 21);
	struct tb_buf f = { 0 };
	struct bfs_index ok;
	size_t broken = 0;

	(void)state;
	stream(&f, d, len, 1);
	scan(&f, &ok);
	assert_true(ok.n >= 5);
	for (size_t at = 4; at < f.len; at += 1 + at / 40) {
		for (unsigned int bit = 0; bit < 8; bit += 3) {
			struct bfs_index idx;
			size_t good = 0;

			f.p[at] ^= (uint8_t)(1u << bit);
			scan(&f, &idx);
			/* blocks that end before the flipped byte are intact */
			while (good < ok.n && ok.blk[good].coff + ok.blk[good].clen <= at)
				good++;
			if (idx.broken) {
				broken++;
				assert_true(count_blocks(&idx) >= good);
				assert_true(count_blocks(&idx) <= good + 1);
			} else {
				/* only the padding after the stream CRC is free */
				assert_int_equal(at, f.len - 1);
			}
			check_blocks(&idx, &f, d, len, count_blocks(&idx));
			for (size_t k = 0; k < count_blocks(&idx); k++)
				assert_int_equal(idx.blk[k].usize, ok.blk[k].usize);
			bfs_index_destroy(&idx);
			f.p[at] ^= (uint8_t)(1u << bit);
		}
	}
	assert_true(broken > 100);
	bfs_index_destroy(&ok);
	free(f.p);
	free(d);
}

/* The stream CRC alone is wrong: every block stays, the file ends in EIO after them. */
static void test_stream_crc(void **state)
{
	size_t len = 250000;
	uint8_t *d = tb_text(len, 4);
	struct tb_buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	stream(&f, d, len, 1);
	stream(&f, d, 1000, 1);
	/* the first stream's CRC: the 32 bits before its padding */
	scan(&f, &idx);
	assert_false(idx.broken);
	{
		size_t k = 2; /* the first stream has three blocks */
		uint64_t end = idx.blk[k].coff + idx.blk[k].clen;

		bfs_index_destroy(&idx);
		f.p[end + 8] ^= 0x10; /* magic 6 bytes, then the CRC */
		scan(&f, &idx);
		assert_true(idx.broken);
		assert_int_equal(count_blocks(&idx), 3);
		assert_int_equal(idx.blk[3].uoff, len);
		check_blocks(&idx, &f, d, len, 3);
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* Cut at every length: the blocks kept are whole and right, and the cut shows as damage. */
static void test_truncated(void **state)
{
	size_t len = 260000, full;
	uint8_t *d = tb_text(len, 8);
	struct tb_buf f = { 0 };
	struct bfs_index ok;

	(void)state;
	stream(&f, d, len, 1);
	full = f.len;
	scan(&f, &ok);
	for (size_t cut = 10; cut < full; cut += 1 + cut / 500) {
		struct bfs_index idx;
		size_t good = 0;

		f.len = cut;
		scan(&f, &idx);
		f.len = full;
		while (good < ok.n && ok.blk[good].coff + ok.blk[good].clen < cut)
			good++;
		assert_true(idx.broken);
		assert_true(count_blocks(&idx) <= good);
		assert_true(count_blocks(&idx) + 1 >= good);
		check_blocks(&idx, &f, d, len, count_blocks(&idx));
		bfs_index_destroy(&idx);
	}
	bfs_index_destroy(&ok);
	free(f.p);
	free(d);
}

/* ---- decode ---- */

/* decode() of @b whole and of its prefix, which must say why when they fail. */
static int dec(const struct bfs_blk *b, const uint8_t *src, uint8_t *dst, bool verify)
{
	const char *why = NULL;
	int rc = tb_decode(&bfs_codec_bzip2, b, src, dst, verify, &why);

	assert_true(rc == 0 || why != NULL);
	return rc;
}

static int dec_prefix(const struct bfs_blk *b, const uint8_t *src, uint8_t *dst, uint32_t n)
{
	const char *why = NULL;
	int rc = tb_decode_prefix(&bfs_codec_bzip2, b, src, dst, n, true, &why);

	assert_true(rc == 0 || why != NULL);
	return rc;
}

/* Entries that lie about a block fail it; prefixes are the data's. */
static void test_decode_lies_and_prefix(void **state)
{
	size_t len = 230000;
	uint8_t *d = tb_text(len, 2), *out;
	struct tb_buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	stream(&f, d, len, 1);
	scan(&f, &idx);
	assert_true(idx.n >= 3);
	for (size_t k = 0; k < idx.n; k++) {
		struct bfs_blk save = idx.blk[k];
		const uint8_t *src = f.p + save.coff;
		uint8_t *dst = malloc(save.usize + 1);
		uint32_t n;

		assert_non_null(dst);
		for (n = 1; n < save.usize; n = n * 3 + 7) {
			memset(dst, 0xa5, save.usize);
			assert_int_equal(dec_prefix(&idx.blk[k], src, dst, n), 0);
			assert_memory_equal(dst, d + save.uoff, n);
			assert_int_equal(dst[n], 0xa5);
		}
		idx.blk[k].usize = save.usize - 1;
		assert_int_equal(dec(&idx.blk[k], src, dst, false), -EBADMSG);
		idx.blk[k].usize = save.usize + 1;
		assert_int_equal(dec(&idx.blk[k], src, dst, false), -EBADMSG);
		idx.blk[k] = save;
		/*
		 * Another start or tail width misplaces every bit; another level
		 * or tail may still decode, but only to the block's own bytes.
		 */
		for (unsigned int a = 0; a < 17; a++) {
			int rc;

			idx.blk[k].aux = save.aux ^ (1u << a);
			rc = dec(&idx.blk[k], src, dst, true);
			if (a < 3 || (a >= 7 && a < 10))
				assert_int_equal(rc, -EBADMSG);
			else if (rc == 0)
				assert_memory_equal(dst, d + save.uoff, save.usize);
		}
		idx.blk[k] = save;
		idx.blk[k].clen--;
		assert_int_not_equal(dec(&idx.blk[k], src, dst, true), 0);
		idx.blk[k].clen = 0; /* shorter than its own header */
		assert_int_equal(dec(&idx.blk[k], src, dst, true), -EBADMSG);
		idx.blk[k].clen = 13;
		assert_int_equal(dec(&idx.blk[k], src, dst, true), -EBADMSG);
		idx.blk[k] = save;
		assert_int_equal(decode(&idx, &f, k, &out), 0);
		free(out);
		free(dst);
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* ---- the index cache ---- */

static const struct bfs_icache_key key = { .dev = 1, .ino = 2, .mtime_sec = 3, .ctime_sec = 4 };

static void test_cache_round_trip(void **state)
{
	size_t len = 700000, elen;
	uint8_t *d = tb_text(len, 11), *e;
	struct bfs_icache_key k = key;
	struct tb_buf f = { 0 };
	struct bfs_index a, b;
	const char *why;

	(void)state;
	stream(&f, d, len, 2);
	stream(&f, d, 0, 9);
	scan(&f, &a);
	for (size_t i = 0; i < a.n; i++)
		assert_true(bfs_codec_bzip2.check_entry(&a.blk[i]));
	k.size = f.len;
	assert_int_equal(bfs_icache_encode(&k, &bfs_codec_bzip2, &a, &e, &elen), 0);
	bfs_index_init(&b, f.len);
	assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_bzip2, &b, &why), 0);
	assert_int_equal(b.source, BFS_SRC_CACHE);
	assert_int_equal(b.n, a.n);
	assert_int_equal(b.block_size, a.block_size);
	for (size_t i = 0; i < a.n; i++)
		assert_memory_equal(&b.blk[i], &a.blk[i], sizeof(a.blk[i]));
	check_blocks(&b, &f, d, len, b.n);
	bfs_index_destroy(&b);
	/* for a shorter file (another version) the entry is refused */
	k.size = f.len - 30;
	bfs_index_init(&b, f.len - 30);
	assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_bzip2, &b, &why), 1);
	bfs_index_destroy(&b);
	free(e);
	/* private bytes are not ours */
	bfs_index_init(&b, f.len);
	assert_int_equal(bfs_codec_bzip2.cache_load(&b, (const uint8_t *)"x", 1), 1);
	assert_int_equal(bfs_codec_bzip2.cache_load(&b, NULL, 0), 0);
	bfs_index_destroy(&b);
	bfs_index_destroy(&a);
	free(f.p);
	free(d);
}

/* Entries a walk cannot make are refused. */
static void test_check_entry(void **state)
{
	struct bfs_blk ok = { .coff = 4,
			      .clen = 1000,
			      .usize = 5000,
			      .aux = 3u | 9u << 3 | 2u << 7 | 1u << 10 };
	struct bfs_blk b;

	(void)state;
	assert_true(bfs_codec_bzip2.check_entry(&ok));
	b = ok, b.aux = 3u | 0u << 3; /* level 0 */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.aux = 3u | 10u << 3; /* level 10 */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.aux = ok.aux | 4u << 10; /* tail wider than its bits */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.aux = ok.aux | 1u << 17; /* unused bits */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.flags = BFS_BLK_CSUM;
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.clen = 10; /* shorter than a block header */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.clen = 0;
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.aux = 1u << 3, b.clen = 3 * 1024 * 1024; /* level 1 blocks are smaller */
	assert_false(bfs_codec_bzip2.check_entry(&b));
	b = ok, b.aux = 1u << 3, b.usize = 6000000; /* more than 100000 runs of 5 make */
	assert_false(bfs_codec_bzip2.check_entry(&b));
}

/* ---- the walk's spill (index.h, kept) ---- */

/* Every block of @idx in [0, @good) kept, whole and as a prefix, equal to @d at its place. */
static void check_kept(const struct bfs_index *idx, const uint8_t *d, size_t good)
{
	for (size_t k = 0; k < good; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *out = malloc(b->usize);

		assert_non_null(out);
		assert_true(bfs_index_kept(idx, k));
		assert_true(bfs_index_kept_read(idx, k, out, b->usize));
		assert_memory_equal(out, d + b->uoff, b->usize);
		memset(out, 0, b->usize);
		assert_true(bfs_index_kept_read(idx, k, out, (b->usize + 1) / 2));
		assert_memory_equal(out, d + b->uoff, (b->usize + 1) / 2);
		free(out);
	}
}

/*
 * With a spill, the walk keeps every block it proves: exactly its bytes,
 * none of a block that does not decode, none past the damage; nothing
 * for a block bigger than it keeps, a small file, or with spilling off.
 */
static void test_kept(void **state)
{
	char dir[] = "/tmp/bfs-bzip2-kept-XXXXXX";
	size_t len = 1300000, zlen = 30u << 20;
	uint8_t *d = tb_random(len, 5), *z = calloc(1, zlen), *dz = malloc(len + zlen);
	struct tb_buf f = { 0 }, g = { 0 }, small = { 0 };
	struct bfs_index idx;
	size_t good;

	(void)state;
	assert_non_null(z);
	assert_non_null(dz);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(bfs_spill_configure(dir, 1ull << 30), 0);
	stream(&f, d, len, 1);
	assert_true(f.len >= BFS_KEPT_MIN);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_true(idx.n >= 12);
	check_kept(&idx, d, idx.n);
	bfs_index_destroy(&idx);

	/* a 30 MiB block of zeros after them: more than the walk keeps, decoded when read */
	memcpy(dz, d, len);
	memcpy(dz + len, z, zlen);
	g = f;
	g.p = malloc(f.len);
	assert_non_null(g.p);
	memcpy(g.p, f.p, f.len);
	g.cap = g.len;
	stream(&g, z, zlen, 9);
	scan(&g, &idx);
	assert_false(idx.broken);
	check_kept(&idx, dz, idx.n - 1);
	assert_true(idx.blk[idx.n - 1].usize == zlen);
	assert_false(bfs_index_kept(&idx, idx.n - 1));
	check_blocks(&idx, &g, dz, len + zlen, idx.n);
	bfs_index_destroy(&idx);

	/* a flipped byte in the middle: the blocks before it kept, nothing after */
	f.p[f.len / 2] ^= 0x10;
	scan(&f, &idx);
	assert_true(idx.broken);
	good = count_blocks(&idx);
	assert_true(good >= 3);
	check_kept(&idx, d, good);
	for (size_t k = good; k < idx.n; k++)
		assert_false(bfs_index_kept(&idx, k));
	bfs_index_destroy(&idx);
	f.p[f.len / 2] ^= 0x10;

	/* a small file keeps nothing, nor does a mount without a spill */
	stream(&small, d, 100000, 1);
	scan(&small, &idx);
	assert_null(idx.kept);
	bfs_index_destroy(&idx);
	assert_int_equal(bfs_spill_configure(dir, 0), 0);
	scan(&f, &idx);
	assert_null(idx.kept);
	assert_false(bfs_index_kept(&idx, 0));
	bfs_index_destroy(&idx);
	bfs_spill_shutdown();
	assert_int_equal(rmdir(dir), 0);
	free(small.p);
	free(g.p);
	free(f.p);
	free(dz);
	free(z);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_bit_offsets),
		cmocka_unit_test(test_several_streams),
		cmocka_unit_test(test_empty_streams),
		cmocka_unit_test(test_trailing_bytes),
		cmocka_unit_test(test_false_magic),
		cmocka_unit_test(test_flipped_bits),
		cmocka_unit_test(test_stream_crc),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_decode_lies_and_prefix),
		cmocka_unit_test(test_cache_round_trip),
		cmocka_unit_test(test_check_entry),
		cmocka_unit_test(test_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

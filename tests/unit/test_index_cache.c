// SPDX-License-Identifier: MIT
/*
 * The index cache: the entry format (round trip, every truncation, every
 * flipped byte, wrong identity, wrong codec, entries that are well formed
 * but wrong) and the directory (save, load, atomic replacement, refusals,
 * the bound and its trims, the default place); directory memos likewise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/index_cache.h"
#include "blockfs/xxh32.h"

#define FILE_SIZE (1u << 20)
#define NBLK	  12
#define BMAX	  65536u

static const struct bfs_icache_key key0 = {
	.dev = 0xfe01,
	.ino = 123456,
	.size = FILE_SIZE,
	.mtime_sec = 1700000000,
	.mtime_nsec = 123456789,
	.ctime_sec = 1700000001,
	.ctime_nsec = 987654321,
};

/*
 * An index as an LZ4 walk of stock lz4 -B4 output leaves it: full 64 KiB
 * blocks of various compressed lengths, a short last one, checksums on.
 */
static void lz4_index(struct bfs_index *idx)
{
	uint64_t coff = 7;

	bfs_index_init(idx, FILE_SIZE);
	for (int k = 0; k < NBLK; k++) {
		uint32_t dlen = 20000 + 1000u * (uint32_t)k;
		uint32_t clen = 4 + dlen + 4;
		uint32_t usize = k == NBLK - 1 ? 1234 : BMAX;

		assert_int_equal(bfs_index_add(idx, coff, clen, usize, BFS_BLK_CSUM), 0);
		idx->blk[idx->n - 1].aux = BMAX;
		coff += clen;
	}
	idx->block_size = BMAX;
}

static void encode(const struct bfs_index *idx, const struct bfs_codec *c, uint8_t **buf,
		   size_t *len)
{
	assert_int_equal(bfs_icache_encode(&key0, c, idx, buf, len), 0);
}

/* Recompute the trailing checksum, as someone who forges an entry would. */
static void resign(uint8_t *buf, size_t len)
{
	bfs_put_le32(buf + len - 4, bfs_xxh32(buf, len - 4, 0));
}

static int decode(const uint8_t *buf, size_t len, const struct bfs_icache_key *k,
		  const struct bfs_codec *c, struct bfs_index *idx)
{
	const char *why = NULL;
	int rc;

	bfs_index_init(idx, k->size);
	rc = bfs_icache_decode(buf, len, k, c, idx, &why);
	if (rc == 1)
		assert_non_null(why);
	if (rc != 0)
		assert_int_equal(idx->n, 0); /* rejected: nothing was kept */
	return rc;
}

static void test_round_trip(void **state)
{
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	assert_int_equal(len, BFS_ICACHE_HDR_LEN + NBLK * BFS_ICACHE_ENTRY_LEN + 4);
	assert_memory_equal(buf, "BFSINDEX", 8);
	assert_int_equal(decode(buf, len, &key0, &bfs_codec_lz4, &b), 0);
	assert_int_equal(b.n, a.n);
	assert_int_equal(atomic_load(&b.usize), atomic_load(&a.usize));
	assert_int_equal(b.block_size, BMAX);
	assert_int_equal(b.source, BFS_SRC_CACHE);
	for (size_t k = 0; k < a.n; k++) {
		assert_int_equal(b.blk[k].coff, a.blk[k].coff);
		assert_int_equal(b.blk[k].clen, a.blk[k].clen);
		assert_int_equal(b.blk[k].usize, a.blk[k].usize);
		assert_int_equal(b.blk[k].uoff, a.blk[k].uoff);
		assert_int_equal(b.blk[k].flags, a.blk[k].flags);
		assert_int_equal(b.blk[k].aux, a.blk[k].aux);
	}
	/* full blocks and a last one: nothing to doubt */
	assert_int_equal(atomic_load(&b.nexact), NBLK);
	free(buf);
	bfs_index_destroy(&a);
	bfs_index_destroy(&b);
}

static void test_every_truncation_rejected(void **state)
{
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	for (size_t cut = 0; cut < len; cut++) {
		assert_int_equal(decode(buf, cut, &key0, &bfs_codec_lz4, &b), 1);
		bfs_index_destroy(&b);
	}
	/* and one byte too many */
	buf = realloc(buf, len + 1);
	assert_non_null(buf);
	buf[len] = 0;
	assert_int_equal(decode(buf, len + 1, &key0, &bfs_codec_lz4, &b), 1);
	bfs_index_destroy(&b);
	free(buf);
	bfs_index_destroy(&a);
}

/* Every byte flipped (three ways): the checksum rejects each one. */
static void test_every_flipped_byte_rejected(void **state)
{
	static const uint8_t flips[] = { 0x01, 0x80, 0xff };
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	for (size_t i = 0; i < len; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			buf[i] ^= flips[f];
			assert_int_equal(decode(buf, len, &key0, &bfs_codec_lz4, &b), 1);
			bfs_index_destroy(&b);
			buf[i] ^= flips[f];
		}
	}
	free(buf);
	bfs_index_destroy(&a);
}

/*
 * Every byte flipped and the checksum forged to match: what is accepted
 * anyway places every block where the true entry does (sizes are covered
 * twice, by each entry and by the total), or leaves the odd size a claim
 * that is measured before it is relied on.
 */
static void test_every_forged_flip_places_blocks_right(void **state)
{
	static const uint8_t flips[] = { 0x01, 0x10, 0x80, 0xff };
	struct bfs_index a, b;
	size_t len, accepted = 0;
	uint8_t *buf;

	(void)state;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	for (size_t i = 0; i < len - 4; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			buf[i] ^= flips[f];
			resign(buf, len);
			if (decode(buf, len, &key0, &bfs_codec_lz4, &b) == 0) {
				size_t nexact = atomic_load(&b.nexact);

				accepted++;
				assert_int_equal(b.n, a.n);
				assert_int_equal(atomic_load(&b.usize), atomic_load(&a.usize));
				for (size_t k = 0; k < b.n; k++) {
					const struct bfs_blk *x = &b.blk[k];

					assert_true(bfs_range_ok(x->coff, x->clen, FILE_SIZE));
					assert_true(x->usize == a.blk[k].usize ||
						    (k >= nexact && (x->flags & BFS_BLK_CLAIMED)));
					assert_int_equal(x->uoff, a.blk[k].uoff);
				}
			}
			bfs_index_destroy(&b);
			buf[i] ^= flips[f];
		}
	}
	/* some fields (coff, flags, block size) can flip into other valid values */
	assert_true(accepted > 0);
	free(buf);
	bfs_index_destroy(&a);
}

static void test_wrong_identity_rejected(void **state)
{
	struct bfs_icache_key k[7];
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	for (int i = 0; i < 7; i++)
		k[i] = key0;
	k[0].dev++;
	k[1].ino++;
	k[2].size--; /* within the entry's bounds still */
	k[3].mtime_sec++;
	k[4].mtime_nsec++;
	k[5].ctime_sec--; /* replaced by a file of the same size and mtime */
	k[6].ctime_nsec++;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(decode(buf, len, &k[i], &bfs_codec_lz4, &b), 1);
		bfs_index_destroy(&b);
	}
	free(buf);
	bfs_index_destroy(&a);
}

static void test_wrong_codec_rejected(void **state)
{
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	lz4_index(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	assert_int_equal(decode(buf, len, &key0, &bfs_codec_bgzf, &b), 1);
	bfs_index_destroy(&b);
	assert_int_equal(decode(buf, len, &key0, &bfs_codec_gzip, &b), 1);
	bfs_index_destroy(&b);
	free(buf);
	bfs_index_destroy(&a);
}

/* A block rewritten (and the entry re-signed) the way @fn says must be refused. */
static void expect_forged_rejected(void (*fn)(struct bfs_index *idx), uint64_t file_size)
{
	struct bfs_icache_key k = key0;
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	lz4_index(&a);
	fn(&a);
	encode(&a, &bfs_codec_lz4, &buf, &len);
	k.size = file_size;
	assert_int_equal(decode(buf, len, &k, &bfs_codec_lz4, &b), 1);
	bfs_index_destroy(&b);
	free(buf);
	bfs_index_destroy(&a);
}

static void overlap(struct bfs_index *idx)
{
	idx->blk[3].coff = idx->blk[2].coff + 1;
}

static void past_end(struct bfs_index *idx)
{
	idx->blk[NBLK - 1].coff = FILE_SIZE - 10;
}

static void over_bmax(struct bfs_index *idx)
{
	idx->blk[1].aux = 1000; /* not a block max lz4 has */
}

static void usize_over_bmax(struct bfs_index *idx)
{
	idx->blk[1].usize = BMAX + 1;
}

static void poisoned(struct bfs_index *idx)
{
	idx->blk[1].flags |= BFS_BLK_BAD;
}

static void guess_unclaimed(struct bfs_index *idx)
{
	idx->blk[1].flags |= BFS_BLK_GUESS;
}

/* encode refuses what no walk keeps; so forge those flags after encoding */
static void test_forged_entries_rejected(void **state)
{
	(void)state;
	expect_forged_rejected(overlap, FILE_SIZE);
	expect_forged_rejected(past_end, FILE_SIZE);
	expect_forged_rejected(over_bmax, FILE_SIZE);
	expect_forged_rejected(usize_over_bmax, FILE_SIZE);
	/* more blocks than a file this small can hold (4 bytes each at least) */
	expect_forged_rejected(overlap, 40);
}

static void test_encode_refuses_damaged(void **state)
{
	struct bfs_index a;
	uint8_t *buf = NULL;
	size_t len;

	(void)state;
	lz4_index(&a);
	poisoned(&a);
	assert_int_equal(bfs_icache_encode(&key0, &bfs_codec_lz4, &a, &buf, &len), -EINVAL);
	bfs_index_destroy(&a);
	lz4_index(&a);
	bfs_index_mark_broken(&a, FILE_SIZE - 1, "test");
	assert_int_equal(bfs_icache_encode(&key0, &bfs_codec_lz4, &a, &buf, &len), -EINVAL);
	bfs_index_destroy(&a);
	lz4_index(&a);
	guess_unclaimed(&a);
	assert_int_equal(bfs_icache_encode(&key0, &bfs_codec_lz4, &a, &buf, &len), 0);
	{
		struct bfs_index b;

		/* a guess nobody claims would be trusted without a measure: refused */
		assert_int_equal(decode(buf, len, &key0, &bfs_codec_lz4, &b), 1);
		bfs_index_destroy(&b);
	}
	free(buf);
	bfs_index_destroy(&a);
}

/* Sizes only the entry states are doubted as a seek table's are. */
static void test_odd_sizes_become_claims(void **state)
{
	struct bfs_index a, b;
	uint8_t *buf;
	size_t len;

	(void)state;
	lz4_index(&a);
	a.blk[4].usize = 1000; /* a writer that flushed (the sum changes too) */
	a.usize -= BMAX - 1000;
	for (size_t k = 5; k < a.n; k++)
		a.blk[k].uoff -= BMAX - 1000;
	encode(&a, &bfs_codec_lz4, &buf, &len);
	assert_int_equal(decode(buf, len, &key0, &bfs_codec_lz4, &b), 0);
	assert_int_equal(b.blk[4].flags & (BFS_BLK_GUESS | BFS_BLK_CLAIMED),
			 BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(atomic_load(&b.nexact), 4);
	free(buf);
	bfs_index_destroy(&a);
	bfs_index_destroy(&b);
}

/* --- the directory -------------------------------------------------------- */

struct dirfx {
	char dir[64];
	char file[96];
	int fd;
	struct stat st;
};

static int dir_setup(void **state)
{
	struct dirfx *d = calloc(1, sizeof(*d));
	static const char data[4096];

	assert_non_null(d);
	snprintf(d->dir, sizeof(d->dir), "/tmp/test_icache.XXXXXX");
	assert_non_null(mkdtemp(d->dir));
	assert_int_equal(chmod(d->dir, 0700), 0);
	snprintf(d->file, sizeof(d->file), "%s/backing", d->dir);
	d->fd = open(d->file, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(d->fd >= 0);
	for (unsigned int i = 0; i < FILE_SIZE / 4096; i++)
		assert_int_equal(write(d->fd, data, sizeof(data)), sizeof(data));
	assert_int_equal(fstat(d->fd, &d->st), 0);
	*state = d;
	return 0;
}

static int dir_teardown(void **state)
{
	struct dirfx *d = *state;
	char cmd[128];

	close(d->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

/* The number the shell command printf(@fmt, ...) prints. */
__attribute__((format(printf, 1, 2))) static size_t shell_number(const char *fmt, ...)
{
	char cmd[192];
	va_list ap;
	FILE *p;
	size_t n = 0;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%zu", &n), 1);
	pclose(p);
	return n;
}

/* Index entries in @dir, and the sum of their sizes. */
static size_t count_entries(const char *dir)
{
	return shell_number("ls -A '%s' | grep -c '\\.idx$'", dir);
}

static size_t entry_bytes(const char *dir)
{
	return shell_number("find '%s' -name '*.idx' -printf '%%s\\n' | "
			    "awk '{ s += $1 } END { print s + 0 }'",
			    dir);
}

static void test_save_then_load(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c;
	struct bfs_index a, b;
	char err[256];

	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	lz4_index(&a);
	bfs_index_init(&b, FILE_SIZE);
	assert_int_equal(bfs_icache_load(c, &d->st, &bfs_codec_lz4, &b), 1); /* none yet */
	/* a cheap walk is not kept */
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a,
					 BFS_ICACHE_MIN_READS - 1),
			 1);
	assert_int_equal(count_entries(d->dir), 0);
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 0);
	assert_int_equal(count_entries(d->dir), 1);
	assert_int_equal(bfs_icache_load(c, &d->st, &bfs_codec_lz4, &b), 0);
	assert_int_equal(b.n, NBLK);
	assert_int_equal(b.source, BFS_SRC_CACHE);
	bfs_index_destroy(&b);
	/* saved again (a new version of the file): replaced, not added to */
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 0);
	assert_int_equal(count_entries(d->dir), 1);
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

static void test_no_save_of_table_or_changed_file(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c;
	struct bfs_index a;
	struct stat old = d->st;
	char err[256];

	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	lz4_index(&a);
	a.source = BFS_SRC_SEEKTABLE; /* already cheap to open */
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 1);
	assert_int_equal(count_entries(d->dir), 0);
	a.source = BFS_SRC_WALK;
	/* the file changed during the walk: the index belongs to neither version */
	usleep(20000); /* file times tick with the kernel's coarse clock */
	assert_int_equal(pwrite(d->fd, "x", 1, 0), 1);
	assert_int_equal(bfs_icache_save(c, d->fd, &old, &bfs_codec_lz4, &a, 100), 1);
	assert_int_equal(count_entries(d->dir), 0);
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

static void test_stale_entry_ignored(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c;
	struct bfs_index a, b;
	struct stat now;
	char err[256];

	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	lz4_index(&a);
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 0);
	/* same size, mtime put back: ctime still moves */
	usleep(20000); /* file times tick with the kernel's coarse clock */
	assert_int_equal(pwrite(d->fd, "y", 1, 0), 1);
	assert_int_equal(futimens(d->fd, (struct timespec[]){ d->st.st_atim, d->st.st_mtim }), 0);
	assert_int_equal(fstat(d->fd, &now), 0);
	assert_int_equal(now.st_size, d->st.st_size);
	bfs_index_init(&b, FILE_SIZE);
	assert_int_equal(bfs_icache_load(c, &now, &bfs_codec_lz4, &b), 1);
	assert_int_equal(b.n, 0);
	bfs_index_destroy(&b);
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

static void test_open_refuses_shared_dir(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c = NULL;
	char err[256];

	assert_int_equal(chmod(d->dir, 0777), 0);
	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "written by others"));
	assert_int_equal(chmod(d->dir, 0700), 0);
	assert_int_equal(bfs_icache_open(&c, d->file, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(bfs_icache_open(&c, "/nonexistent/blockfs", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/blockfs"));
}

/* A directory that cannot be written: nothing saved, no temporary left. */
static void test_unwritable_dir_degrades(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c;
	struct bfs_index a;
	char err[256], sub[96];

	snprintf(sub, sizeof(sub), "%s/ro", d->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(bfs_icache_open(&c, sub, err, sizeof(err)), 0);
	assert_int_equal(chmod(sub, 0500), 0);
	lz4_index(&a);
	if (geteuid() != 0) { /* root writes anyway: the mount test uses a ro mount */
		/* the first failure says why and turns saving off; the next is skipped */
		assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100),
				 -EACCES);
		assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 1);
		assert_int_equal(count_entries(sub), 0);
	}
	bfs_index_destroy(&a);
	bfs_icache_free(c);
	assert_int_equal(chmod(sub, 0700), 0);
}

/* --- directory memos --------------------------------------------------------- */

#define MEMO_N 5

static const struct bfs_dirmemo_key dkey0 = {
	.dev = 0xfe00,
	.ino = 77,
	.mtime_sec = 1700000000,
	.mtime_nsec = 5,
	.ctime_sec = 1700000001,
	.ctime_nsec = 6,
	.n = MEMO_N,
	.names = 0x1234abcd,
	.rules = 0,
};

/* One of each kind: unknown, stamped (twice), sized, sized empty. */
static void memo_ents(struct bfs_dirmemo_ent *e)
{
	e[0] = (struct bfs_dirmemo_ent){ 0 };
	e[1] = (struct bfs_dirmemo_ent){ .stamp = 11, .flags = BFS_DIRMEMO_STAMPED };
	e[2] = (struct bfs_dirmemo_ent){ .stamp = 12, .flags = BFS_DIRMEMO_STAMPED };
	e[3] = (struct bfs_dirmemo_ent){ .stamp = 13,
					 .size = 4096,
					 .flags = BFS_DIRMEMO_STAMPED | BFS_DIRMEMO_SIZED };
	e[4] = (struct bfs_dirmemo_ent){ .stamp = 14,
					 .size = 0,
					 .flags = BFS_DIRMEMO_STAMPED | BFS_DIRMEMO_SIZED };
}

static void memo_encode(uint8_t **buf, size_t *len)
{
	struct bfs_dirmemo_ent e[MEMO_N];

	memo_ents(e);
	assert_int_equal(bfs_dirmemo_encode(&dkey0, e, buf, len), 0);
	assert_int_equal(*len, BFS_DIRMEMO_HDR_LEN + MEMO_N * BFS_DIRMEMO_ENTRY_LEN + 4);
}

static void test_memo_round_trip(void **state)
{
	struct bfs_dirmemo_ent want[MEMO_N], got[MEMO_N];
	const char *why = NULL;
	uint8_t *buf;
	size_t len;

	(void)state;
	memo_ents(want);
	memo_encode(&buf, &len);
	assert_int_equal(bfs_dirmemo_decode(buf, len, &dkey0, got, &why), 0);
	for (size_t i = 0; i < MEMO_N; i++) {
		assert_int_equal(got[i].flags, want[i].flags);
		assert_int_equal(got[i].stamp, want[i].stamp);
		assert_int_equal(got[i].size, want[i].size);
	}
	free(buf);
}

/* An entry with no stamp (a file never looked up) is kept as unknown, size and all. */
static void test_memo_keeps_only_what_holds(void **state)
{
	struct bfs_dirmemo_ent e[MEMO_N], got[MEMO_N];
	const char *why = NULL;
	uint8_t *buf;
	size_t len;

	(void)state;
	memo_ents(e);
	e[1].flags |= BFS_DIRMEMO_SIZED;
	e[1].size = 99;
	e[2].stamp = 0; /* stamped, but with no stamp */
	e[2].size = 5;
	e[2].flags |= BFS_DIRMEMO_SIZED;
	assert_int_equal(bfs_dirmemo_encode(&dkey0, e, &buf, &len), 0);
	assert_int_equal(bfs_dirmemo_decode(buf, len, &dkey0, got, &why), 0);
	assert_int_equal(got[1].flags, BFS_DIRMEMO_STAMPED | BFS_DIRMEMO_SIZED);
	assert_int_equal(got[1].size, 99);
	assert_int_equal(got[2].flags, 0);
	assert_int_equal(got[2].size, 0);
	free(buf);
}

static void test_memo_every_truncation_rejected(void **state)
{
	struct bfs_dirmemo_ent got[MEMO_N];
	const char *why;
	uint8_t *buf;
	size_t len;

	(void)state;
	memo_encode(&buf, &len);
	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(bfs_dirmemo_decode(buf, cut, &dkey0, got, &why), 1);
	buf = realloc(buf, len + 1);
	assert_non_null(buf);
	buf[len] = 0;
	assert_int_equal(bfs_dirmemo_decode(buf, len + 1, &dkey0, got, &why), 1);
	free(buf);
}

static void test_memo_every_flipped_byte_rejected(void **state)
{
	static const uint8_t flips[] = { 0x01, 0x80, 0xff };
	struct bfs_dirmemo_ent got[MEMO_N];
	const char *why;
	uint8_t *buf;
	size_t len;

	(void)state;
	memo_encode(&buf, &len);
	for (size_t i = 0; i < len; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			buf[i] ^= flips[f];
			assert_int_equal(bfs_dirmemo_decode(buf, len, &dkey0, got, &why), 1);
			buf[i] ^= flips[f];
		}
	}
	free(buf);
}

/* Every flip with the checksum forged to match: the checks behind it still refuse it. */
static void test_memo_forged_flips_rejected(void **state)
{
	struct bfs_dirmemo_ent got[MEMO_N];
	const char *why;
	uint8_t *buf;
	size_t len, ok = 0;

	(void)state;
	memo_encode(&buf, &len);
	for (size_t i = 0; i < len - 4; i++) {
		uint8_t was = buf[i];

		buf[i] ^= 0x40;
		bfs_put_le32(buf + len - 4, bfs_xxh32(buf, len - 4, 0));
		if (bfs_dirmemo_decode(buf, len, &dkey0, got, &why) == 0) {
			/* only a stamp or a size may change unseen: a file's stamp then misses */
			size_t at = i - BFS_DIRMEMO_HDR_LEN;

			assert_true(i >= BFS_DIRMEMO_HDR_LEN && at % BFS_DIRMEMO_ENTRY_LEN < 16);
			ok++;
		}
		buf[i] = was;
	}
	assert_true(ok > 0);
	free(buf);
}

/* Another directory, version, name list or gzip= rule: ignored. */
static void test_memo_wrong_key_rejected(void **state)
{
	struct bfs_dirmemo_ent got[MEMO_N];
	struct bfs_dirmemo_key k;
	const char *why;
	uint8_t *buf;
	size_t len;

	(void)state;
	memo_encode(&buf, &len);
	k = dkey0, k.ino++;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	k = dkey0, k.mtime_nsec++;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	k = dkey0, k.ctime_sec--;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	k = dkey0, k.names ^= 1;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	k = dkey0, k.rules = 1;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	k = dkey0, k.n = MEMO_N - 1;
	assert_int_equal(bfs_dirmemo_decode(buf, len, &k, got, &why), 1);
	free(buf);
}

static void test_memo_save_then_load(void **state)
{
	struct dirfx *d = *state;
	struct bfs_dirmemo_ent e[MEMO_N], got[MEMO_N];
	struct bfs_icache *c;
	char err[256];

	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	memo_ents(e);
	assert_int_equal(bfs_icache_dir_load(c, &dkey0, got), 1); /* none yet */
	assert_int_equal(bfs_icache_dir_save(c, &dkey0, e), 0);
	assert_int_equal(bfs_icache_dir_load(c, &dkey0, got), 0);
	assert_int_equal(got[3].size, 4096);
	assert_int_equal(bfs_icache_dir_save(NULL, &dkey0, e), 1);
	assert_int_equal(bfs_icache_dir_load(NULL, &dkey0, got), 1);
	bfs_icache_free(c);
}

/* Make @name in @dir: @size bytes, last modified @age seconds ago. */
static void make_aged(const char *dir, const char *name, size_t size, time_t age)
{
	static const char zeros[4096];
	struct timespec t[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = time(NULL) - age } };
	char path[192];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (size_t done = 0; done < size; done += sizeof(zeros))
		assert_int_equal(write(fd, zeros, sizeof(zeros)), sizeof(zeros));
	assert_int_equal(futimens(fd, t), 0);
	close(fd);
}

static bool present(const char *dir, const char *name)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

#define OLD1 "0000000000000001-0000000000000001.idx"
#define OLD2 "0000000000000001-0000000000000002.dir"
#define OLD3 "0000000000000001-0000000000000003.idx"

/*
 * Past the bound, a save drops the least recently used entries down to
 * three quarters of it; files that are not entries stay, temporary files
 * an hour old go, an entry larger than the bound is not kept.
 */
static void test_bound_drops_least_recently_used(void **state)
{
	struct dirfx *d = *state;
	struct bfs_icache *c;
	struct bfs_index a;
	char err[256];

	make_aged(d->dir, OLD1, 24 << 10, 3000);
	make_aged(d->dir, OLD2, 24 << 10, 2000);
	make_aged(d->dir, OLD3, 24 << 10, 1000);
	make_aged(d->dir, "notes.txt", 32 << 10, 9000); /* not ours */
	make_aged(d->dir, "0000000000000001-0000000000000004.txt", 4096, 9000);
	make_aged(d->dir, ".tmp-1-1", 4096, 7200); /* a dead writer's */
	make_aged(d->dir, ".tmp-1-2", 4096, 10);   /* a live one's */
	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	bfs_icache_set_limit(c, 64 << 10);
	lz4_index(&a);
	/* 72 KiB and this entry: past 64 KiB, so down to 48 KiB */
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 0);
	assert_false(present(d->dir, OLD1));
	assert_false(present(d->dir, OLD2));
	assert_true(present(d->dir, OLD3));
	assert_int_equal(count_entries(d->dir), 2); /* OLD3 and the new one */
	assert_true(present(d->dir, "notes.txt"));
	assert_true(present(d->dir, "0000000000000001-0000000000000004.txt"));
	assert_false(present(d->dir, ".tmp-1-1"));
	assert_true(present(d->dir, ".tmp-1-2"));
	/* an entry larger than the bound is not kept; the one there stays */
	bfs_icache_set_limit(c, 100);
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 1);
	assert_int_equal(count_entries(d->dir), 2);
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

#define SAVERS 4
#define SAVES  8

struct saver {
	struct bfs_icache *c;
	struct bfs_index *idx;
	char dir[96];
	int id, failed; /* asserts belong to the main thread */
};

/* Save the index of SAVES files of its own (sparse, FILE_SIZE bytes). */
static void *save_many(void *arg)
{
	struct saver *s = arg;

	for (int i = 0; i < SAVES; i++) {
		char path[128];
		struct stat st;
		int fd;

		snprintf(path, sizeof(path), "%s/f%d-%d", s->dir, s->id, i);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || ftruncate(fd, FILE_SIZE) < 0 || fstat(fd, &st) < 0 ||
		    bfs_icache_save(s->c, fd, &st, &bfs_codec_lz4, s->idx, 100) != 0)
			s->failed++;
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/*
 * Threads saving at once past the bound: every save succeeds, and what is
 * left is within the bound but for entries written while the last trim
 * listed the directory (one per thread at most).
 */
static void test_bound_under_concurrent_saves(void **state)
{
	struct dirfx *d = *state;
	struct saver sv[SAVERS];
	pthread_t t[SAVERS];
	struct bfs_icache *c;
	struct bfs_index a;
	char err[256], sub[96];
	size_t one, left;

	snprintf(sub, sizeof(sub), "%s/files", d->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	lz4_index(&a);
	one = BFS_ICACHE_HDR_LEN + NBLK * BFS_ICACHE_ENTRY_LEN + BFS_ICACHE_CSUM_LEN;
	bfs_icache_set_limit(c, 4 * one);
	for (int i = 0; i < SAVERS; i++) {
		sv[i] = (struct saver){ .c = c, .idx = &a, .id = i };
		snprintf(sv[i].dir, sizeof(sv[i].dir), "%s", sub);
		assert_int_equal(pthread_create(&t[i], NULL, save_many, &sv[i]), 0);
	}
	for (int i = 0; i < SAVERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(sv[i].failed, 0);
	}
	left = entry_bytes(d->dir);
	assert_true(left >= one);
	assert_true(left <= 4 * one + SAVERS * one);
	assert_true(count_entries(d->dir) < SAVERS * SAVES); /* some were dropped */
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

/* Reading an entry an hour old renews its mtime: it is used, not dropped first. */
static void test_load_marks_entry_used(void **state)
{
	struct dirfx *d = *state;
	struct timespec t[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = time(NULL) - 7200 } };
	struct bfs_icache *c;
	struct bfs_index a, b;
	struct stat est;
	char err[256], path[192];

	assert_int_equal(bfs_icache_open(&c, d->dir, err, sizeof(err)), 0);
	bfs_icache_set_limit(c, 1 << 20);
	lz4_index(&a);
	assert_int_equal(bfs_icache_save(c, d->fd, &d->st, &bfs_codec_lz4, &a, 100), 0);
	snprintf(path, sizeof(path), "%s/%016llx-%016llx.idx", d->dir,
		 (unsigned long long)d->st.st_dev, (unsigned long long)d->st.st_ino);
	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
	bfs_index_init(&b, FILE_SIZE);
	assert_int_equal(bfs_icache_load(c, &d->st, &bfs_codec_lz4, &b), 0);
	assert_int_equal(stat(path, &est), 0);
	assert_true(est.st_mtim.tv_sec > time(NULL) - 60);
	bfs_index_destroy(&b);
	bfs_index_destroy(&a);
	bfs_icache_free(c);
}

/* $XDG_CACHE_HOME/blockfs, else $HOME/.cache/blockfs; relative paths ignored. */
static void test_default_dir(void **state)
{
	struct dirfx *d = *state;
	char err[256], want[192], home[128];
	struct stat st;
	char *got = NULL;

	snprintf(want, sizeof(want), "%s/xdg", d->dir);
	assert_int_equal(setenv("XDG_CACHE_HOME", want, 1), 0);
	assert_int_equal(bfs_icache_default_dir(&got, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/xdg/blockfs", d->dir);
	assert_string_equal(got, want);
	assert_int_equal(stat(got, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	free(got);

	snprintf(home, sizeof(home), "%s/home", d->dir);
	assert_int_equal(mkdir(home, 0755), 0);
	assert_int_equal(setenv("XDG_CACHE_HOME", "relative/cache", 1), 0);
	assert_int_equal(setenv("HOME", home, 1), 0);
	assert_int_equal(bfs_icache_default_dir(&got, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/.cache/blockfs", home);
	assert_string_equal(got, want);
	free(got);
	snprintf(want, sizeof(want), "%s/.cache", home);
	assert_int_equal(stat(want, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);

	/* a HOME that is not there is not made */
	snprintf(home, sizeof(home), "%s/gone", d->dir);
	assert_int_equal(setenv("HOME", home, 1), 0);
	assert_int_equal(bfs_icache_default_dir(&got, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, home));
	assert_int_equal(access(home, F_OK), -1);

	assert_int_equal(unsetenv("XDG_CACHE_HOME"), 0);
	assert_int_equal(unsetenv("HOME"), 0);
	assert_int_equal(bfs_icache_default_dir(&got, err, sizeof(err)), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_memo_round_trip),
		cmocka_unit_test(test_memo_keeps_only_what_holds),
		cmocka_unit_test(test_memo_every_truncation_rejected),
		cmocka_unit_test(test_memo_every_flipped_byte_rejected),
		cmocka_unit_test(test_memo_forged_flips_rejected),
		cmocka_unit_test(test_memo_wrong_key_rejected),
		cmocka_unit_test_setup_teardown(test_memo_save_then_load, dir_setup, dir_teardown),
		cmocka_unit_test(test_every_truncation_rejected),
		cmocka_unit_test(test_every_flipped_byte_rejected),
		cmocka_unit_test(test_every_forged_flip_places_blocks_right),
		cmocka_unit_test(test_wrong_identity_rejected),
		cmocka_unit_test(test_wrong_codec_rejected),
		cmocka_unit_test(test_forged_entries_rejected),
		cmocka_unit_test(test_encode_refuses_damaged),
		cmocka_unit_test(test_odd_sizes_become_claims),
		cmocka_unit_test_setup_teardown(test_save_then_load, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_bound_drops_least_recently_used, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_load_marks_entry_used, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_bound_under_concurrent_saves, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_default_dir, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_no_save_of_table_or_changed_file, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_stale_entry_ignored, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_open_refuses_shared_dir, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_unwritable_dir_degrades, dir_setup,
						dir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

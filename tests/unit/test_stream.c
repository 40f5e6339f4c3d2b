// SPDX-License-Identifier: MIT
/*
 * Threads reading file versions at once through the shared pieces: their
 * streams, the work queue decoding ahead (into the block cache, or pushed
 * to a fake page cache that checks every slice), the block cache and the
 * mmap table. Written for ThreadSanitizer (tools/test.sh runs the unit
 * suite in build-tsan), so the files are small and the threads many;
 * every byte read or pushed is checked against the original, and each
 * test asserts the path it meant to exercise was taken (blocks decoded
 * ahead, bytes pushed, mappings bounded and used).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lz4frame.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/hints.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"
#include "blockfs/push.h"
#include "blockfs/stream.h"
#include "blockfs/workq.h"
#include "builders.h"

#define NFILES	 4
#define FILE_LEN (1u << 20) /* 16 blocks of 64 KiB */
#define NTHREADS 6
#define READS	 150

struct fx {
	struct bfs_file_env env;
	uint8_t *orig[NFILES];
	struct bfs_file *f[NFILES];
	atomic_int bad_pushes; /* slices misaligned, out of range or wrong */
	atomic_uint_fast64_t pushed;
};

/*
 * The kernel's side of notify_store, as far as a test can tell: every
 * slice starts on a page, is whole pages unless it ends the file, lies in
 * the file, and holds the file's bytes. Inode i + 1 is file i.
 */
static int fake_push(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	struct fx *x = ctx;
	int i = (int)ino - 1;

	if (i < 0 || i >= NFILES || off % BFS_PAGE || len == 0 || off + len > FILE_LEN ||
	    (len % BFS_PAGE && off + len != FILE_LEN) || memcmp(buf, x->orig[i] + off, len))
		atomic_fetch_add(&x->bad_pushes, 1);
	atomic_fetch_add(&x->pushed, len);
	return 0;
}

/* Compressible bytes, different per file. */
static uint8_t *gen(size_t n, unsigned int seed)
{
	uint8_t *p = malloc(n);
	size_t i = 0;

	assert_non_null(p);
	while (i < n) {
		char line[64];
		int len = snprintf(line, sizeof(line), "file %u line %zu: block data\n", seed, i);

		for (int j = 0; j < len && i < n; j++)
			p[i++] = (uint8_t)line[j];
	}
	return p;
}

/* An LZ4 file (64 KiB blocks with checksums) of @data in an unlinked temp file. */
static int lz4_file(const uint8_t *data, size_t n)
{
	LZ4F_preferences_t pr = tb_lz4_prefs(LZ4F_max64KB, false, true, false, n);
	char path[] = "/tmp/test_prefetch.XXXXXX";
	struct tb_buf frame = { 0 };
	int fd;

	tb_lz4_frame(&frame, data, n, &pr);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, frame.p, frame.len), (ssize_t)frame.len);
	free(frame.p);
	return fd;
}

/*
 * Files and the shared pieces; @maps: the mmap read path with this bound;
 * @push: decoded ahead into the fake page cache, else the block cache.
 */
static struct fx *fx_new(uint64_t cache_size, unsigned int workers, size_t max_maps, bool push)
{
	struct fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->env.mount = bfs_counters_new(NULL);
	assert_non_null(x->env.mount);
	assert_int_equal(bfs_cache_new(&x->env.cache, cache_size), 0);
	assert_int_equal(bfs_workq_new(&x->env.workq, workers, 64, NULL), 0);
	if (push) {
		x->env.push = fake_push;
		x->env.push_ctx = x;
	}
	if (max_maps) {
		assert_int_equal(bfs_sigbus_init(), 0);
		assert_int_equal(bfs_maps_new(&x->env.maps, max_maps, BFS_POPULATE_ASYNC), 0);
		x->env.readpath = BFS_READPATH_MMAP;
	}
	x->env.readahead = 256 << 10;
	x->env.advice = BFS_ADV_NORMAL;
	x->env.verify = true;
	for (int i = 0; i < NFILES; i++) {
		x->orig[i] = gen(FILE_LEN, (unsigned int)i);
		assert_int_equal(bfs_file_open(&x->f[i], lz4_file(x->orig[i], FILE_LEN), NULL, -1,
					       &bfs_codec_lz4, "test", &x->env, NULL),
				 0);
		assert_int_equal(bfs_file_size(x->f[i]), FILE_LEN);
	}
	return x;
}

static void fx_free(struct fx *x)
{
	bfs_workq_free(x->env.workq); /* first: jobs hold file versions */
	for (int i = 0; i < NFILES; i++) {
		bfs_file_unuse(x->f[i]);
		bfs_file_put(x->f[i]);
		free(x->orig[i]);
	}
	bfs_maps_free(x->env.maps);
	bfs_cache_free(x->env.cache);
	bfs_counters_put(x->env.mount);
	free(x);
}

struct reader {
	struct fx *x;
	unsigned int id;
	int bad; /* reads that failed or differed */
};

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Read @n bytes at @off of file @i through stream @s and compare; 0 or 1 (bad). */
static int check_read(struct fx *x, struct bfs_stream *s, int i, uint64_t off, size_t n)
{
	size_t want = off >= FILE_LEN ? 0 : FILE_LEN - off < n ? FILE_LEN - off : n, at = 0;
	struct bfs_stream_next next;
	struct bfs_readv rv;
	ssize_t got = bfs_stream_read(s, off, n, &rv, &next);
	int bad = got != (ssize_t)want;

	bfs_stream_ahead(s, &next);
	for (size_t k = 0; !bad && k < rv.cnt; at += rv.iov[k++].iov_len)
		bad = memcmp(rv.iov[k].iov_base, x->orig[i] + off + at, rv.iov[k].iov_len) != 0;
	bfs_readv_release(&rv);
	return bad;
}

/*
 * Even readers stream one file front to back in 128 KiB reads (read-ahead
 * follows them); odd ones read 4-100 KiB at random places of any file,
 * and every third of those also drops ranges from the cache.
 */
static void *reader(void *arg)
{
	struct reader *r = arg;
	struct fx *x = r->x;
	uint64_t s = 0x9E3779B97F4A7C15u * (r->id + 1);
	struct bfs_stream *st[NFILES];

	/* a stream per file, as one open handle each; inode i + 1 is file i */
	for (int i = 0; i < NFILES; i++)
		assert_int_equal(bfs_stream_new(&st[i], x->f[i], (uint64_t)i + 1), 0);
	for (int n = 0; n < READS; n++) {
		if (r->id % 2 == 0) {
			int i = (int)(r->id / 2 + (unsigned int)n / 8) % NFILES;
			uint64_t off = (uint64_t)(n % 8) * (128 << 10);

			r->bad += check_read(x, st[i], i, off, 128 << 10);
		} else {
			int i = (int)(rng(&s) % NFILES);
			uint64_t off = rng(&s) % FILE_LEN;
			size_t len = 4096 + rng(&s) % (96 << 10);

			r->bad += check_read(x, st[i], i, off, len);
			if (r->id % 3 == 0 && n % 10 == 0)
				bfs_file_drop_range(x->f[i], off, 256 << 10);
		}
	}
	for (int i = 0; i < NFILES; i++)
		bfs_stream_free(st[i]);
	return NULL;
}

static void run_readers(struct fx *x)
{
	pthread_t t[NTHREADS];
	struct reader r[NTHREADS];

	for (unsigned int i = 0; i < NTHREADS; i++) {
		r[i] = (struct reader){ .x = x, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, reader, &r[i]), 0);
	}
	for (unsigned int i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(r[i].bad, 0);
	}
}

static void test_readers_with_readahead(void **state)
{
	/* a cache of 8 blocks for 64: read-ahead and readers evict each other */
	struct fx *x = fx_new(512 << 10, 3, 0, false);

	(void)state;
	run_readers(x);
	assert_true(atomic_load(&x->env.mount->prefetched) > 0);
	assert_true(atomic_load(&x->env.mount->syscalls) > 0); /* preads */
	assert_int_equal(atomic_load(&x->pushed), 0);
	fx_free(x);
}

static void test_readers_with_pushes(void **state)
{
	/* streams push ahead; the fake kernel checks every slice */
	struct fx *x = fx_new(512 << 10, 3, 0, true);

	(void)state;
	run_readers(x);
	assert_true(atomic_load(&x->pushed) > 0);
	assert_int_equal(atomic_load(&x->env.mount->pushed), atomic_load(&x->pushed));
	assert_int_equal(atomic_load(&x->bad_pushes), 0);
	fx_free(x);
}

/* willneed of a whole file: every page pushed once, by a few jobs. */
static void test_willneed_pushes_every_page(void **state)
{
	struct fx *x = fx_new(256 << 10, 2, 0, true);

	(void)state;
	for (int i = 0; i < NFILES; i++)
		assert_true(bfs_push_willneed(x->env.workq, x->f[i], (uint64_t)i + 1, 1000,
					      FILE_LEN) > 0);
	bfs_workq_free(x->env.workq); /* runs every job */
	x->env.workq = NULL;
	assert_int_equal(atomic_load(&x->pushed), (uint64_t)NFILES * FILE_LEN);
	assert_int_equal(atomic_load(&x->bad_pushes), 0);
	fx_free(x);
}

/* Copy what @rv describes; the bytes must be file @i's at @off. */
static void assert_readv(struct fx *x, int i, struct bfs_readv *rv, ssize_t n, uint64_t off,
			 size_t size)
{
	size_t at = 0;

	assert_int_equal(n, (ssize_t)size);
	for (size_t k = 0; k < rv->cnt; at += rv->iov[k++].iov_len)
		assert_memory_equal(rv->iov[k].iov_base, x->orig[i] + off + at, rv->iov[k].iov_len);
	assert_int_equal(at, size);
}

/*
 * A random reader: the first read of a block decodes only as far as it
 * needs and keeps nothing; the second decodes it whole, caches it, and
 * says so (again_*) so that the rest can go to the kernel; the third hits.
 */
static void test_random_reads_decode_prefix_first(void **state)
{
	struct fx *x = fx_new(512 << 10, 0, 0, false);
	struct bfs_counters *c = x->f[0]->ctr;
	struct bfs_readv rv;
	ssize_t n;

	(void)state;
	n = bfs_file_readv(x->f[0], 3 * 65536 + 1000, 4096, &rv, BFS_READ_RANDOM);
	assert_readv(x, 0, &rv, n, 3 * 65536 + 1000, 4096);
	assert_int_equal(rv.again_to, 0);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 1);
	assert_int_equal(atomic_load(&c->cached), 0); /* a prefix is not kept */

	n = bfs_file_readv(x->f[0], 3 * 65536 + 50000, 8192, &rv, BFS_READ_RANDOM);
	assert_readv(x, 0, &rv, n, 3 * 65536 + 50000, 8192);
	assert_int_equal(rv.again_from, 3 * 65536);
	assert_int_equal(rv.again_to, 4 * 65536);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 2);
	assert_int_equal(atomic_load(&c->cached), 65536); /* whole, and kept */

	n = bfs_file_readv(x->f[0], 3 * 65536, 65536, &rv, BFS_READ_RANDOM);
	assert_readv(x, 0, &rv, n, 3 * 65536, 65536);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 2); /* a hit */

	/* a read of the end of a block it never read needs it whole: no prefix */
	n = bfs_file_readv(x->f[0], 6 * 65536 - 4096, 4096, &rv, BFS_READ_RANDOM);
	assert_readv(x, 0, &rv, n, 6 * 65536 - 4096, 4096);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 3);
	assert_int_equal(atomic_load(&c->cached), 2 * 65536);
	fx_free(x);
}

/*
 * A read of a run of blocks with a bad one in the middle fails, and the
 * good blocks of the run are each decoded once and cached: those before
 * the bad one by the run's decode, those after it by decoding on from
 * there, none again.
 */
static void test_bad_block_fails_alone(void **state)
{
	struct fx *x = fx_new(1 << 20, 0, 0, false);
	struct bfs_file *f = x->f[0];
	struct bfs_counters *c = f->ctr;
	const struct bfs_blk *b = &f->idx.blk[5];
	struct bfs_readv rv;
	uint8_t byte;
	ssize_t n;

	(void)state;
	assert_null(f->head);
	assert_int_equal(pread(f->fd, &byte, 1, (off_t)(b->coff + b->clen / 2)), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(f->fd, &byte, 1, (off_t)(b->coff + b->clen / 2)), 1);
	/* blocks 4, 5 and 6: fewer than a run decoded on the workers, in order */
	n = bfs_file_readv(f, 4 * 65536, 3 * 65536, &rv, 0);
	assert_true(n < 0);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 2);
	assert_int_equal(atomic_load(&c->cached), 2 * 65536);
	/* the good ones are hits; the bad one fails again */
	n = bfs_file_readv(f, 4 * 65536, 65536, &rv, 0);
	assert_readv(x, 0, &rv, n, 4 * 65536, 65536);
	bfs_readv_release(&rv);
	n = bfs_file_readv(f, 6 * 65536, 65536, &rv, 0);
	assert_readv(x, 0, &rv, n, 6 * 65536, 65536);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 2);
	n = bfs_file_readv(f, 5 * 65536 + 100, 100, &rv, 0);
	assert_true(n < 0);
	bfs_readv_release(&rv);
	/* blocks 8 to 15, a run for the workers (none: in order, here): block 10 bad */
	b = &f->idx.blk[10];
	assert_int_equal(pread(f->fd, &byte, 1, (off_t)(b->coff + b->clen / 2)), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(f->fd, &byte, 1, (off_t)(b->coff + b->clen / 2)), 1);
	n = bfs_file_readv(f, 8 * 65536, 8 * 65536, &rv, 0);
	assert_true(n < 0);
	bfs_readv_release(&rv);
	assert_int_equal(atomic_load(&c->decoded), 2 + 7);
	assert_int_equal(atomic_load(&c->cached), 9 * 65536);
	fx_free(x);
}

static void test_readers_share_bounded_maps(void **state)
{
	/* four files through two live mappings, pre-faulted by the workers */
	struct fx *x = fx_new(256 << 10, 2, 2, false);

	(void)state;
	run_readers(x);
	/*
	 * Every file was mapped (on this path the only counted syscalls are
	 * mmap calls), and blocks were decoded out of the mappings. The bound
	 * may be exceeded while every mapping is in use (mmap.c), so only
	 * the obvious limit is asserted.
	 */
	assert_true(atomic_load(&x->env.mount->syscalls) >= NFILES);
	assert_true(atomic_load(&x->env.mount->decoded) > 0);
	assert_true(bfs_maps_live(x->env.maps) <= NFILES);
	fx_free(x);
}

/* Syscalls (here: mmap calls) that entering @f costs, leaving it entered. */
static uint64_t enter_cost(struct fx *x, struct bfs_file *f)
{
	uint64_t before = atomic_load(&x->env.mount->syscalls);

	assert_non_null(bfs_file_map_enter(f, true));
	return atomic_load(&x->env.mount->syscalls) - before;
}

static void test_map_bound_spares_held(void **state)
{
	/* two live mappings for four files, no workers: every step is ours */
	struct fx *x = fx_new(256 << 10, 0, 2, false);
	struct bfs_file **f = x->f;

	(void)state;
	assert_int_equal(enter_cost(x, f[0]), 1); /* held throughout */
	assert_int_equal(enter_cost(x, f[1]), 1);
	bfs_file_map_exit(f[1]);
	assert_int_equal(bfs_maps_live(x->env.maps), 2);
	/* At the bound: the idle f1 goes, though f0 was entered before it. */
	assert_int_equal(enter_cost(x, f[2]), 1);
	bfs_file_map_exit(f[2]);
	assert_int_equal(bfs_maps_live(x->env.maps), 2);
	assert_int_equal(enter_cost(x, f[0]), 0); /* still mapped */
	bfs_file_map_exit(f[0]);
	assert_int_equal(enter_cost(x, f[2]), 0); /* still mapped */
	/* f0 and f2 held: f3 can evict nothing and goes over the bound. */
	assert_int_equal(enter_cost(x, f[3]), 1);
	assert_int_equal(bfs_maps_live(x->env.maps), 3);
	bfs_file_map_exit(f[0]);
	bfs_file_map_exit(f[2]);
	bfs_file_map_exit(f[3]);
	/* The next map trims back to the bound. */
	assert_int_equal(enter_cost(x, f[1]), 1);
	assert_int_equal(bfs_maps_live(x->env.maps), 2);
	bfs_file_map_exit(f[1]);
	fx_free(x);
}

static void test_readers_without_cache(void **state)
{
	/* cache_size=0: every read decodes; read-ahead has nowhere to go */
	struct fx *x = fx_new(0, 2, 0, true);

	(void)state;
	run_readers(x);
	assert_true(atomic_load(&x->env.mount->decoded) > 0);
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readers_with_readahead),
		cmocka_unit_test(test_readers_with_pushes),
		cmocka_unit_test(test_willneed_pushes_every_page),
		cmocka_unit_test(test_random_reads_decode_prefix_first),
		cmocka_unit_test(test_bad_block_fails_alone),
		cmocka_unit_test(test_readers_share_bounded_maps),
		cmocka_unit_test(test_map_bound_spares_held),
		cmocka_unit_test(test_readers_without_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

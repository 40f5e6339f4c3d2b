// SPDX-License-Identifier: MIT
/*
 * Unit tests of the spill (spill.h): bytes read back as written, nothing
 * readable before the seal, the budget and its least-recently-read
 * order, spills refused (off, too big, no room, bad directory), a write
 * past the size, unlinked files, readers racing eviction, units'
 * spills made whole from memory (bfs_spill_put()) under the same budget
 * and bound on descriptors, and spills of pieces written by two threads
 * at once, their budget and refusals. Threaded:
 * run it under ThreadSanitizer too (meson setup -Db_sanitize=thread).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/spill.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/bfs-spill-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	bfs_spill_shutdown();
	return rmdir(dir);
}

/* Byte @i of a spill seeded @seed. */
static uint8_t pat(unsigned int seed, uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ seed);
}

/* A sealed spill of @size bytes of pat(@seed), written in pieces of @piece. */
static struct bfs_spill *make(uint64_t size, unsigned int seed, size_t piece)
{
	struct bfs_spill *s = bfs_spill_begin(size);
	uint8_t *buf = malloc(piece);

	assert_non_null(buf);
	if (!s) {
		free(buf);
		return NULL;
	}
	for (uint64_t at = 0; at < size; at += piece) {
		size_t n = size - at < piece ? (size_t)(size - at) : piece;

		for (size_t i = 0; i < n; i++)
			buf[i] = pat(seed, at + i);
		assert_int_equal(bfs_spill_write(s, buf, n), 0);
	}
	free(buf);
	assert_int_equal(bfs_spill_seal(s), 0);
	return s;
}

/* Does @s hold pat(@seed) at [off, off + len)? */
static bool holds(struct bfs_spill *s, unsigned int seed, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len);
	bool ok;

	assert_non_null(buf);
	ok = bfs_spill_read(s, buf, len, off) == 0;
	for (size_t i = 0; ok && i < len; i++)
		ok = buf[i] == pat(seed, off + i);
	free(buf);
	return ok;
}

static size_t entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void test_round_trip(void **state)
{
	struct bfs_spill_stats st0, st;
	struct bfs_spill *s;
	uint8_t b[16];

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 1 << 20), 0);
	bfs_spill_stats(&st0);
	s = bfs_spill_begin(300000);
	assert_non_null(s);
	assert_int_equal(entries(), 0); /* no name anyone could open */
	memset(b, 7, sizeof(b));
	assert_int_equal(bfs_spill_write(s, b, sizeof(b)), 0);
	assert_int_equal(bfs_spill_read(s, b, 1, 0), -ENOENT); /* not sealed: not readable */
	assert_false(bfs_spill_live(s));
	assert_int_equal(bfs_spill_seal(s), -EBADMSG); /* short */
	bfs_spill_drop(s);

	s = make(300000, 1, 4099);
	assert_non_null(s);
	assert_true(bfs_spill_live(s));
	assert_true(holds(s, 1, 0, 300000));
	assert_true(holds(s, 1, 299999, 1));
	assert_true(holds(s, 1, 123457, 65536));
	assert_int_equal(bfs_spill_read(s, b, 2, 299999), -ERANGE);
	assert_int_equal(bfs_spill_read(s, b, 1, UINT64_MAX), -ERANGE);
	bfs_spill_stats(&st);
	assert_int_equal(st.limit, 1 << 20);
	assert_int_equal(st.bytes, 300000);
	assert_int_equal(st.proofs - st0.proofs, 2);
	assert_int_equal(st.sealed - st0.sealed, 1);
	assert_int_equal(st.reads - st0.reads, 3);
	bfs_spill_forget(s);
	assert_false(bfs_spill_live(s));
	assert_int_equal(bfs_spill_read(s, b, 1, 0), -ENOENT);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
	bfs_spill_drop(s);
	bfs_spill_drop(NULL);
}

static void test_write_past_size(void **state)
{
	struct bfs_spill *s;
	uint8_t b[10] = { 0 };

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 1 << 20), 0);
	s = bfs_spill_begin(15);
	assert_non_null(s);
	assert_int_equal(bfs_spill_write(s, b, 10), 0);
	assert_int_equal(bfs_spill_write(s, b, 10), -EFBIG);
	assert_int_equal(bfs_spill_write(s, b, 5), -EIO); /* broken for good */
	assert_int_equal(bfs_spill_seal(s), -EBADMSG);
	assert_false(bfs_spill_live(s));
	bfs_spill_drop(s);
}

/*
 * A write that fails (here EFBIG past a file size limit, as ENOSPC or EIO
 * would): the spill cannot be sealed, is counted as failed, and its room
 * comes back when dropped.
 */
static void test_write_fails(void **state)
{
	struct bfs_spill_stats st0, st;
	struct rlimit old, small;
	struct bfs_spill *s;
	uint8_t *b = calloc(1, 256 << 10);

	(void)state;
	assert_non_null(b);
	assert_int_equal(bfs_spill_configure(dir, 16 << 20), 0);
	bfs_spill_stats(&st0);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = (struct rlimit){ 64 << 10, old.rlim_max }; /* the soft limit: it comes back */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	s = bfs_spill_begin(4 << 20);
	assert_non_null(s);
	/* the writer finds out behind the caller: a later call or the seal says so */
	for (int i = 0; i < 16; i++)
		if (bfs_spill_write(s, b, 256 << 10) < 0)
			break;
	assert_int_equal(bfs_spill_seal(s), -EBADMSG);
	assert_false(bfs_spill_live(s));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.failed - st0.failed, 1);
	assert_int_equal(st.sealed - st0.sealed, 0);
	assert_int_equal(st.bytes, 4 << 20); /* held until dropped */
	bfs_spill_drop(s);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(entries(), 0);
	free(b);
}

static void test_refused(void **state)
{
	struct bfs_spill_stats st0, st;
	struct bfs_spill *a;

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 0), 0);
	bfs_spill_stats(&st0);
	assert_null(bfs_spill_begin(100)); /* off */
	bfs_spill_stats(&st);
	assert_int_equal(st.limit, 0);
	assert_int_equal(st.proofs - st0.proofs, 1); /* a proof counted all the same */

	assert_int_equal(bfs_spill_configure("/nonexistent/blockfs-spill", 1000), -ENOENT);
	assert_null(bfs_spill_begin(100)); /* and off */

	assert_int_equal(bfs_spill_configure(dir, 1000), 0);
	assert_null(bfs_spill_begin(1001)); /* bigger than the budget */
	assert_null(bfs_spill_begin(0));
	a = bfs_spill_begin(600);
	assert_non_null(a);
	bfs_spill_stats(&st0);
	assert_null(bfs_spill_begin(600)); /* the rest is being written */
	bfs_spill_stats(&st);
	assert_int_equal(st.failed - st0.failed, 1);
	bfs_spill_drop(a);
	a = bfs_spill_begin(1000); /* its room came back */
	assert_non_null(a);
	bfs_spill_drop(a);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
}

static void test_least_recently_read_go(void **state)
{
	struct bfs_spill_stats st0, st;
	struct bfs_spill *a, *b, *c, *d;

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 3000), 0);
	bfs_spill_stats(&st0);
	a = make(1000, 1, 100);
	b = make(1000, 2, 100);
	c = make(1000, 3, 100);
	assert_true(a && b && c);
	assert_true(holds(a, 1, 0, 1000)); /* a read: b is now the least recent */
	d = make(1000, 4, 1000);
	assert_non_null(d);
	assert_false(bfs_spill_live(b));
	assert_int_equal(bfs_spill_read(b, (uint8_t[1]){ 0 }, 1, 0), -ENOENT);
	assert_true(holds(a, 1, 0, 1000));
	assert_true(holds(c, 3, 500, 500));
	assert_true(holds(d, 4, 0, 1000));
	bfs_spill_stats(&st);
	assert_int_equal(st.dropped - st0.dropped, 1);
	assert_int_equal(st.bytes, 3000);
	/* a big one takes the room of all the others */
	bfs_spill_drop(b);
	b = make(3000, 5, 777);
	assert_non_null(b);
	assert_false(bfs_spill_live(a) || bfs_spill_live(c) || bfs_spill_live(d));
	assert_true(holds(b, 5, 0, 3000));
	bfs_spill_stats(&st);
	assert_int_equal(st.dropped - st0.dropped, 4);
	assert_int_equal(st.bytes, 3000);
	bfs_spill_drop(a);
	bfs_spill_drop(b);
	bfs_spill_drop(c);
	bfs_spill_drop(d);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
}

/* Readers of spills that a writer keeps pushing out: right bytes or ENOENT, never others. */
#define RACE_SPILLS 4
#define RACE_SIZE   8192

struct race {
	struct bfs_spill *s[RACE_SPILLS];
	atomic_bool stop;
	atomic_uint wrong, served;
};

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint8_t buf[512];
	unsigned int i = 0;

	while (!atomic_load(&r->stop)) {
		unsigned int k = i % RACE_SPILLS;
		uint64_t off = (i * 977u) % (RACE_SIZE - sizeof(buf));
		int rc = bfs_spill_read(r->s[k], buf, sizeof(buf), off);

		if (rc == 0) {
			atomic_fetch_add(&r->served, 1);
			for (size_t j = 0; j < sizeof(buf); j++)
				if (buf[j] != pat(k + 1, off + j))
					atomic_fetch_add(&r->wrong, 1);
		} else if (rc != -ENOENT) {
			atomic_fetch_add(&r->wrong, 1);
		}
		i++;
	}
	return NULL;
}

static void test_readers_race_eviction(void **state)
{
	struct race r = { 0 };
	pthread_t th[3];

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, RACE_SPILLS * RACE_SIZE), 0);
	for (unsigned int k = 0; k < RACE_SPILLS; k++)
		assert_non_null(r.s[k] = make(RACE_SIZE, k + 1, 1000));
	for (size_t i = 0; i < BFS_ARRAY_SIZE(th); i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r), 0);
	for (int round = 0; round < 200; round++) {
		struct bfs_spill *x = make(RACE_SIZE / 2, 99, 4096);

		assert_non_null(x);
		bfs_spill_drop(x);
	}
	atomic_store(&r.stop, true);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(th); i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&r.wrong), 0);
	for (unsigned int k = 0; k < RACE_SPILLS; k++)
		bfs_spill_drop(r.s[k]);
	assert_int_equal(entries(), 0);
}

/* A unit's spill of @size bytes of pat(@seed), made whole from memory. */
static struct bfs_spill *put(uint64_t size, unsigned int seed)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct bfs_spill *s;

	assert_non_null(buf);
	for (uint64_t i = 0; i < size; i++)
		buf[i] = pat(seed, i);
	s = bfs_spill_put(buf, size);
	free(buf);
	return s;
}

/* bfs_spill_put(): sealed at once, counted as a unit (not a proof), refused as begin is. */
static void test_put(void **state)
{
	struct bfs_spill_stats st0, st;
	struct bfs_spill *a, *b, *c;

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 0), 0);
	assert_false(bfs_spill_on());
	assert_null(put(100, 1)); /* off */
	assert_int_equal(bfs_spill_configure(dir, 3000), 0);
	assert_true(bfs_spill_on());
	bfs_spill_stats(&st0);
	a = put(1000, 1);
	assert_non_null(a);
	assert_int_equal(entries(), 0); /* unlinked */
	assert_true(bfs_spill_live(a));
	assert_true(holds(a, 1, 0, 1000));
	assert_true(holds(a, 1, 999, 1));
	assert_int_equal(bfs_spill_read(a, (uint8_t[2]){ 0 }, 2, 999), -ERANGE);
	bfs_spill_stats(&st);
	assert_int_equal(st.units - st0.units, 1);
	assert_int_equal(st.sealed - st0.sealed, 1);
	assert_int_equal(st.proofs - st0.proofs, 0);
	assert_int_equal(st.bytes, 1000);
	assert_null(put(3001, 2)); /* bigger than the budget */
	assert_null(put(0, 2));
	/* room is made as for begin: the least recently read goes */
	b = put(1000, 2);
	c = make(1000, 3, 100);
	assert_true(b && c);
	assert_true(holds(a, 1, 0, 10)); /* b is now the least recent */
	bfs_spill_drop(put(1000, 4));
	assert_false(bfs_spill_live(b));
	assert_true(holds(a, 1, 0, 1000));
	assert_true(holds(c, 3, 0, 1000));
	bfs_spill_drop(a);
	bfs_spill_drop(b);
	bfs_spill_drop(c);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(entries(), 0);
}

/* A put whose write fails (past a file size limit): NULL, failed, its room back. */
static void test_put_fails(void **state)
{
	struct bfs_spill_stats st0, st;
	struct rlimit old, small;

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 16 << 20), 0);
	bfs_spill_stats(&st0);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = (struct rlimit){ 64 << 10, old.rlim_max };
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_null(put(1 << 20, 1));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.failed - st0.failed, 1);
	assert_int_equal(st.units - st0.units, 0);
	assert_int_equal(st.sealed - st0.sealed, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(entries(), 0);
}

/* However big the budget, at most 1024 spills hold descriptors: the least recently read go. */
static void test_files_bounded(void **state)
{
	enum { N = 1100 };
	struct bfs_spill **s = calloc(N, sizeof(*s));
	struct bfs_spill_stats st0, st;
	size_t live = 0;

	(void)state;
	assert_non_null(s);
	assert_int_equal(bfs_spill_configure(dir, 1 << 30), 0);
	bfs_spill_stats(&st0);
	for (size_t i = 0; i < N; i++)
		assert_non_null(s[i] = put(16, (unsigned int)i));
	for (size_t i = 0; i < N; i++)
		live += bfs_spill_live(s[i]);
	assert_int_equal(live, 1024);
	assert_false(bfs_spill_live(s[0]));
	assert_true(holds(s[N - 1], N - 1, 0, 16));
	bfs_spill_stats(&st);
	assert_int_equal(st.dropped - st0.dropped, N - 1024);
	assert_int_equal(st.bytes, 1024 * 16);
	for (size_t i = 0; i < N; i++)
		bfs_spill_drop(s[i]);
	free(s);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
}

/* ---- pieces: a walk's spill ---- */

#define PIECE  4096
#define PIECES 64

struct piece_job {
	struct bfs_spill *s;
	unsigned int first; /* writes pieces first, first + 2, ... */
	uint64_t off[PIECES];
	int rc[PIECES];
};

/* Piece k holds pat(k) at [0, PIECE). */
static void *piece_writer(void *arg)
{
	struct piece_job *j = arg;
	uint8_t buf[PIECE];

	for (unsigned int k = j->first; k < PIECES; k += 2) {
		for (size_t i = 0; i < PIECE; i++)
			buf[i] = pat(k, i);
		j->rc[k] = bfs_spill_piece(j->s, buf, PIECE, &j->off[k]);
	}
	return NULL;
}

static void test_pieces(void **state)
{
	struct bfs_spill_stats st0, st;
	struct piece_job a = { .first = 0 }, b = { .first = 1 };
	struct bfs_spill *s;
	pthread_t th;
	uint8_t buf[PIECE];

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 1 << 20), 0);
	bfs_spill_stats(&st0);
	s = bfs_spill_begin_pieces();
	assert_non_null(s);
	a.s = b.s = s;
	/* two threads at once, pieces in any order */
	assert_int_equal(pthread_create(&th, NULL, piece_writer, &a), 0);
	piece_writer(&b);
	pthread_join(th, NULL);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(st.bytes, PIECES * PIECE);
	assert_int_equal(bfs_spill_read(s, buf, 16, 0), -ENOENT); /* not sealed yet */
	assert_false(bfs_spill_live(s));
	assert_int_equal(bfs_spill_seal_pieces(s), 0);
	assert_true(bfs_spill_live(s));
	for (unsigned int k = 0; k < PIECES; k++) {
		struct piece_job *j = k % 2 ? &b : &a;

		assert_int_equal(j->rc[k], 0);
		assert_true(j->off[k] % PIECE == 0 && j->off[k] < PIECES * PIECE);
		assert_int_equal(bfs_spill_read(s, buf, PIECE, j->off[k]), 0);
		for (size_t i = 0; i < PIECE; i++)
			assert_int_equal(buf[i], pat(k, i));
	}
	assert_int_equal(bfs_spill_read(s, buf, 16, PIECES * PIECE - 8), -ERANGE);
	/* sealed: no more pieces; not a spill of pieces: none at all */
	assert_int_not_equal(bfs_spill_piece(s, buf, 16, &a.off[0]), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.sealed - st0.sealed, 1);
	bfs_spill_drop(s);
	s = bfs_spill_begin(100);
	assert_non_null(s);
	assert_int_equal(bfs_spill_piece(s, buf, 16, &a.off[0]), -EINVAL);
	bfs_spill_drop(s);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(entries(), 0);
}

static void test_pieces_refused(void **state)
{
	struct bfs_spill_stats st0, st;
	struct bfs_spill *s, *old;
	uint8_t buf[PIECE] = { 0 };
	uint64_t off;

	(void)state;
	assert_int_equal(bfs_spill_configure(dir, 0), 0);
	assert_null(bfs_spill_begin_pieces()); /* off */

	/* a budget of 3 pieces: a sealed spill is dropped for the third, none for the fourth */
	assert_int_equal(bfs_spill_configure(dir, 3 * PIECE), 0);
	old = make(PIECE, 9, PIECE);
	assert_non_null(old);
	bfs_spill_stats(&st0);
	s = bfs_spill_begin_pieces();
	assert_non_null(s);
	assert_int_equal(bfs_spill_piece(s, buf, PIECE, &off), 0);
	assert_int_equal(off, 0);
	assert_int_equal(bfs_spill_piece(s, buf, PIECE, &off), 0);
	assert_int_equal(off, PIECE);
	assert_true(bfs_spill_live(old));
	assert_int_equal(bfs_spill_piece(s, buf, PIECE, &off), 0); /* room made */
	assert_false(bfs_spill_live(old));
	assert_int_equal(bfs_spill_piece(s, buf, PIECE, &off), -ENOSPC);
	bfs_spill_stats(&st);
	assert_int_equal(st.dropped - st0.dropped, 1);
	assert_int_equal(st.failed - st0.failed, 1);
	assert_int_equal(st.bytes, 3 * PIECE);
	/* after a refusal every piece is refused; the ones before stay good */
	assert_int_equal(bfs_spill_piece(s, buf, 1, &off), -ENOSPC);
	assert_int_equal(bfs_spill_seal_pieces(s), 0);
	assert_int_equal(bfs_spill_read(s, buf, PIECE, 2 * PIECE), 0);
	bfs_spill_drop(s);
	bfs_spill_drop(old);

	/* a piece bigger than the budget drops nothing; an empty spill does not seal */
	old = make(PIECE, 9, PIECE);
	s = bfs_spill_begin_pieces();
	assert_non_null(s);
	{
		uint8_t *big = calloc(4, PIECE);

		assert_non_null(big);
		assert_int_equal(bfs_spill_piece(s, big, 4 * PIECE, &off), -ENOSPC);
		free(big);
	}
	assert_true(bfs_spill_live(old));
	assert_int_equal(bfs_spill_seal_pieces(s), -ENODATA);
	bfs_spill_drop(s);
	bfs_spill_drop(old);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(entries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_write_past_size),
		cmocka_unit_test(test_write_fails),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_least_recently_read_go),
		cmocka_unit_test(test_readers_race_eviction),
		cmocka_unit_test(test_put),
		cmocka_unit_test(test_put_fails),
		cmocka_unit_test(test_files_bounded),
		cmocka_unit_test(test_pieces),
		cmocka_unit_test(test_pieces_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

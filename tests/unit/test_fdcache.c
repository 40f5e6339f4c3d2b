// SPDX-License-Identifier: MIT
/*
 * Unit tests of the backing-descriptor cache (fdcache.c) on files of a
 * temporary directory: the bound, least recently used closed first,
 * pinned descriptors never closed (and given back once unpinned), shedding,
 * adopting over a held one, release, the read-only questions and
 * replacing a descriptor under its number. Threaded pins for TSan.
 */
#include "config.h"

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
#include <unistd.h>

#include "fdcache.h"

#define NFILES 12

struct fx {
	char dir[64];
	int dirfd;
	struct bfs_fdc c;
	struct bfs_fdc_ent e[NFILES];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x)
		return -1;
	snprintf(x->dir, sizeof(x->dir), "/tmp/bfs-fdcache.XXXXXX");
	if (!mkdtemp(x->dir))
		return -1;
	x->dirfd = open(x->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "f%d", i);
		fd = openat(x->dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, name, strlen(name)) < 0)
			return -1;
		close(fd);
		bfs_fdc_ent_init(&x->e[i]);
	}
	bfs_fdc_init(&x->c, 4);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	for (int i = 0; i < NFILES; i++)
		bfs_fdc_release(&x->c, &x->e[i]);
	assert_int_equal(x->c.n, 0);
	assert_null(x->c.mru);
	assert_null(x->c.lru);
	bfs_fdc_destroy(&x->c);
	for (int i = 0; i < NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		unlinkat(x->dirfd, name, 0);
	}
	close(x->dirfd);
	rmdir(x->dir);
	free(x);
	return 0;
}

/* File @i opened for reading (@rd) or O_PATH. */
static int open_file(struct fx *x, int i, bool rd)
{
	char name[16];
	int fd;

	snprintf(name, sizeof(name), "f%d", i);
	fd = openat(x->dirfd, name, (rd ? O_RDONLY : O_PATH) | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* Is @fd an open descriptor on file @i? */
static bool is_file(struct fx *x, int fd, int i)
{
	struct stat a, b;
	char name[16];

	snprintf(name, sizeof(name), "f%d", i);
	return fd >= 0 && fstat(fd, &a) == 0 && fstatat(x->dirfd, name, &b, 0) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static size_t list_len(struct bfs_fdc *c)
{
	size_t n = 0;

	for (struct bfs_fdc_ent *e = c->mru; e; e = e->next)
		n++;
	return n;
}

static void test_budget(void **state)
{
	size_t b = bfs_fdc_budget();

	(void)state;
	assert_true(b >= 16);
}

static void test_bound_lru(void **state)
{
	struct fx *x = *state;

	for (int i = 0; i < 6; i++)
		bfs_fdc_adopt(&x->c, &x->e[i], open_file(x, i, false), false, false);
	/* at most 4 open: the first two, least recently used, closed */
	assert_int_equal(x->c.n, 4);
	assert_int_equal(list_len(&x->c), 4);
	assert_int_equal(x->e[0].fd, -1);
	assert_int_equal(x->e[1].fd, -1);
	for (int i = 2; i < 6; i++)
		assert_true(is_file(x, x->e[i].fd, i));
	/* a get makes an entry the newest: 2 survives the next adoption, 3 does not */
	assert_true(is_file(x, bfs_fdc_get(&x->c, &x->e[2]), 2));
	bfs_fdc_put(&x->c, &x->e[2]);
	bfs_fdc_adopt(&x->c, &x->e[6], open_file(x, 6, false), false, false);
	assert_true(x->e[2].fd >= 0);
	assert_int_equal(x->e[3].fd, -1);
	assert_ptr_equal(x->c.mru, &x->e[6]);
	assert_ptr_equal(x->c.mru->next, &x->e[2]);
	/* no descriptor: -1, not pinned */
	assert_int_equal(bfs_fdc_get(&x->c, &x->e[0]), -1);
	assert_int_equal(x->e[0].pins, 0);
}

static void test_pins_hold(void **state)
{
	struct fx *x = *state;
	int fd[6];

	/* pinned ones are never closed: the bound is overshot while they are held */
	for (int i = 0; i < 6; i++)
		fd[i] = bfs_fdc_adopt(&x->c, &x->e[i], open_file(x, i, false), false, true);
	assert_int_equal(x->c.n, 6);
	for (int i = 0; i < 6; i++)
		assert_true(is_file(x, fd[i], i));
	/* each unpinning gives back the excess at once, oldest unpinned first */
	bfs_fdc_put(&x->c, &x->e[5]);
	assert_int_equal(x->c.n, 5); /* the only one unpinned, newest as it is */
	assert_int_equal(x->e[5].fd, -1);
	bfs_fdc_put(&x->c, &x->e[0]);
	assert_int_equal(x->c.n, 4);
	assert_int_equal(x->e[0].fd, -1);
	for (int i = 1; i < 5; i++)
		bfs_fdc_put(&x->c, &x->e[i]);
	assert_int_equal(x->c.n, 4); /* within the bound: nothing more closed */
	for (int i = 1; i < 5; i++)
		assert_true(is_file(x, x->e[i].fd, i));
}

static void test_adopt_over_held(void **state)
{
	struct fx *x = *state;
	int fd, extra;

	fd = bfs_fdc_adopt(&x->c, &x->e[0], open_file(x, 0, true), true, true);
	assert_true(is_file(x, fd, 0));
	/* another lookup found it meanwhile: its descriptor is closed, the held one stays */
	extra = open_file(x, 0, false);
	assert_int_equal(bfs_fdc_adopt(&x->c, &x->e[0], extra, false, true), fd);
	assert_int_equal(fcntl(extra, F_GETFD) == -1 ? errno : 0, EBADF);
	assert_int_equal(x->e[0].pins, 2);
	assert_true(x->e[0].rdonly);
	assert_int_equal(x->c.n, 1);
	bfs_fdc_put(&x->c, &x->e[0]);
	bfs_fdc_put(&x->c, &x->e[0]);
}

static void test_shed(void **state)
{
	struct fx *x = *state;

	for (int i = 0; i < 4; i++)
		bfs_fdc_adopt(&x->c, &x->e[i], open_file(x, i, false), false, i == 2);
	bfs_fdc_shed(&x->c);
	/* all but the pinned one */
	assert_int_equal(x->c.n, 1);
	assert_ptr_equal(x->c.mru, &x->e[2]);
	assert_ptr_equal(x->c.lru, &x->e[2]);
	assert_true(is_file(x, x->e[2].fd, 2));
	bfs_fdc_put(&x->c, &x->e[2]);
}

static void test_release(void **state)
{
	struct fx *x = *state;

	for (int i = 0; i < 3; i++)
		bfs_fdc_adopt(&x->c, &x->e[i], open_file(x, i, false), false, false);
	bfs_fdc_release(&x->c, &x->e[1]); /* the middle of the list */
	assert_int_equal(x->e[1].fd, -1);
	assert_int_equal(x->c.n, 2);
	assert_ptr_equal(x->c.mru, &x->e[2]);
	assert_ptr_equal(x->c.mru->next, &x->e[0]);
	assert_ptr_equal(x->c.lru, &x->e[0]);
	bfs_fdc_release(&x->c, &x->e[1]); /* twice: nothing */
	assert_int_equal(x->c.n, 2);
}

static void test_rdonly_and_replace(void **state)
{
	struct fx *x = *state;
	int rd, op, other;

	rd = bfs_fdc_adopt(&x->c, &x->e[0], open_file(x, 0, true), true, true);
	op = bfs_fdc_adopt(&x->c, &x->e[1], open_file(x, 1, false), false, true);
	assert_true(bfs_fdc_is_rdonly(&x->c, &x->e[0], rd));
	assert_false(bfs_fdc_is_rdonly(&x->c, &x->e[0], op)); /* not its descriptor */
	assert_false(bfs_fdc_is_rdonly(&x->c, &x->e[1], op)); /* O_PATH */
	assert_int_equal(bfs_fdc_rdonly_fd(&x->c, &x->e[0]), rd);
	assert_int_equal(bfs_fdc_rdonly_fd(&x->c, &x->e[1]), -1);
	/* the number stays, the file behind it is the new one */
	other = open_file(x, 7, true);
	assert_int_equal(bfs_fdc_replace(&x->c, &x->e[0], rd, other), 0);
	assert_int_equal(x->e[0].fd, rd);
	assert_true(is_file(x, rd, 7));
	assert_true(is_file(x, other, 7)); /* not consumed */
	/* an O_PATH entry, or a number that is no longer the entry's: refused */
	assert_int_equal(bfs_fdc_replace(&x->c, &x->e[1], op, other), -1);
	assert_true(is_file(x, op, 1));
	assert_int_equal(bfs_fdc_replace(&x->c, &x->e[0], op, other), -1);
	close(other);
	bfs_fdc_put(&x->c, &x->e[0]);
	bfs_fdc_put(&x->c, &x->e[1]);
}

static struct fx *thread_fx;

static void *pin_thread(void *arg)
{
	struct fx *x = thread_fx;
	int base = (int)(intptr_t)arg;

	for (int r = 0; r < 2000; r++) {
		int i = (base + r) % NFILES, fd = bfs_fdc_get(&x->c, &x->e[i]);

		if (fd < 0)
			fd = bfs_fdc_adopt(&x->c, &x->e[i], open_file(x, i, false), false, true);
		assert_true(is_file(x, fd, i)); /* pinned: open, and still this file's */
		bfs_fdc_put(&x->c, &x->e[i]);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct fx *x = *state;
	pthread_t t[4];

	thread_fx = x;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, pin_thread, (void *)(intptr_t)(3 * i)),
				 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_true(x->c.n <= 4);
	assert_int_equal(list_len(&x->c), x->c.n);
	for (int i = 0; i < NFILES; i++)
		assert_int_equal(x->e[i].pins, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget),
		cmocka_unit_test_setup_teardown(test_bound_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pins_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_adopt_over_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rdonly_and_replace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

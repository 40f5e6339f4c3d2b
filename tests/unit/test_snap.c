// SPDX-License-Identifier: MIT
/*
 * Unit tests of directory snapshots and their cache (snap.c) on a
 * temporary directory, with only the parts of a mount they use (the
 * options, the counters, the descriptor cache, the snapshot cache and,
 * for reading ahead, a work queue): entries as getdents gave them, the
 * name rules' questions, a cached snapshot found again until the
 * directory changes, a racy one not kept, a removed directory, sizes
 * learned, the byte budget, snapshots read ahead of a walk, and their
 * entries as shown (shown.c).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/names.h"
#include "blockfs/stats.h"
#include "blockfs/workq.h"
#include "builders.h"
#include "fs_i.h"

struct fx {
	char dir[TB_DIR_MAX];
	int dirfd;
	struct bfs_opts opts;
	struct bfs_fs *fs;
};

static void touch(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	close(fd);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x)
		return -1;
	/* in memory, where it can: the budget's test makes 40,000 files */
	x->fs = tb_mount_new(x->dir, "snap", &x->opts, 64);
	x->dirfd = open(x->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (x->dirfd < 0)
		return -1;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	bfs_workq_free(x->fs->env.workq);
	close(x->dirfd);
	tb_mount_free(x->fs, x->dir);
	free(x);
	return 0;
}

/* Is @name among @s's entries, as type @type? */
static bool has(const struct bfs_snap *s, const char *name, unsigned char type)
{
	for (size_t i = 0; i < bfs_snap_count(s); i++) {
		struct bfs_snap_entry e = bfs_snap_at(s, i);

		if (strcmp(e.name, name) == 0)
			return e.type == type || e.type == DT_UNKNOWN;
	}
	return false;
}

static void test_entries_and_names(void **state)
{
	struct fx *x = *state;
	struct bfs_snap_ctx c = { .fs = x->fs, .dirfd = x->dirfd };
	struct stat st;

	touch(x->dirfd, "a.txt");
	touch(x->dirfd, "b.lz4");
	assert_int_equal(mkdirat(x->dirfd, "sub", 0755), 0);
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &c.snap), 0);
	assert_int_equal(bfs_snap_count(c.snap), 5); /* with . and .. */
	assert_true(has(c.snap, "a.txt", DT_REG));
	assert_true(has(c.snap, "b.lz4", DT_REG));
	assert_true(has(c.snap, "sub", DT_DIR));
	assert_true(has(c.snap, ".", DT_DIR));
	assert_int_equal(fstatat(x->dirfd, "a.txt", &st, 0), 0);
	for (size_t i = 0; i < bfs_snap_count(c.snap); i++) {
		struct bfs_snap_entry e = bfs_snap_at(c.snap, i);

		if (strcmp(e.name, "a.txt") == 0)
			assert_int_equal(e.ino, st.st_ino);
	}
	/* the name rules' questions, from the snapshot alone */
	assert_true(bfs_snap_name_ops.exists(&c, "a.txt"));
	assert_false(bfs_snap_name_ops.exists(&c, "a"));
	assert_true(bfs_snap_name_ops.is_file(&c, "b.lz4"));
	assert_false(bfs_snap_name_ops.is_file(&c, "sub"));
	assert_false(bfs_snap_name_ops.is_file(&c, "nothing"));
	bfs_snap_put(c.snap);
}

static void test_cached_until_changed(void **state)
{
	struct fx *x = *state;
	struct bfs_snap *s1, *s2, *s3;

	touch(x->dirfd, "one");
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s1), 0);
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s2), 0);
	assert_ptr_equal(s1, s2); /* one fstat, no getdents */
	assert_ptr_equal(x->fs->snaps.mru, s1);
	assert_true(x->fs->snaps.bytes > 0);
	bfs_snap_put(s2);
	touch(x->dirfd, "two"); /* the directory's mtime moves */
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s3), 0);
	assert_ptr_not_equal(s3, s1);
	assert_true(has(s3, "two", DT_REG));
	assert_false(has(s1, "two", DT_REG)); /* the old one lives while held */
	assert_ptr_equal(x->fs->snaps.mru, s3);
	assert_ptr_equal(x->fs->snaps.lru, s3); /* the old one left the cache */
	bfs_snap_put(s1);
	bfs_snap_put(s3);
}

static void test_racy_not_kept(void **state)
{
	struct fx *x = *state;
	struct bfs_snap *s1, *s2;

	touch(x->dirfd, "now"); /* changed just now: may change again unseen */
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s1), 0);
	assert_true(has(s1, "now", DT_REG));
	assert_null(x->fs->snaps.mru);
	assert_int_equal(x->fs->snaps.bytes, 0);
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s2), 0);
	assert_ptr_not_equal(s1, s2);
	assert_ptr_equal(x->fs->snaps.mru, s2); /* now it is kept */
	bfs_snap_put(s1);
	bfs_snap_put(s2);
}

static void test_removed_directory(void **state)
{
	struct fx *x = *state;
	struct bfs_snap *s;
	int fd;

	assert_int_equal(mkdirat(x->dirfd, "gone", 0755), 0);
	fd = openat(x->dirfd, "gone", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(unlinkat(x->dirfd, "gone", AT_REMOVEDIR), 0);
	assert_int_equal(bfs_snap_get(x->fs, fd, &s), -ESTALE);
	close(fd);
}

static void test_sizes_learned(void **state)
{
	struct fx *x = *state;
	struct bfs_snap_ctx c = { .fs = x->fs, .dirfd = x->dirfd };
	uint64_t size = 0;
	dev_t dev;
	ino_t ino;
	struct stat st;

	touch(x->dirfd, "f.lz4");
	assert_int_equal(mkdirat(x->dirfd, "d", 0755), 0);
	tb_settle();
	assert_int_equal(fstatat(x->dirfd, "f.lz4", &st, 0), 0);
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &c.snap), 0);
	/* listed, never sized: a lookup is to open it */
	assert_true(bfs_snap_new_file(&c, "f.lz4", &dev, &ino));
	assert_int_equal(ino, st.st_ino);
	assert_int_equal(dev, st.st_dev);
	assert_false(bfs_snap_new_file(&c, "d", &dev, &ino));
	assert_false(bfs_snap_new_file(&c, "none", &dev, &ino));
	assert_false(bfs_snap_size(&c, "f.lz4", 42, &size));
	bfs_snap_note_size(&c, "f.lz4", 42, 1000);
	assert_true(bfs_snap_size(&c, "f.lz4", 42, &size));
	assert_int_equal(size, 1000);
	assert_false(bfs_snap_size(&c, "f.lz4", 43, &size)); /* another file version */
	assert_false(bfs_snap_new_file(&c, "f.lz4", &dev, &ino));
	bfs_snap_note_size(&c, "f.lz4", 43, 7);
	assert_false(bfs_snap_size(&c, "f.lz4", 42, &size));
	assert_true(bfs_snap_size(&c, "f.lz4", 43, &size));
	assert_int_equal(size, 7);
	bfs_snap_note_size(&c, "none", 43, 7); /* not an entry: nothing */
	/* a reader of the same directory version sees what was learned */
	{
		struct bfs_snap_ctx c2 = { .fs = x->fs, .dirfd = x->dirfd };

		assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &c2.snap), 0);
		assert_true(bfs_snap_size(&c2, "f.lz4", 43, &size));
		bfs_snap_put(c2.snap);
	}
	bfs_snap_save(x->fs, c.snap); /* no index cache: nothing to write */
	bfs_snap_put(c.snap);
}

/* Directory "dN" with @n entries of long names, settled. */
static int make_dir(struct fx *x, int i, int n)
{
	char name[16], f[256];
	int fd;

	snprintf(name, sizeof(name), "d%d", i);
	assert_int_equal(mkdirat(x->dirfd, name, 0755), 0);
	fd = openat(x->dirfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int k = 0; k < n; k++) {
		snprintf(f, sizeof(f), "%0200d", k);
		touch(fd, f);
	}
	return fd;
}

static void test_budget(void **state)
{
	struct fx *x = *state;
	int fd[48];

	for (int i = 0; i < 48; i++)
		fd[i] = make_dir(x, i, 800);
	tb_settle();
	for (int i = 0; i < 48; i++) {
		struct bfs_snap *s;

		assert_int_equal(bfs_snap_get(x->fs, fd[i], &s), 0);
		bfs_snap_put(s);
		assert_true(x->fs->snaps.bytes <= BFS_SNAP_BUDGET);
	}
	/* the oldest were dropped for the newest */
	assert_true(x->fs->snaps.bytes > BFS_SNAP_BUDGET / 2);
	{
		struct bfs_snap *first, *again;

		assert_int_equal(bfs_snap_get(x->fs, fd[0], &first), 0);
		assert_int_equal(bfs_snap_get(x->fs, fd[0], &again), 0);
		assert_ptr_equal(first, again); /* read again, and cached again */
		bfs_snap_put(first);
		bfs_snap_put(again);
	}
	for (int i = 0; i < 48; i++)
		close(fd[i]);
}

static void test_ahead(void **state)
{
	struct fx *x = *state;
	struct bfs_snap_ctx c = { .fs = x->fs, .dirfd = x->dirfd };
	int fd[24];

	assert_int_equal(bfs_workq_new(&x->fs->env.workq, 2, 64, NULL), 0);
	for (int i = 0; i < 24; i++)
		fd[i] = make_dir(x, i, 3);
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &c.snap), 0);
	/* a walk looked up the listing's first directory: the next ones are read ahead */
	bfs_snap_ahead(&c, bfs_snap_at(c.snap, 0).name);
	for (int t = 0, last = -1, now; t < 1000; t++) { /* until the reads settle */
		now = (int)atomic_load(&x->fs->env.mount->dirs_ahead);
		if (now == last && now > 0)
			break;
		last = now;
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
	}
	assert_true(atomic_load(&x->fs->env.mount->dirs_ahead) >= 1);
	assert_true(atomic_load(&x->fs->env.mount->dirs_ahead) <= 16);
	assert_int_equal(atomic_load(&x->fs->snaps.ahead),
			 atomic_load(&x->fs->env.mount->dirs_ahead));
	/* the walk lists them: each read ahead is found, and counted as used */
	for (int i = 0; i < 24; i++) {
		struct bfs_snap *s;

		assert_int_equal(bfs_snap_get(x->fs, fd[i], &s), 0);
		bfs_snap_put(s);
		close(fd[i]);
	}
	/*
	 * ".." and "." are directories of the listing too: read ahead (the
	 * parent's parent) or cached already, never asked for by this walk
	 */
	assert_true(atomic_load(&x->fs->env.mount->dirs_ahead_used) >= 1);
	assert_true(atomic_load(&x->fs->env.mount->dirs_ahead_used) + 1 >=
		    atomic_load(&x->fs->env.mount->dirs_ahead));
	assert_int_equal(atomic_load(&x->fs->snaps.ahead),
			 atomic_load(&x->fs->env.mount->dirs_ahead) -
				 atomic_load(&x->fs->env.mount->dirs_ahead_used));
	bfs_snap_put(c.snap);
}

/* The entry of @sh shown as @name, in *@out: false if none is. */
static bool shown_as(const struct bfs_shown *sh, const char *name, struct bfs_dirent *out)
{
	for (size_t i = 0; bfs_shown_at(sh, i, out) == 0; i++)
		if (strcmp(out->name, name) == 0)
			return true;
	return false;
}

static void test_shown(void **state)
{
	struct fx *x = *state;
	const struct bfs_shown *sh;
	struct bfs_dirent de;
	struct bfs_snap *s;
	struct stat st;
	size_t before, n = 0;

	touch(x->dirfd, "a.txt");
	touch(x->dirfd, "b.lz4");
	assert_int_equal(mkdirat(x->dirfd, "sub", 0755), 0);
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s), 0);
	before = x->fs->snaps.bytes;
	sh = bfs_snap_shown(x->fs, s);
	assert_non_null(sh);
	/* made once, kept with the snapshot, counted in the cache's budget */
	assert_ptr_equal(bfs_snap_shown(x->fs, s), sh);
	assert_int_equal(x->fs->snaps.bytes, before + bfs_shown_bytes(sh));
	while (bfs_shown_at(sh, n, &de) == 0)
		n++;
	assert_int_equal(n, 5); /* ., .., a.txt, b, sub */
	assert_true(shown_as(sh, "b", &de));
	assert_string_equal(de.backing, "b.lz4");
	assert_non_null(de.codec);
	assert_int_equal(de.type, DT_REG);
	assert_int_equal(fstatat(x->dirfd, "b.lz4", &st, 0), 0);
	assert_int_equal(de.ino, bfs_inode_shown_ino(st.st_ino, de.codec));
	assert_true(de.ino != st.st_ino);
	assert_true(shown_as(sh, "a.txt", &de));
	assert_ptr_equal(de.name, de.backing); /* not copied */
	assert_null(de.codec);
	assert_true(shown_as(sh, "sub", &de));
	assert_int_equal(de.type, DT_DIR);
	assert_false(shown_as(sh, "b.lz4", &de));
	bfs_snap_put(s);

	/* keep_compressed: the compressed file is shown too, unchanged */
	x->opts.keep_compressed = 1;
	touch(x->dirfd, "c.txt"); /* a new version of the directory */
	tb_settle();
	assert_int_equal(bfs_snap_get(x->fs, x->dirfd, &s), 0);
	sh = bfs_snap_shown(x->fs, s);
	assert_non_null(sh);
	assert_true(shown_as(sh, "b", &de));
	assert_true(shown_as(sh, "b.lz4", &de));
	assert_null(de.codec);
	bfs_snap_put(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entries_and_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cached_until_changed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_racy_not_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_removed_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sizes_learned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shown, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

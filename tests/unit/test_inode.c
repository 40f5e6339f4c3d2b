// SPDX-License-Identifier: MIT
/*
 * Unit tests of the inode table (inode.c) and the lookups that fill it
 * (lookup.c), on a temporary directory, with only the parts of a mount
 * they use (the options, the counters, the root, the inode table, the
 * descriptor cache and the snapshot cache): one inode per backing object
 * and view, lookups counted and forgotten, the table growing past its
 * first chains, directories found by identity with their paths, the
 * descriptor bound while thousands of inodes are known, a renamed file's
 * inode gone stale once its descriptor was closed, the idle ring's
 * lookup, and the inode numbers the two views show.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/stats.h"
#include "builders.h"
#include "fs_i.h"

struct fx {
	char dir[TB_DIR_MAX];
	struct bfs_opts opts;
	struct bfs_fs *fs;
};

static void touch(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "text\n", 5), 5);
	close(fd);
}

/* A mount of @x->dir in part, with at most @max_fds descriptors cached. */
static int setup_fds(void **state, size_t max_fds)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct bfs_fs *fs;
	struct stat st;

	if (!x)
		return -1;
	fs = x->fs = tb_mount_new(x->dir, "inode", &x->opts, max_fds);
	fs->root_fd = open(x->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->root_fd < 0 || fstat(fs->root_fd, &st) < 0)
		return -1;
	bfs_hints_init(&fs->hints);
	bfs_version_walks_init(&fs->walks);
	if (bfs_inode_table_init(&fs->itab) < 0)
		return -1;
	if (bfs_inode_root_init(fs, &st) < 0)
		return -1;
	*state = x;
	return 0;
}

static int setup(void **state)
{
	return setup_fds(state, 64);
}

static int setup_few_fds(void **state)
{
	return setup_fds(state, 8);
}

static int teardown(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;

	bfs_inode_table_free(fs);
	assert_null(fs->itab.table);
	assert_int_equal(fs->fdc.n, 0); /* every inode's descriptor closed */
	bfs_version_walks_destroy(&fs->walks);
	bfs_hints_destroy(&fs->hints);
	free(fs->root.rpath);
	close(fs->root_fd);
	tb_mount_free(fs, x->dir);
	free(x);
	return 0;
}

static void test_lookup_and_forget(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *a, *a2;
	struct stat st, bst;

	touch(fs->root_fd, "a.txt");
	assert_int_equal(fstatat(fs->root_fd, "a.txt", &bst, 0), 0);
	assert_int_equal(bfs_lookup(fs, &fs->root, "a.txt", &a, &st), 0);
	assert_int_equal(bfs_inode_count(fs), 1);
	assert_int_equal(st.st_ino, bst.st_ino); /* the raw view keeps the number */
	assert_int_equal(st.st_size, 5);
	assert_int_equal(st.st_blksize, 1 << 20);
	assert_string_equal(a->rpath, "a.txt");
	assert_null(a->codec);
	assert_int_equal(a->type, S_IFREG);
	/* found again: the same inode, one more lookup, and its descriptor kept */
	assert_int_equal(bfs_lookup(fs, &fs->root, "a.txt", &a2, &st), 0);
	assert_ptr_equal(a, a2);
	assert_int_equal(a->nlookup, 2);
	assert_int_equal(bfs_inode_count(fs), 1);
	assert_true(a->fde.fd >= 0);
	assert_true(a->fde.rdonly); /* a regular file: open for reading */
	assert_ptr_equal(bfs_inode_ref(fs, &bst, NULL), a);
	assert_true(bfs_inode_known(fs, bst.st_dev, bst.st_ino, NULL));
	assert_false(bfs_inode_known(fs, bst.st_dev, bst.st_ino, &bfs_codec_lz4));
	bfs_inode_forget(fs, a, 2);
	assert_int_equal(bfs_inode_count(fs), 1);
	bfs_inode_forget(fs, a, 1);
	assert_int_equal(bfs_inode_count(fs), 0);
	assert_false(bfs_inode_known(fs, bst.st_dev, bst.st_ino, NULL));
	assert_int_equal(fs->fdc.n, 0); /* its descriptor went with it */
	/* the root is never forgotten */
	bfs_inode_forget(fs, &fs->root, 1);
	assert_int_equal(fs->root.nlookup, 1);
}

static void test_missing_names(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	char longname[NAME_MAX + 2];
	struct bfs_inode *in;
	struct stat st;

	assert_int_equal(bfs_lookup(fs, &fs->root, "none", &in, &st), -ENOENT);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(bfs_lookup(fs, &fs->root, longname, &in, &st), -ENAMETOOLONG);
	assert_int_equal(bfs_inode_count(fs), 0);
}

static void test_directories(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *d, *e, *f;
	struct stat st, dst;
	char *rpath = NULL;
	int dfd;

	assert_int_equal(mkdirat(fs->root_fd, "sub", 0755), 0);
	dfd = openat(fs->root_fd, "sub", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(mkdirat(dfd, "deeper", 0755), 0);
	touch(dfd, "f.txt");
	tb_settle();
	assert_int_equal(bfs_lookup(fs, &fs->root, "sub", &d, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(bfs_lookup(fs, d, "deeper", &e, &st), 0);
	assert_string_equal(e->rpath, "sub/deeper");
	assert_int_equal(bfs_lookup(fs, d, "f.txt", &f, &st), 0);
	assert_string_equal(f->rpath, "sub/f.txt");
	/* a directory the kernel holds, by identity, with its path */
	assert_int_equal(fstat(dfd, &dst), 0);
	assert_ptr_equal(bfs_inode_dir_rpath(fs, &dst, &rpath), d);
	assert_string_equal(rpath, "sub");
	free(rpath);
	assert_int_equal(fstatat(dfd, "f.txt", &dst, 0), 0);
	assert_null(bfs_inode_dir_rpath(fs, &dst, NULL)); /* not a directory */
	assert_int_equal(bfs_inode_count(fs), 3);
	bfs_inode_forget(fs, f, 1);
	bfs_inode_forget(fs, e, 1);
	bfs_inode_forget(fs, d, 1);
	assert_int_equal(bfs_inode_count(fs), 0);
	close(dfd);
}

#define MANY 3000

static void test_growth_and_descriptor_bound(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	static struct bfs_inode *in[MANY];
	char name[32];
	struct stat st;

	for (int i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "f%05d.txt", i);
		touch(fs->root_fd, name);
	}
	tb_settle();
	for (int i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "f%05d.txt", i);
		assert_int_equal(bfs_lookup(fs, &fs->root, name, &in[i], &st), 0);
		assert_true(fs->fdc.n <= 8); /* the bound holds while thousands are known */
	}
	assert_int_equal(bfs_inode_count(fs), MANY);
	assert_true(fs->itab.nbuckets >= MANY / 2); /* chains of two on average at most */
	/* each is found again, by descriptor opened anew by path where it was closed */
	for (int i = 0; i < MANY; i += 97) {
		struct bfs_inode *again;

		snprintf(name, sizeof(name), "f%05d.txt", i);
		assert_int_equal(bfs_lookup(fs, &fs->root, name, &again, &st), 0);
		assert_ptr_equal(again, in[i]);
		bfs_inode_forget(fs, again, 1);
		assert_true(bfs_backing_fd(fs, in[i]) >= 0);
		bfs_backing_fd_put(fs, in[i]);
	}
	for (int i = 0; i < MANY; i++)
		bfs_inode_forget(fs, in[i], 1);
	assert_int_equal(bfs_inode_count(fs), 0);
	assert_int_equal(fs->fdc.n, 0);
}

static void test_renamed_goes_stale(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *a;
	struct stat st;

	touch(fs->root_fd, "old.txt");
	tb_settle();
	assert_int_equal(bfs_lookup(fs, &fs->root, "old.txt", &a, &st), 0);
	assert_int_equal(renameat(fs->root_fd, "old.txt", fs->root_fd, "new.txt"), 0);
	/* while its descriptor is cached, it is reached */
	assert_true(bfs_backing_fd(fs, a) >= 0);
	bfs_backing_fd_put(fs, a);
	assert_int_equal(bfs_backing_check_name(fs, a, &st), -ESTALE);
	/* once closed, its path names nothing: stale, and the VFS looks it up again */
	bfs_fdc_shed(&fs->fdc);
	assert_int_equal(a->fde.fd, -1);
	assert_int_equal(bfs_backing_fd(fs, a), -ESTALE);
	bfs_inode_forget(fs, a, 1);
}

static void test_idle_ring_holds_a_lookup(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *a;
	struct stat st;

	touch(fs->root_fd, "a.txt");
	tb_settle();
	assert_int_equal(bfs_lookup(fs, &fs->root, "a.txt", &a, &st), 0);
	bfs_inode_idle(fs, a);
	assert_true(a->idle);
	assert_int_equal(a->nlookup, 2); /* the ring's */
	bfs_inode_idle(fs, a);		 /* in the ring already: nothing more */
	assert_int_equal(a->nlookup, 2);
	bfs_inode_forget(fs, a, 1);
	assert_int_equal(bfs_inode_count(fs), 1); /* kept while the ring has it */
	bfs_inode_hold(fs, a);
	assert_int_equal(a->nlookup, 2);
	bfs_inode_forget(fs, a, 1);
	/* bfs_inode_table_free() frees it with the table */
}

static void test_shown_ino(void **state)
{
	const struct bfs_codec *lz4 = &bfs_codec_lz4;

	(void)state;
	assert_int_equal(bfs_inode_shown_ino(1234, NULL), 1234);
	assert_int_not_equal(bfs_inode_shown_ino(1234, lz4), 1234);
	assert_int_equal(bfs_inode_shown_ino(bfs_inode_shown_ino(1234, lz4), lz4), 1234);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lookup_and_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_directories, setup, teardown),
		cmocka_unit_test_setup_teardown(test_growth_and_descriptor_bound, setup_few_fds,
						teardown),
		cmocka_unit_test_setup_teardown(test_renamed_goes_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_ring_holds_a_lookup, setup, teardown),
		cmocka_unit_test(test_shown_ino),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

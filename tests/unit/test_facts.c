// SPDX-License-Identifier: MIT
/*
 * Unit tests of what is known about a backing file (facts.c), on a
 * temporary directory, with only the parts of a mount it uses (as
 * test_inode.c): a size kept in an inode's memo answers under its stamp
 * only, a version that holds the inode is not overwritten, a stat's size
 * comes from open readers' version or the memo (a misnamed file's too),
 * a size shared with the directory's snapshot answers the next lookup
 * there, and a lookup's open to stat leaves its descriptor with the inode.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/stats.h"
#include "facts.h"
#include "fs_i.h"
#include "version.h"
#include "builders.h"

struct fx {
	char dir[64];
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

/* @name in @dirfd: one LZ4 frame of @n bytes of text. */
static void lz4_file(int dirfd, const char *name, size_t n)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, n);
	struct tb_buf b = { 0 };
	uint8_t *text = tb_text(n, 7);
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	tb_lz4_frame(&b, text, n, &p);
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	close(fd);
	free(b.p);
	free(text);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct bfs_fs *fs;
	struct stat st;

	if (!x)
		return -1;
	snprintf(x->dir, sizeof(x->dir), "/dev/shm/bfs-facts.XXXXXX");
	if (!mkdtemp(x->dir)) {
		snprintf(x->dir, sizeof(x->dir), "/tmp/bfs-facts.XXXXXX");
		if (!mkdtemp(x->dir))
			return -1;
	}
	fs = x->fs = calloc(1, sizeof(*x->fs));
	if (!fs)
		return -1;
	fs->opts = &x->opts;
	fs->env.mount = bfs_counters_new(NULL);
	fs->root_fd = open(x->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!fs->env.mount || fs->root_fd < 0 || fstat(fs->root_fd, &st) < 0)
		return -1;
	bfs_fdc_init(&fs->fdc, 64);
	bfs_hints_init(&fs->hints);
	bfs_version_walks_init(&fs->walks);
	if (bfs_inode_table_init(&fs->itab) < 0 || bfs_snap_cache_init(&fs->snaps) < 0)
		return -1;
	fs->root.rpath = strdup(".");
	bfs_fdc_ent_init(&fs->root.fde);
	fs->root.fde.fd = fs->root_fd;
	fs->root.dev = st.st_dev;
	fs->root.ino = st.st_ino;
	fs->root.type = S_IFDIR;
	fs->root.nlookup = 1;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	int dfd = open(x->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	bfs_inode_table_free(fs);
	assert_int_equal(fs->fdc.n, 0);
	bfs_snap_cache_free(fs);
	bfs_version_walks_destroy(&fs->walks);
	bfs_fdc_destroy(&fs->fdc);
	bfs_hints_destroy(&fs->hints);
	bfs_counters_put(fs->env.mount);
	free(fs->root.rpath);
	close(fs->root_fd);
	free(fs);
	if (dfd >= 0) {
		unlinkat(dfd, "a.lz4", 0);
		close(dfd);
	}
	rmdir(x->dir);
	free(x);
	return 0;
}

static void test_inode_size(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *in;
	uint64_t stamp, size = 0;
	struct stat st;

	touch(fs->root_fd, "a.lz4");
	assert_int_equal(fstatat(fs->root_fd, "a.lz4", &st, 0), 0);
	stamp = bfs_backing_stamp(&st);
	assert_int_equal(bfs_inode_get(fs, -1, false, &st, &bfs_codec_lz4, &in), 0);
	assert_false(bfs_facts_inode_size(fs, in, stamp, &size)); /* nothing known yet */
	bfs_facts_keep_size(fs, in, stamp, 4096);
	assert_true(bfs_facts_inode_size(fs, in, stamp, &size));
	assert_int_equal(size, 4096);
	/* the same stamp again: the first answer stays */
	bfs_facts_keep_size(fs, in, stamp, 1);
	assert_true(bfs_facts_inode_size(fs, in, stamp, &size));
	assert_int_equal(size, 4096);
	/* another stamp (the file changed): unknown until kept */
	assert_false(bfs_facts_inode_size(fs, in, stamp ^ 1, &size));
	bfs_facts_keep_size(fs, in, stamp ^ 1, 7);
	assert_true(bfs_facts_inode_size(fs, in, stamp ^ 1, &size));
	assert_int_equal(size, 7);
	assert_false(bfs_facts_inode_size(fs, in, stamp, &size));
	assert_int_equal(fs->fdc.n, 0); /* no descriptor was opened */
	bfs_inode_forget(fs, in, 1);
}

static void test_shown_size(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *in;
	uint64_t stamp, size = 0;
	struct stat st;

	touch(fs->root_fd, "a.lz4");
	assert_int_equal(fstatat(fs->root_fd, "a.lz4", &st, 0), 0);
	stamp = bfs_backing_stamp(&st);
	assert_int_equal(bfs_inode_get(fs, -1, false, &st, &bfs_codec_lz4, &in), 0);
	in->kstale = true;
	assert_false(bfs_facts_shown_size(fs, in, stamp, false, &size)); /* a version must tell */
	assert_true(in->kstale);
	assert_false(bfs_facts_memo_only(fs, in, stamp));
	bfs_facts_keep_size(fs, in, stamp, 4096);
	assert_true(bfs_facts_memo_only(fs, in, stamp)); /* an open may go without a version */
	assert_false(bfs_facts_memo_only(fs, in, stamp ^ 1));
	assert_true(bfs_facts_shown_size(fs, in, stamp, false, &size));
	assert_int_equal(size, 4096);
	assert_false(in->kstale); /* the memo's size is what READs will build from */
	in->kstale = true;
	assert_true(bfs_facts_shown_size(fs, in, stamp, true, &size)); /* kernel_open alike */
	assert_int_equal(size, 4096);
	assert_false(in->kstale);
	/* the file changed since: neither answers, and the kernel's size stays stale */
	in->kstale = true;
	size = 0;
	assert_false(bfs_facts_shown_size(fs, in, stamp ^ 1, false, &size));
	assert_false(bfs_facts_shown_size(fs, in, stamp ^ 1, true, &size));
	assert_int_equal(size, 0);
	assert_true(in->kstale);
	assert_int_equal(fs->fdc.n, 0); /* no descriptor was opened */
	bfs_inode_forget(fs, in, 1);
}

/*
 * Look "a" up (backing a.lz4, made by the caller) and build its version:
 * the backing stat in @st, the size the lookup showed in @shown; returns
 * the backing stamp.
 */
static uint64_t look_up_built(struct bfs_fs *fs, struct stat *st, struct stat *shown,
			      struct bfs_inode **in, struct bfs_file **f)
{
	bool changed = false;

	assert_int_equal(fstatat(fs->root_fd, "a.lz4", st, 0), 0);
	assert_int_equal(bfs_lookup(fs, &fs->root, "a", in, shown), 0);
	assert_int_equal(bfs_version_current(fs, *in, f, &changed), 0);
	return bfs_backing_stamp(st);
}

/*
 * A misnamed file (plain text called a.lz4): its version refuses its
 * opens, so a lookup cannot take its size from the memo, but a stat does,
 * and the size it shows is the backing file's.
 */
static void test_shown_size_misnamed(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *in;
	struct bfs_file *f;
	uint64_t stamp, size = 0;
	struct stat st, shown;

	touch(fs->root_fd, "a.lz4");
	stamp = look_up_built(fs, &st, &shown, &in, &f);
	assert_int_equal(shown.st_size, st.st_size);
	assert_non_null(f->found);
	assert_false(bfs_facts_memo_only(fs, in, stamp)); /* its version is kept: opens fail */
	assert_false(bfs_facts_inode_size(fs, in, stamp, &size));
	in->kstale = true;
	assert_true(bfs_facts_shown_size(fs, in, stamp, false, &size));
	assert_int_equal(size, (uint64_t)st.st_size);
	assert_false(in->kstale);
	shown = st;
	assert_int_equal(bfs_version_shown(fs, in, &shown), 0);
	assert_int_equal(shown.st_size, st.st_size);
	assert_ptr_equal(in->file, f); /* the same version: nothing built again */
	bfs_file_put(f);
	bfs_inode_forget(fs, in, 1);
}

/*
 * Open readers hold a version: its size is shown whatever the backing
 * file's stamp, unless kernel_open, when no reader counts and the memo of
 * the stamp answers alone.
 */
static void test_shown_size_readers(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *in;
	struct bfs_file *f;
	uint64_t stamp, size = 0;
	struct stat st, shown;

	lz4_file(fs->root_fd, "a.lz4", 1000);
	stamp = look_up_built(fs, &st, &shown, &in, &f);
	assert_int_equal(shown.st_size, 1000);
	assert_null(f->found);
	assert_int_equal(bfs_file_size(f), 1000);
	assert_false(bfs_facts_memo_only(fs, in, stamp)); /* a version is built */
	atomic_fetch_add(&f->readers, 1);		  /* as an open stream does */
	in->kstale = true;
	assert_true(bfs_facts_shown_size(fs, in, stamp ^ 1, false, &size));
	assert_int_equal(size, bfs_file_size(f));
	assert_true(in->kstale); /* the readers' version answered, not the memo */
	size = 0;
	assert_false(bfs_facts_shown_size(fs, in, stamp ^ 1, true, &size));
	assert_true(bfs_facts_shown_size(fs, in, stamp, true, &size));
	assert_int_equal(size, bfs_file_size(f));
	assert_false(in->kstale);
	atomic_fetch_sub(&f->readers, 1);
	size = 0;
	assert_false(bfs_facts_shown_size(fs, in, stamp ^ 1, false, &size));
	bfs_file_put(f);
	bfs_inode_forget(fs, in, 1);
}

static void test_shared_with_snapshot(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_snap_ctx sc = { .fs = fs, .dirfd = fs->root_fd };
	struct bfs_inode *in;
	uint64_t stamp, size = 0;
	struct stat st;

	touch(fs->root_fd, "a.lz4");
	tb_settle();
	assert_int_equal(fstatat(fs->root_fd, "a.lz4", &st, 0), 0);
	stamp = bfs_backing_stamp(&st);
	assert_int_equal(bfs_snap_get(fs, fs->root_fd, &sc.snap), 0);
	assert_false(bfs_facts_listed_size(&sc, "a.lz4", stamp, &size));
	assert_false(bfs_facts_listed_size(NULL, "a.lz4", stamp, &size)); /* no snapshot */
	assert_int_equal(bfs_inode_get(fs, -1, false, &st, &bfs_codec_lz4, &in), 0);
	bfs_facts_share_size(fs, in, &sc, "a.lz4", stamp); /* knows nothing: shares nothing */
	assert_false(bfs_facts_listed_size(&sc, "a.lz4", stamp, &size));
	bfs_facts_keep_size(fs, in, stamp, 12345);
	bfs_facts_share_size(fs, in, &sc, "a.lz4", stamp);
	bfs_facts_share_size(fs, in, NULL, "a.lz4", stamp); /* no snapshot: nothing */
	assert_true(bfs_facts_listed_size(&sc, "a.lz4", stamp, &size));
	assert_int_equal(size, 12345);
	assert_false(bfs_facts_listed_size(&sc, "a.lz4", stamp ^ 1, &size));
	assert_false(bfs_facts_listed_size(&sc, "b.lz4", stamp, &size)); /* not listed */
	bfs_inode_forget(fs, in, 1);
	bfs_snap_put(sc.snap);
}

/*
 * Open to stat, then adopt: the inode keeps the descriptor, open for
 * reading when it is a regular file, O_PATH otherwise (a directory too
 * when the caller took it for a regular file); a known inode gains a
 * lookup and keeps the one it has.
 */
static void test_open_inode(void **state)
{
	struct fx *x = *state;
	struct bfs_fs *fs = x->fs;
	struct bfs_inode *in, *again, *d;
	struct stat st, ref;

	touch(fs->root_fd, "a.lz4");
	assert_int_equal(fstatat(fs->root_fd, "a.lz4", &ref, 0), 0);
	assert_int_equal(bfs_facts_open_inode(fs, fs->root_fd, "a.lz4", true, &bfs_codec_lz4, &st,
					      &in),
			 0);
	assert_int_equal(st.st_ino, ref.st_ino);
	assert_int_equal(in->nlookup, 1);
	assert_ptr_equal(in->codec, &bfs_codec_lz4);
	assert_int_equal(fs->fdc.n, 1);
	assert_true(in->fde.fd >= 0 && in->fde.rdonly);
	assert_int_equal(atomic_load(&fs->env.mount->lookup_opens), 1);
	assert_int_equal(bfs_facts_open_inode(fs, fs->root_fd, "a.lz4", true, &bfs_codec_lz4, &st,
					      &again),
			 0);
	assert_ptr_equal(again, in);
	assert_int_equal(in->nlookup, 2);
	assert_int_equal(fs->fdc.n, 1); /* the second descriptor closed: one is kept */
	assert_int_equal(atomic_load(&fs->env.mount->lookup_opens), 2);

	assert_int_equal(mkdirat(fs->root_fd, "d", 0755), 0);
	assert_int_equal(bfs_facts_open_inode(fs, fs->root_fd, "d", true, &bfs_codec_lz4, &st, &d),
			 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_null(d->codec); /* only regular files are decoded */
	assert_true(d->fde.fd >= 0 && !d->fde.rdonly);
	assert_int_equal(fs->fdc.n, 2);
	assert_int_equal(bfs_facts_open_inode(fs, fs->root_fd, "none.lz4", true, &bfs_codec_lz4,
					      &st, &again),
			 -ENOENT);
	assert_int_equal(fs->fdc.n, 2);
	bfs_inode_forget(fs, d, 1);
	bfs_inode_forget(fs, in, 2);
	assert_int_equal(unlinkat(fs->root_fd, "d", AT_REMOVEDIR), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_inode_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shown_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shown_size_misnamed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shown_size_readers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_with_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_inode, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

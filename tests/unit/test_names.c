// SPDX-License-Identifier: MIT
/* The name rules (names.h) over a fake directory: names and types only. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/names.h"

struct fake_ent {
	const char *name;
	bool dir; /* a directory; else a regular file */
};

struct fake_dir {
	const struct fake_ent *e;
	size_t n;
};

static const struct fake_ent *find(const struct fake_dir *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->e[i].name, name) == 0)
			return &d->e[i];
	return NULL;
}

static bool fake_exists(void *ctx, const char *name)
{
	return find(ctx, name) != NULL;
}

static bool fake_is_file(void *ctx, const char *name)
{
	const struct fake_ent *e = find(ctx, name);

	return e && !e->dir;
}

static const struct bfs_name_ops ops = { .exists = fake_exists, .is_file = fake_is_file };

#define DIR true

#define LZ4  (&bfs_codec_lz4)
#define BGZF (&bfs_codec_bgzf)
#define DIR_OF(arr)                                             \
	{                                                       \
		.e = (arr), .n = sizeof(arr) / sizeof((arr)[0]) \
	}

/* Without keep_compressed unless said: the names rules' @keep. */
static bool keep;

static void expect_shown(struct fake_dir *d, const char *backing, const char *shown,
			 const struct bfs_codec *codec)
{
	char out[NAME_MAX + 1];
	const struct bfs_codec *c = (const void *)1;

	assert_true(bfs_name_shown(&ops, d, backing, out, &c, keep, NULL));
	assert_string_equal(out, shown);
	assert_ptr_equal(c, codec);
}

static void expect_hidden(struct fake_dir *d, const char *backing)
{
	char out[NAME_MAX + 1];
	const struct bfs_codec *c = (const void *)1;

	assert_false(bfs_name_shown(&ops, d, backing, out, &c, keep, NULL));
}

static void expect_resolve(struct fake_dir *d, const char *name, int rc, const char *backing,
			   const struct bfs_codec *codec)
{
	char out[NAME_MAX + 1];
	const struct bfs_codec *c = (const void *)1;

	assert_int_equal(bfs_name_resolve(&ops, d, name, out, &c, keep, NULL), rc);
	if (rc == 0) {
		assert_string_equal(out, backing);
		assert_ptr_equal(c, codec);
	}
}

static int keep_off(void **state)
{
	(void)state;
	keep = false;
	return 0;
}

static void test_lz4_shown_without_suffix(void **state)
{
	static const struct fake_ent e[] = { { "data.lz4", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "data.lz4", "data", LZ4);
	expect_resolve(&d, "data", 0, "data.lz4", LZ4);
	expect_resolve(&d, "data.lz4", -ENOENT, NULL, NULL);
}

static void test_bgzf_both_suffixes(void **state)
{
	static const struct fake_ent e[] = { { "a.gz", false }, { "b.bgz", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "a.gz", "a", BGZF);
	expect_shown(&d, "b.bgz", "b", BGZF);
	expect_resolve(&d, "b", 0, "b.bgz", BGZF);
}

static void test_plain_file_keeps_its_name(void **state)
{
	static const struct fake_ent e[] = { { "x", false }, { "x.lz4", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "x", "x", NULL);
	expect_shown(&d, "x.lz4", "x.lz4", NULL);
	expect_resolve(&d, "x", 0, "x", NULL);
	expect_resolve(&d, "x.lz4", 0, "x.lz4", NULL);
}

static void test_names_from_suffix_alone(void **state)
{
	/*
	 * Whatever the bytes (plain gzip, text named .gz, lz4 -BD): a
	 * regular file is named by its suffix; a directory keeps its name.
	 */
	static const struct fake_ent e[] = { { "p.gz", false },
					     { "y.lz4", DIR },
					     { "t.tgz", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "p.gz", "p", BGZF);
	expect_resolve(&d, "p", 0, "p.gz", BGZF);
	expect_shown(&d, "y.lz4", "y.lz4", NULL);
	expect_resolve(&d, "y", -ENOENT, NULL, NULL);
	expect_resolve(&d, "y.lz4", 0, "y.lz4", NULL);
	expect_shown(&d, "t.tgz", "t.tar", BGZF);
	expect_resolve(&d, "t.tar", 0, "t.tgz", BGZF);
	expect_resolve(&d, "t", -ENOENT, NULL, NULL);
}

/* x.tar.gz and x.tgz both name x.tar: the earlier suffix (.gz) wins. */
static void test_tar_suffixes_collide(void **state)
{
	static const struct fake_ent e[] = { { "x.tar.gz", false }, { "x.tgz", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "x.tar.gz", "x.tar", BGZF);
	expect_shown(&d, "x.tgz", "x.tgz", NULL);
	expect_resolve(&d, "x.tar", 0, "x.tar.gz", BGZF);
	expect_resolve(&d, "x.tgz", 0, "x.tgz", NULL);
}

static void test_lz4_wins_over_gz(void **state)
{
	static const struct fake_ent e[] = { { "s.gz", false }, { "s.lz4", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "s.lz4", "s", LZ4);
	expect_shown(&d, "s.gz", "s.gz", NULL);
	expect_resolve(&d, "s", 0, "s.lz4", LZ4);
	expect_resolve(&d, "s.gz", 0, "s.gz", NULL);
}

static void test_gz_wins_over_bgz(void **state)
{
	static const struct fake_ent e[] = { { "s.bgz", false }, { "s.gz", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "s.gz", "s", BGZF);
	expect_shown(&d, "s.bgz", "s.bgz", NULL);
}

static void test_directory_lz4_does_not_block_gz(void **state)
{
	static const struct fake_ent e[] = { { "s.lz4", DIR }, { "s.gz", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "s.gz", "s", BGZF);
	expect_shown(&d, "s.lz4", "s.lz4", NULL);
	expect_resolve(&d, "s", 0, "s.gz", BGZF);
}

static void test_suffix_alone_is_not_a_name(void **state)
{
	static const struct fake_ent e[] = { { ".lz4", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, ".lz4", ".lz4", NULL);
	expect_resolve(&d, "", -ENOENT, NULL, NULL);
}

static void test_double_suffix(void **state)
{
	static const struct fake_ent e[] = { { "a.lz4", false }, { "a.lz4.lz4", false } };
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_shown(&d, "a.lz4", "a", LZ4);
	expect_shown(&d, "a.lz4.lz4", "a.lz4.lz4", NULL); /* its stem exists */
	expect_resolve(&d, "a.lz4", -ENOENT, NULL, NULL); /* shown as "a" */
	expect_resolve(&d, "a.lz4.lz4", 0, "a.lz4.lz4", NULL);
}

static void test_longest_names(void **state)
{
	char stem[NAME_MAX + 1], full[NAME_MAX + 8];
	struct fake_ent e[1];
	struct fake_dir d = { .e = e, .n = 1 };

	(void)state;
	memset(stem, 'n', NAME_MAX - 4);
	stem[NAME_MAX - 4] = '\0';
	snprintf(full, sizeof(full), "%s.lz4", stem);
	e[0] = (struct fake_ent){ full, false };
	expect_shown(&d, full, stem, LZ4);
	expect_resolve(&d, stem, 0, full, LZ4);

	/* one more byte and stem.lz4 would not fit: but stem.gz still may */
	strcat(stem, "n");
	snprintf(full, sizeof(full), "%s.gz", stem);
	e[0] = (struct fake_ent){ full, false };
	expect_resolve(&d, stem, 0, full, BGZF);
}

/* Sidecars of a file shown decoded are hidden; those of others are not. */
static void test_sidecars_hidden(void **state)
{
	static const struct fake_ent e[] = {
		{ "calls.vcf.gz", false },
		{ "calls.vcf.gz.tbi", false },
		{ "calls.vcf.gz.csi", false },
		{ "ref.fa.gz", false },
		{ "ref.fa.gz.fai", false },
		{ "ref.fa.gz.gzi", false },
		{ "r.bgz", false },
		{ "r.bgz.gzi", false },
		{ "r.bgz.tbi", false },
		{ "plain.gz", DIR },
		{ "plain.gz.tbi", false },
		{ "orphan.gz.tbi", false },
		{ "x.lz4", false },
		{ "x.lz4.gzi", false },
	};
	struct fake_dir d = DIR_OF(e);

	(void)state;
	expect_hidden(&d, "calls.vcf.gz.tbi");
	expect_hidden(&d, "calls.vcf.gz.csi");
	expect_hidden(&d, "ref.fa.gz.fai");
	expect_hidden(&d, "ref.fa.gz.gzi");
	expect_hidden(&d, "r.bgz.gzi");
	expect_resolve(&d, "calls.vcf.gz.tbi", -ENOENT, NULL, NULL);
	expect_resolve(&d, "r.bgz.gzi", -ENOENT, NULL, NULL);
	/* only .gzi goes with .bgz; a directory is shown as it is; no file; not a .gz */
	expect_shown(&d, "r.bgz.tbi", "r.bgz.tbi", NULL);
	expect_shown(&d, "plain.gz.tbi", "plain.gz.tbi", NULL);
	expect_shown(&d, "orphan.gz.tbi", "orphan.gz.tbi", NULL);
	expect_shown(&d, "x.lz4.gzi", "x.lz4.gzi", NULL);
	expect_resolve(&d, "plain.gz.tbi", 0, "plain.gz.tbi", NULL);
	expect_shown(&d, "calls.vcf.gz", "calls.vcf", BGZF);
	expect_resolve(&d, "calls.vcf.gz", -ENOENT, NULL, NULL);
}

/* keep_compressed: the compressed file is found under its own name, raw, sidecars too. */
static void test_keep_compressed(void **state)
{
	static const struct fake_ent e[] = {
		{ "calls.vcf.gz", false }, { "calls.vcf.gz.tbi", false },
		{ "d.lz4", false },	   { "s.gz", false },
		{ "s.lz4", false },
	};
	struct fake_dir d = DIR_OF(e);

	(void)state;
	keep = true;
	expect_shown(&d, "calls.vcf.gz", "calls.vcf", BGZF); /* the caller lists it raw too */
	expect_resolve(&d, "calls.vcf", 0, "calls.vcf.gz", BGZF);
	expect_resolve(&d, "calls.vcf.gz", 0, "calls.vcf.gz", NULL);
	expect_shown(&d, "calls.vcf.gz.tbi", "calls.vcf.gz.tbi", NULL);
	expect_resolve(&d, "calls.vcf.gz.tbi", 0, "calls.vcf.gz.tbi", NULL);
	expect_resolve(&d, "d", 0, "d.lz4", LZ4);
	expect_resolve(&d, "d.lz4", 0, "d.lz4", NULL);
	/* the collision rule stands: s.lz4 decoded as s, s.gz shown as it is */
	expect_resolve(&d, "s", 0, "s.lz4", LZ4);
	expect_resolve(&d, "s.gz", 0, "s.gz", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz4_shown_without_suffix),
		cmocka_unit_test(test_bgzf_both_suffixes),
		cmocka_unit_test(test_plain_file_keeps_its_name),
		cmocka_unit_test(test_names_from_suffix_alone),
		cmocka_unit_test(test_tar_suffixes_collide),
		cmocka_unit_test(test_lz4_wins_over_gz),
		cmocka_unit_test(test_gz_wins_over_bgz),
		cmocka_unit_test(test_directory_lz4_does_not_block_gz),
		cmocka_unit_test(test_suffix_alone_is_not_a_name),
		cmocka_unit_test(test_double_suffix),
		cmocka_unit_test(test_longest_names),
		cmocka_unit_test(test_sidecars_hidden),
		cmocka_unit_test_setup(test_keep_compressed, keep_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: MIT
/*
 * Unit tests of how mount(8) starts blockfs (mount_helper.c): the helper
 * convention's command line made into blockfs's, fstab's bookkeeping
 * options dropped, a fake mount done by doing nothing; mount.fuse3's
 * ",dev,suid" taken back off; and the lines of /proc/self/mountinfo that
 * name this mount (mountinfo.c), escapes and all.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mount_helper.h"
#include "mountinfo.h"

/* Run bfs_helper_args() on @argv (NULL-ended); its words joined by spaces into @out. */
static int helper(const char *const *argv, char *out, size_t len)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char *copy[16];
	int argc = 0, rc;

	while (argv[argc]) {
		copy[argc] = strdup(argv[argc]);
		assert_non_null(copy[argc]);
		argc++;
	}
	rc = bfs_helper_args(argc, copy, &args);
	out[0] = '\0';
	for (int i = 0; i < args.argc; i++) {
		strncat(out, i ? " " : "", len - strlen(out) - 1);
		strncat(out, args.argv[i], len - strlen(out) - 1);
	}
	fuse_opt_free_args(&args);
	for (int i = 0; i < argc; i++)
		free(copy[i]);
	return rc;
}

static void test_helper_convention(void **state)
{
	static const char *const fstab[] = {
		"mount.blockfs",
		"/data",
		"/mnt",
		"-o",
		"ro,noauto,x-systemd.automount,_netdev,cache_size=1M,comment=x,nofail",
		NULL
	};
	static const char *const flags[] = { "mount.blockfs",
					     "/data",
					     "/mnt",
					     "-n",
					     "-s",
					     "-v",
					     "-t",
					     "fuse.blockfs",
					     "-o",
					     "defaults",
					     "-o",
					     "readpath=pread",
					     NULL };
	static const char *const bare[] = { "mount.blockfs", "/data", "/mnt", "-o", "users", NULL };
	char got[256];

	(void)state;
	assert_int_equal(helper(fstab, got, sizeof(got)), 0);
	assert_string_equal(got, "blockfs /data /mnt -o ro,cache_size=1M");
	assert_int_equal(helper(flags, got, sizeof(got)), 0);
	assert_string_equal(got, "blockfs /data /mnt -o readpath=pread");
	assert_int_equal(helper(bare, got, sizeof(got)), 0);
	assert_string_equal(got, "blockfs /data /mnt");
}

static void test_helper_fake_help_and_errors(void **state)
{
	static const char *const fake[] = {
		"mount.blockfs", "/data", "/mnt", "-o", "ro", "-f", NULL
	};
	static const char *const help[] = { "mount.blockfs", "--help", NULL };
	static const char *const version[] = { "mount.blockfs", "-V", NULL };
	static const char *const few[] = { "mount.blockfs", "/data", NULL };
	static const char *const no_value[] = { "mount.blockfs", "/data", "/mnt", "-o", NULL };
	static const char *const unknown[] = { "mount.blockfs", "/data", "/mnt", "-q", NULL };
	char got[256];

	(void)state;
	assert_int_equal(helper(fake, got, sizeof(got)), 1); /* -f is "fake": nothing to do */
	assert_int_equal(helper(help, got, sizeof(got)), 0);
	assert_string_equal(got, "blockfs --help");
	assert_int_equal(helper(version, got, sizeof(got)), 0);
	assert_string_equal(got, "blockfs -V");
	assert_int_equal(helper(few, got, sizeof(got)), -1);
	assert_int_equal(helper(no_value, got, sizeof(got)), -1);
	assert_int_equal(helper(unknown, got, sizeof(got)), -1);
}

/* bfs_drop_mount_fuse_defaults() on "blockfs SRC DIR -o @opts": what -o holds afterwards. */
static void expect_dropped(const char *opts, const char *want)
{
	char o[128];
	char *argv[] = { "blockfs", "/data", "/mnt", "-o", o, NULL };

	strcpy(o, opts);
	bfs_drop_mount_fuse_defaults(5, argv);
	assert_string_equal(argv[4], want);
}

static void test_mount_fuse_defaults(void **state)
{
	(void)state;
	expect_dropped("ro,dev,suid", "ro");
	expect_dropped("dev,suid", "nosuid");	     /* an -o that held nothing else */
	expect_dropped("ro,nodev,suid", "ro,nodev"); /* nodev given: only suid was added */
	expect_dropped("ro,nosuid,dev", "ro,nosuid");
	expect_dropped("ro,nodev,nosuid", "ro,nodev,nosuid");
	expect_dropped("ro,suid", "ro,suid"); /* not what mount.fuse3 appends: asked */
}

static void test_mountinfo_line(void **state)
{
	char fuse[] =
		"36 35 0:52 / /tmp/a\\040b\\134c rw,nosuid,nodev shared:1 - fuse.blockfs /data rw\n";
	char other[] = "36 35 0:52 / /tmp/a\\040b\\134c rw - ext4 /dev/sda1 rw\n";
	char elsewhere[] = "37 35 0:53 / /tmp/x rw - fuse.blockfs /data rw\n";
	char junk[] = "not a mountinfo line\n";
	unsigned int maj = 99, min = 99;

	(void)state;
	assert_true(bfs_mountinfo_line(fuse, "/tmp/a b\\c", &maj, &min));
	assert_int_equal(maj, 0);
	assert_int_equal(min, 52);
	maj = min = 99;
	assert_false(bfs_mountinfo_line(other, "/tmp/a b\\c", &maj, &min));
	assert_false(bfs_mountinfo_line(elsewhere, "/tmp/a b\\c", &maj, &min));
	assert_false(bfs_mountinfo_line(junk, "/tmp/a b\\c", &maj, &min));
	assert_int_equal(maj, 99); /* untouched by lines that do not match */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_helper_convention),
		cmocka_unit_test(test_helper_fake_help_and_errors),
		cmocka_unit_test(test_mount_fuse_defaults),
		cmocka_unit_test(test_mountinfo_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

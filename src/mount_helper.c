// SPDX-License-Identifier: MIT
/*
 * The command lines mount(8) and mount.fuse3 give blockfs, made into the
 * one blockfs parses: the mount helper convention (mount.blockfs SOURCE
 * DIR -o OPTS) and the options mount.fuse3 adds that nobody asked for.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/common.h"
#include "mount_helper.h"

/* mount(8) options that mean nothing to FUSE: fstab and mount bookkeeping. */
static bool mount_only(const char *o, size_t len)
{
	static const char *const names[] = {
		"defaults", "auto",  "noauto",	"user",	  "users", "nouser",
		"owner",    "group", "_netdev", "nofail", "loop",
	};

	for (size_t i = 0; i < BFS_ARRAY_SIZE(names); i++)
		if (strlen(names[i]) == len && strncmp(o, names[i], len) == 0)
			return true;
	return (len >= 2 && strncmp(o, "x-", 2) == 0) ||
	       (len >= 8 && strncmp(o, "comment=", 8) == 0);
}

int bfs_helper_args(int argc, char **argv, struct fuse_args *out)
{
	char *kept = NULL;
	int rc = -1;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0))
		return fuse_opt_add_arg(out, "blockfs") < 0 || fuse_opt_add_arg(out, argv[1]) < 0 ?
			       -1 :
			       0; /* help and versions, as blockfs gives them */
	if (argc < 3)
		return -1;
	if (fuse_opt_add_arg(out, "blockfs") < 0 || fuse_opt_add_arg(out, argv[1]) < 0 ||
	    fuse_opt_add_arg(out, argv[2]) < 0)
		return -1;
	for (int i = 3; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-f") == 0) {
			rc = 1;
			goto out;
		}
		if (strcmp(a, "-n") == 0 || strcmp(a, "-s") == 0 || strcmp(a, "-v") == 0)
			continue;
		if ((strcmp(a, "-t") == 0 || strcmp(a, "-N") == 0) && i + 1 < argc) {
			i++;
			continue;
		}
		if (strcmp(a, "-o") != 0 || i + 1 >= argc)
			goto out;
		for (const char *o = argv[++i]; *o;) {
			size_t len = strcspn(o, ",");

			if (len && !mount_only(o, len)) {
				char *one = strndup(o, len);
				int added = one ? fuse_opt_add_opt(&kept, one) : -1;

				free(one);
				if (added < 0)
					goto out;
			}
			o += len + (o[len] == ',');
		}
	}
	if (kept && (fuse_opt_add_arg(out, "-o") < 0 || fuse_opt_add_arg(out, kept) < 0))
		goto out;
	rc = 0;
out:
	free(kept);
	return rc;
}

bool bfs_run_by_mount_fuse(void)
{
	char path[64], buf[512] = "";
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getppid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return false;
	buf[n] = '\0'; /* argv[] is NUL-separated */
	if (strcmp(buf, "/bin/sh") == 0 && (size_t)n > sizeof("/bin/sh") + 3 &&
	    strcmp(buf + sizeof("/bin/sh"), "-c") == 0)
		return buf[sizeof("/bin/sh") + 3] == '\'';
	return strcmp(strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf, "mount") == 0;
}

/* Does the option list @opts hold the word @w? */
static bool has_word(const char *opts, const char *w)
{
	size_t n = strlen(w);

	for (const char *o = opts; *o; o += strcspn(o, ",") + (o[strcspn(o, ",")] == ',')) {
		if (strncmp(o, w, n) == 0 && (o[n] == ',' || o[n] == '\0'))
			return true;
	}
	return false;
}

/*
 * Every mount is nosuid,nodev unless root asks for suid or dev: a setuid
 * binary or a device node below SOURCE must not act through the mount.
 * libfuse mounts nosuid,nodev unless told suid or dev, and blockfs's -o
 * table takes those four words (opts.c), so only an explicit ask reaches
 * it. mount(8) never passes suid or dev on (they are its defaults), but
 * mount.fuse3, which runs "blockfs SOURCE DIR -o OPTS" for fuse.blockfs
 * mounts when no mount.fuse.blockfs is installed and for "-t fuse
 * blockfs#SOURCE", appends ",dev,suid" to OPTS unless they hold nodev or
 * nosuid (libfuse util/mount.fuse.c): those are nobody's ask.
 */
void bfs_drop_mount_fuse_defaults(int argc, char **argv)
{
	static char none[] = "nosuid"; /* for an -o that held nothing else */
	char tail[16] = "", *opts;
	size_t len, tl;
	int at = 0;

	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "-o") == 0)
			at = i + 1;
	if (!at)
		return;
	opts = argv[at];
	if (!has_word(opts, "nodev"))
		strcat(tail, ",dev");
	if (!has_word(opts, "nosuid"))
		strcat(tail, ",suid");
	len = strlen(opts);
	tl = strlen(tail);
	if (tl == 0)
		return;
	if (len + 1 == tl && strcmp(opts, tail + 1) == 0)
		argv[at] = none; /* an empty -o would be no option at all */
	else if (len > tl && strcmp(opts + len - tl, tail) == 0)
		opts[len - tl] = '\0';
}

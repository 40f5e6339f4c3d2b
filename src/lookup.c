// SPDX-License-Identifier: MIT
/*
 * Lookups (contract in lookup.h): a name shown in a directory resolved by
 * the name rules (names.c) against the directory's snapshot (snap.c), or
 * against the directory itself when there is none, then the backing
 * object found in the inode table (inode.c) or added to it, with its
 * attributes as shown (version.c). Decoded sizes already known are asked
 * of, and handed on through, facts.c, which also opens a file whose stat
 * is taken from the descriptor its new inode keeps.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/file.h"
#include "blockfs/names.h"
#include "facts.h"
#include "fs_i.h"
#include "inode.h"
#include "lookup.h"
#include "version.h"

/* --- name questions answered with syscalls (lookup) ----------------------- */

struct sysdir {
	struct bfs_fs *fs;
	int fd;
	int err; /* a stat's failure other than "no such name", or 0 */
};

/*
 * fstatat of @name in the directory. A failure that does not say the name
 * is absent (ENOTCONN from a network filesystem whose daemon died, EIO,
 * EACCES) is kept in @d->err: the lookup then fails with it, rather than
 * answer ENOENT for a file that may well be there.
 */
static bool sys_stat(struct sysdir *d, const char *name, struct stat *st)
{
	if (fstatat(d->fd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG && !d->err)
		d->err = -errno;
	return false;
}

static bool sys_exists(void *ctx, const char *name)
{
	struct stat st;

	return sys_stat(ctx, name, &st);
}

/* Names come from suffixes alone: is @name a regular file? */
static bool sys_is_file(void *ctx, const char *name)
{
	struct stat st;

	return sys_stat(ctx, name, &st) && S_ISREG(st.st_mode);
}

static const struct bfs_name_ops sys_name_ops = { .exists = sys_exists, .is_file = sys_is_file };

/* --- lookups ------------------------------------------------------------- */

/* Remember where @in was last seen, for sidecars and log lines. */
static void set_rpath(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_inode *in,
		      const char *backing)
{
	char path[PATH_MAX];
	char *p = NULL;
	int n;

	bfs_mutex_lock(bfs_ilock(fs, dir));
	if (strcmp(dir->rpath, ".") == 0)
		n = snprintf(path, sizeof(path), "%s", backing);
	else
		n = snprintf(path, sizeof(path), "%s/%s", dir->rpath, backing);
	bfs_mutex_unlock(bfs_ilock(fs, dir));
	if (n < 0 || (size_t)n >= sizeof(path))
		return; /* keep the old path: it only names things */
	bfs_mutex_lock(bfs_ilock(fs, in));
	/* a lookup after a timeout finds it where it was: no allocation */
	if (!in->rpath || strcmp(in->rpath, path) != 0) {
		p = strdup(path);
		if (p) {
			free(in->rpath);
			in->rpath = p;
		}
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
}

/*
 * The inode of backing entry @backing of @dir (open as @dfd), shown with
 * @codec; its attributes in @st. A name looked up again (the kernel's
 * entry timed out) costs one fstatat and no open while the inode is known;
 * a new inode keeps the descriptor its stat was taken from, open for
 * reading when it is a regular file, so that its versions need no open
 * of their own. @sc: the snapshot the name was resolved in, or NULL.
 */
static int lookup_backing(struct bfs_fs *fs, struct bfs_inode *dir, int dfd,
			  struct bfs_snap_ctx *sc, const char *backing,
			  const struct bfs_codec *codec, struct bfs_inode **out, struct stat *st)
{
	struct bfs_inode *in;
	uint64_t stamp, size;
	bool decoded;
	dev_t dev;
	ino_t ino;
	int rc;

	/*
	 * A regular file as listed, not known here, whose size no memo
	 * gives: it is to be opened anyway, and its stat is taken from the
	 * descriptor (one fstatat a file less). Else by name: a known inode,
	 * or one whose size a memo gives, needs no open until someone reads.
	 */
	if (sc && bfs_snap_new_file(sc, backing, &dev, &ino) &&
	    !bfs_inode_known(fs, dev, ino, codec)) {
		rc = bfs_facts_open_inode(fs, dfd, backing, true, codec, st, &in);
		if (rc < 0)
			return rc;
	} else {
		if (fstatat(dfd, backing, st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		in = bfs_inode_ref(fs, st, S_ISREG(st->st_mode) ? codec : NULL);
		if (!in && codec && S_ISREG(st->st_mode) &&
		    bfs_facts_listed_size(sc, backing, bfs_backing_stamp(st), &size)) {
			rc = bfs_inode_get(fs, -1, false, st, codec, &in);
			if (rc < 0)
				return rc;
			bfs_facts_keep_size(fs, in, bfs_backing_stamp(st), size);
		} else if (!in) {
			rc = bfs_facts_open_inode(fs, dfd, backing, S_ISREG(st->st_mode), codec, st,
						  &in);
			if (rc < 0)
				return rc;
		}
	}
	decoded = codec && S_ISREG(st->st_mode);
	stamp = bfs_backing_stamp(st);
	set_rpath(fs, dir, in, backing);
	rc = bfs_version_shown(fs, in, st);
	if (rc < 0) {
		bfs_inode_forget(fs, in, 1);
		return rc;
	}
	if (decoded)
		bfs_facts_share_size(fs, in, sc, backing,
				     stamp); /* for the next lookup, and mount */
	*out = in;
	return 0;
}

/* Tries: a file rewritten in place between resolving and looking up resolves again. */
#define LOOKUP_TRIES 3

int bfs_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name, struct bfs_inode **out,
	       struct stat *st)
{
	const struct bfs_codec *codec;
	char backing[NAME_MAX + 1];
	struct bfs_snap_ctx sc = { .fs = fs };
	struct sysdir d = { .fs = fs };
	int rc = 0, dfd;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	dfd = bfs_backing_fd(fs, dir);
	if (dfd < 0)
		return dfd;
	sc.dirfd = d.fd = dfd;
	/* No snapshot (no memory, an unreadable directory): ask the directory itself. */
	rc = bfs_snap_get(fs, dfd, &sc.snap);
	if (rc < 0)
		sc.snap = NULL;
	for (int i = 0; i < LOOKUP_TRIES && rc != -ESTALE; i++) { /* ESTALE: removed */
		if (sc.snap)
			rc = bfs_name_resolve(&bfs_snap_name_ops, &sc, name, backing, &codec,
					      fs->opts->keep_compressed, &fs->env.codecs);
		else
			rc = bfs_name_resolve(&sys_name_ops, &d, name, backing, &codec,
					      fs->opts->keep_compressed, &fs->env.codecs);
		if (d.err) {
			rc = d.err; /* an answer made of failed stats is no answer */
			break;
		}
		if (rc == 0)
			rc = lookup_backing(fs, dir, dfd, sc.snap ? &sc : NULL, backing, codec, out,
					    st);
		if (rc != -EAGAIN)
			break;
	}
	if (rc == 0 && sc.snap && S_ISDIR(st->st_mode))
		bfs_snap_ahead(&sc, backing); /* a walk lists it next, then its siblings */
	bfs_snap_put(sc.snap);
	bfs_backing_fd_put(fs, dir);
	return rc == -EAGAIN ? -ESTALE : rc;
}

int bfs_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_snap_ctx *c,
		     const struct bfs_dirent *de, struct bfs_inode **out, struct stat *st)
{
	return lookup_backing(fs, dir, c->dirfd, c, de->backing, de->codec, out, st);
}

// SPDX-License-Identifier: MIT
/*
 * What is known about a backing file (contract in facts.h).
 *
 * The facts, and who holds them now:
 *  - its format (the codec it is shown with): the inode's key (inode.h),
 *    chosen from the name by the name rules (names.c) at lookup; a
 *    misnamed file is told by its version (f->found);
 *  - its decoded size, under the backing change stamp
 *    (bfs_backing_stamp()) it was found under: the current version
 *    (bfs_file_size(in->file)), the inode's memo (in->stamp, in->memo),
 *    the snapshot entry of its directory (snap.c), and the directory's
 *    memo in the index cache (index_cache.h), which the next mount's
 *    first snapshot takes up;
 *  - its descriptor: the inode's entry in the descriptor cache (in->fde,
 *    fdcache.c; opened again by path in backing.c), the version's own
 *    (f->fd, a use of it per open handle), and the one a lookup opened
 *    to take the stat from (bfs_facts_open_inode()), which the inode
 *    adopts;
 *  - the whole bytes of a small file: the version's kept head (f->head),
 *    read through the inode's descriptor when the page cache has them
 *    (version.c read_kept());
 *  - who reads it: the version's reader count (f->readers, one per open
 *    stream, stream.c); while it is above zero a stat shows that
 *    version's size (version.c bfs_version_shown()).
 *
 * The size questions are answered here, cheapest holder first and
 * without a syscall; lookups (lookup.c) ask here and hand what they
 * learn on; a stat (version.c bfs_version_shown()) and an open
 * (bfs_version_open()) ask here before they build a version. A lookup
 * that opens a file to take its stat opens it here, once, and the inode
 * keeps that descriptor (bfs_facts_open_inode()).
 *
 * The inode's descriptor is asked of backing.c, and that is its home:
 * "the cached one, else one opened by path, checked to be this very
 * object and adopted" is one function there (bfs_backing_fd(); with the
 * fresh stat of such an open, bfs_backing_fd_named()), and answering it
 * takes the cache's pins, its shedding on EMFILE and the revival of a
 * dead network handle, which are backing.c's and fdcache.c's. It is asked
 * for a lookup's directory (lookup.c bfs_lookup(), ops.c readdirplus), by
 * a stat (version.c stat_now(), which tries the cached one and else the
 * path without opening; bfs_version_shown() when it must build), and by
 * an open or a deferred open's first READ (bfs_version_open(), file_of(),
 * bfs_version_use()). The version's own descriptor is no other answer to
 * that question: it is a lease on the bytes one version was built from,
 * taken per open handle and read by its READs, and bfs_version_use()
 * already asks it first (bfs_file_use()) and the inode's only when no
 * handle holds it. Where the inode's is asked otherwise, no handle holds
 * the current version's, or it is of bytes since changed: a function here
 * trying the version's first would add a branch and remove none. The
 * small file's bytes likewise have one place they are read, the build of
 * a version (version.c read_kept(), by the inode's descriptor), and are
 * kept by the version they belong to (f->head: decode.c reads from it,
 * bfs_version_stat_of() takes the stat it was built with).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "blockfs/file.h"
#include "blockfs/stats.h"
#include "dir.h"
#include "facts.h"
#include "fs_i.h"
#include "inode.h"

bool bfs_facts_inode_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp, uint64_t *size)
{
	bool known;

	bfs_mutex_lock(bfs_ilock(fs, in));
	/*
	 * The size of the version the stamp names (not one open readers hold
	 * on to); none for a misnamed file, whose lookups must build its
	 * version, which refuses its opens.
	 */
	known = stamp != 0 && in->stamp == stamp && !(in->file && in->file->found);
	if (known)
		*size = in->memo;
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return known;
}

bool bfs_facts_shown_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp, bool kernel_open,
			  uint64_t *size)
{
	bool known = true;

	bfs_mutex_lock(bfs_ilock(fs, in));
	/*
	 * While open readers hold the current version, keep showing it: the
	 * kernel's one i_size serves them too, and a reader whose backing
	 * file shrank must meet EIO, not an early end of file. The next open,
	 * or a stat once they have let go, sees the new file. With
	 * kernel_open no reader has it open as far as blockfs knows (the
	 * ring's shared handles hold versions): the new file is shown, and
	 * READs build a version of it (handle.c). A misnamed file answers
	 * from its memo as any other: a stat of it opens nothing.
	 */
	if (in->file && atomic_load(&in->file->readers) > 0 && !kernel_open) {
		*size = bfs_file_size(in->file);
	} else if (in->stamp == stamp) {
		*size = in->memo;
		in->kstale = false; /* the size of the bytes READs will build from */
	} else {
		known = false;
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return known;
}

bool bfs_facts_memo_only(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp)
{
	bool only;

	bfs_mutex_lock(bfs_ilock(fs, in));
	only = !in->file && in->stamp != 0 && in->stamp == stamp;
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return only;
}

bool bfs_facts_listed_size(struct bfs_snap_ctx *sc, const char *name, uint64_t stamp,
			   uint64_t *size)
{
	return sc && bfs_snap_size(sc, name, stamp, size);
}

void bfs_facts_keep_size(struct bfs_fs *fs, struct bfs_inode *in, uint64_t stamp, uint64_t size)
{
	bfs_mutex_lock(bfs_ilock(fs, in));
	if (in->stamp != stamp && !in->file) {
		in->stamp = stamp;
		in->memo = size;
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
}

void bfs_facts_share_size(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_snap_ctx *sc,
			  const char *name, uint64_t stamp)
{
	uint64_t size;

	if (sc && bfs_facts_inode_size(fs, in, stamp, &size) && size != UINT64_MAX)
		bfs_snap_note_size(sc, name, stamp, size);
}

int bfs_facts_open_inode(struct bfs_fs *fs, int dfd, const char *name, bool reg,
			 const struct bfs_codec *codec, struct stat *st, struct bfs_inode **out)
{
	int fd = -1, rc;
	bool rd = reg;

	if (rd) {
		fd = bfs_backing_openat(fs, dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		if (codec)
			BFS_COUNT(fs->env.mount, lookup_opens, 1);
	}
	if (fd < 0) {
		rd = false; /* not a regular file, or unreadable: stat still works */
		fd = bfs_backing_openat(fs, dfd, name, O_PATH | O_NOFOLLOW);
	}
	if (fd < 0)
		return -errno;
	rc = fstat(fd, st) < 0 ? -errno : 0;
	if (rc == 0 && rd && !S_ISREG(st->st_mode)) {
		/* no longer a regular file: hold nothing open that reading may disturb */
		close(fd);
		return bfs_facts_open_inode(fs, dfd, name, false, codec, st, out);
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return bfs_inode_get(fs, fd, rd, st, codec, out);
}

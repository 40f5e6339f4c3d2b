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
 *    to take the stat from (lookup.c), which the inode adopts;
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
 * (bfs_version_open()) ask here before they build a version. The
 * descriptor and the small file's bytes are still asked of backing.c and
 * version.c directly (doc/design.md, "Facts").
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

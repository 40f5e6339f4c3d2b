/* SPDX-License-Identifier: MIT */
/*
 * Private to the mount's modules: the mounted filesystem, made of parts
 * that each have their own header, init and destroy, and owner file:
 *
 *   itab     the inode table, inode locks, idle ring   inode.h    inode.c
 *   fdc      the inodes' backing descriptors           fdcache.h  fdcache.c
 *   snaps    directory snapshots (listings: dir.c)     dir.h      snap.c
 *   handles  open handles, the kernel_open ring        handle.h   handle.c
 *   rdplus   the readdirplus=auto policy               rdplus.h   rdplus.c
 *   trim     the table within -o max_inodes            trim.h     trim.c
 *   walks    walks under way, for user.blockfs.walk    version.h  version.c
 *
 * and the code over them: lookups (lookup.h), versions and attributes
 * (version.h), backing-file access (backing.h), walks side by side
 * (walkahead.h); fs.c sets them up and tears them down.
 *
 * Descriptors are bounded: an inode's O_PATH descriptor is an entry in a
 * least-recently-used cache (fdcache.h), opened again by path (and checked
 * to be the same object) when it was closed; see bfs_backing_fd(). File
 * versions lease theirs (file.h).
 *
 * Every lock of the daemon, in the order they may be taken: a thread
 * holding one takes only locks below it. None is held across a decode or a
 * FUSE reply; the exceptions for I/O are named.
 *
 *   fs->itab.lock       the inode table, counts and every nlookup (inode.c)
 *   fs->handles.kopen_lock
 *                       the ring of handles READs share under -o kernel_open
 *                       (handle.c); takes the file's inode lock to set its
 *                       shared handle (bfs_stream_take() then takes the
 *                       version's fd_lock, a leaf)
 *   inode lock          bfs_ilock(): one of BFS_ILOCKS stripes, chosen by
 *                       the inode's address (a mutex per inode would be 40
 *                       bytes of every file the kernel remembers). Its
 *                       current version, rpath and memo; held while a new
 *                       version is built (scan, measure on the work queue,
 *                       hints applied), so that concurrent first opens scan
 *                       once. Never two at once (two inodes may share one).
 *                       bfs_backing_fd() takes it when it must reopen:
 *                       never call that with one held.
 *   fs->snaps.lock      the cache of directory snapshots (snap.c); a
 *                       snapshot's entries are atomics, probed without it
 *   fs->fdc.lock        the descriptor cache (fdcache.c)
 *   index settle_lock   settling claimed sizes; held across the backing
 *                       reads settling does (index.c), takes nothing else
 *   --- leaves: nothing is taken while one is held ---
 *   file fd_lock        a version's leased descriptor and its uses (file.c)
 *   hints lock          the hint store (hints.c)
 *   fs->handles.lock    the lists of open handles and directories (handle.c)
 *   fs->itab.idle_lock  the ring of idle inodes (inode.c)
 *   fs->walks.lock      the walks under way (version.c)
 *   stream lock         a reader's window (stream.c)
 *   cache shard lock    one shard; never two at once (cache.c)
 *   maps lock           the live mappings; held across mmap/munmap (mmap.c)
 *   work queue lock     its FIFO (workq.c); a parallel for's own lock
 *   xattr memo lock     the size-query memo (xattr.c)
 */
#ifndef BLOCKFS_FS_I_H
#define BLOCKFS_FS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backing.h"
#include "blockfs/file.h"
#include "blockfs/gate.h"
#include "blockfs/hints.h"
#include "blockfs/opts.h"
#include "dir.h"
#include "fdcache.h"
#include "handle.h"
#include "inode.h"
#include "lookup.h"
#include "rdplus.h"
#include "trim.h"
#include "version.h"
#include "walkahead.h"

struct fuse_session;

/* The hook that pushes decoded pages to the kernel (file.h, env->push). */
typedef int (*bfs_push_fn)(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len);

struct bfs_fs {
	const struct bfs_opts *opts;
	struct bfs_file_env env; /* the cache and the mount's counters */
	struct fuse_session *se; /* for notifications; set once mounted */
	struct bfs_hints hints;	 /* user.blockfs.advice/readpath by backing path */
	struct bfs_trim trim;	 /* -o max_inodes (trim.h) */
	int root_fd;		 /* O_PATH of SOURCE; the root inode's fd */
	struct bfs_inode root;
	struct bfs_itable itab;	    /* the inode table (inode.h) */
	struct bfs_fdc fdc;	    /* the inodes' descriptors (fdcache.h) */
	struct bfs_handles handles; /* what the kernel has open, kernel_open's (handle.h) */
	struct bfs_snaps snaps;	    /* the cache of directory snapshots (dir.h) */
	struct bfs_rdplus rdplus;   /* readdirplus=auto: what listed files were used for */
	atomic_bool kernel_open;    /* set at INIT: -o kernel_open, and the kernel can */
	/*
	 * Notifications that may wait for the kernel's locks (a push for
	 * pages a READ holds locked, invalidating a range likewise,
	 * forgetting a directory for the lock a LOOKUP holds) are made off
	 * the FUSE threads, inside this gate: they end only while READs are
	 * answered. main.c shuts it before the session stops answering (on
	 * a signal) or is destroyed.
	 */
	struct bfs_gate notify;
	struct bfs_walks walks; /* the walks under way, for user.blockfs.walk (version.h) */
};

/* The lock of inode @in's version, rpath and memo: a stripe shared with others. */
static inline pthread_mutex_t *bfs_ilock(struct bfs_fs *fs, const struct bfs_inode *in)
{
	uintptr_t h = (uintptr_t)in / 8;

	return &fs->itab.ilocks[(h ^ h >> 9 ^ h >> 18) & (BFS_ILOCKS - 1)];
}

/* --- fs.c: the mount -------------------------------------------------------- */

/**
 * bfs_fs_init() - everything the mount shares, from SOURCE and @opts.
 * @se, @push: the session notifications go to, and the hook that pushes
 *             pages (NULL for no session: tools and tests).
 * Return: 0 or -errno (SOURCE cannot be opened; memory).
 */
BFS_MUST_CHECK int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts,
			       struct fuse_session *se, bfs_push_fn push);
/* Start the workers: after fuse_daemonize(), whose fork threads would not survive. */
BFS_MUST_CHECK int bfs_fs_start(struct bfs_fs *fs);
/* Close what is left open, stop the workers, free it all. After the session ends. */
void bfs_fs_destroy(struct bfs_fs *fs);

#endif

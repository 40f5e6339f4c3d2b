/* SPDX-License-Identifier: MIT */
/*
 * Open handles (handle.c): file handles and directories the kernel has
 * open, listed per mount, and the handles READs share under -o
 * kernel_open. Private to the mount's modules.
 */
#ifndef BLOCKFS_HANDLE_H
#define BLOCKFS_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_dir;
struct bfs_file;
struct bfs_fs;
struct bfs_inode;
struct bfs_stream;

/*
 * What the kernel has open (a file handle, a directory), listed on the
 * mount under fs->handles.lock, so that what the kernel never releases (a
 * lazy unmount, SIGTERM with files open) is freed at the end instead of
 * leaking. The first member of what it lists (handle.c checks).
 */
struct bfs_open {
	struct bfs_open *prev, *next;
};

/*
 * An open file handle (fi->fh): a reader's stream of the version it reads,
 * and a use of that version's descriptor; listed (struct bfs_open). A
 * deferred handle (an open of an unchanged file whose version was
 * dropped: the kernel keeps its pages) builds its stream when a request
 * first needs one, from the backing file the open saw or not at all.
 */
struct bfs_handle {
	struct bfs_open open;		/* protected by fs->handles.lock */
	pthread_mutex_t lock;		/* serializes building @s */
	_Atomic(struct bfs_stream *) s; /* holds the version; NULL while deferred; set once */
	struct bfs_inode *in;		/* deferred: the file (the kernel holds it while open) */
	uint64_t ino;			/* deferred: its node id */
	uint64_t stamp;			/* deferred: bfs_backing_stamp() the open saw */
	atomic_bool hot;		/* kernel_open: read since the ring's hand last passed */
};

/*
 * -o kernel_open: the kernel opens files without asking, so READs come
 * with no handle. The handles they share, one per file, are kept for the
 * last this many files read, evicted by a clock that spares those read
 * since its hand last passed (handle.c).
 */
#define BFS_KOPEN_KEEP 64

/* The mount's part: what is open, and the kernel_open ring (fs->handles). */
struct bfs_handles {
	pthread_mutex_t lock;	       /* a leaf: protects the lists of what is open: */
	struct bfs_open *files, *dirs; /* struct bfs_handle, struct bfs_dir */
	pthread_mutex_t kopen_lock;    /* protects the ring of shared handles: */
	struct {
		struct bfs_inode *in; /* holding a lookup */
		struct bfs_handle *h; /* owned; in->kh while it is the file's */
	} kopen[BFS_KOPEN_KEEP];
	size_t kopen_hand; /* the clock's hand: the slot it looks at next */
};

/* Empty lists and ring (@hs zeroed before, as the mount is). */
void bfs_handles_init(struct bfs_handles *hs);
/*
 * Close what the kernel never released (a lazy unmount, SIGTERM) and
 * the ring's handles: before the workers and the inode table go.
 */
void bfs_handles_close_all(struct bfs_fs *fs);
/* Its locks, after bfs_handles_close_all(). */
void bfs_handles_destroy(struct bfs_handles *hs);

/* A handle reading version @f (taking its own reference) shown as FUSE inode @ino. */
BFS_MUST_CHECK int bfs_handle_open(struct bfs_fs *fs, struct bfs_file *f, uint64_t ino,
				   struct bfs_handle **out);
/*
 * bfs_handle_open_deferred() - a handle of @in (node id @ino) with no
 * version yet, for an open that bfs_version_open() deferred under @stamp.
 */
BFS_MUST_CHECK int bfs_handle_open_deferred(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
					    uint64_t stamp, struct bfs_handle **out);
/*
 * bfs_handle_stream() - @h's stream, built now if it was deferred. NULL
 * with *@err set when it cannot be: -EIO if the backing file is no longer
 * the one the open saw (the kernel's pages and size are that one's).
 */
struct bfs_stream *bfs_handle_stream(struct bfs_fs *fs, struct bfs_handle *h, int *err);
/* @h's version if it has one yet, else NULL (a reference is not taken). */
struct bfs_file *bfs_handle_file(struct bfs_handle *h);
/* Release it: its use of the version's descriptor, its stream. */
void bfs_handle_close(struct bfs_fs *fs, struct bfs_handle *h);
/* bfs_dir_open() and bfs_dir_free(), the directory listed while open. */
BFS_MUST_CHECK int bfs_handle_opendir(struct bfs_fs *fs, struct bfs_inode *dir,
				      struct bfs_dir **out);
void bfs_handle_closedir(struct bfs_fs *fs, struct bfs_dir *d);
/**
 * bfs_handle_kopen() - -o kernel_open: the stream READs of @in (node id
 * @ino) share, taken (bfs_stream_take()): built at the first READ.
 * Return: the stream, or NULL with *@err set: -ESTALE if the backing file
 * is no longer the one whose size the kernel was last told (the caller
 * has the kernel ask again), else as bfs_version_open().
 */
struct bfs_stream *bfs_handle_kopen(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
				    int *err);

#endif

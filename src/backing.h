/* SPDX-License-Identifier: MIT */
/*
 * Backing-file access (backing.c): opening below SOURCE, change stamps,
 * sniffing, and the inodes' descriptors by way of the descriptor cache
 * (fdcache.h). Private to the mount's modules.
 */
#ifndef BLOCKFS_BACKING_H
#define BLOCKFS_BACKING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "blockfs/common.h"

struct bfs_codec;
struct bfs_codec_conf;
struct bfs_fs;
struct bfs_inode;

/* openat(2) below @dirfd, trying once more after shedding cached descriptors. */
BFS_MUST_CHECK int bfs_backing_openat(struct bfs_fs *fs, int dirfd, const char *name, int flags);
/* Open @rpath below @root without following any link, so none leads out of SOURCE. */
BFS_MUST_CHECK int bfs_backing_open_beneath(int root, const char *rpath, int flags);
/* A real descriptor for the object behind O_PATH @opath, shedding on EMFILE once. */
BFS_MUST_CHECK int bfs_backing_reopen(struct bfs_fs *fs, int opath, int flags);
/*
 * bfs_file_env's reopen: @rpath below SOURCE (@ctx, the struct bfs_fs)
 * opened for reading beneath it, not following a link. Return: the
 * descriptor or -errno; whether it is still the same file is the
 * caller's to check.
 */
BFS_MUST_CHECK int bfs_backing_reopen_name(void *ctx, const char *rpath);
/*
 * A backing file's change stamp: a hash of its identity, size, mtime and
 * ctime, never 0. What is remembered about a file holds while it is equal.
 */
uint64_t bfs_backing_stamp(const struct stat *st);
/*
 * A descriptor open for reading on @in, whose pinned descriptor is @fd: a
 * duplicate when that is open for reading already, else reopened (flags
 * O_RDONLY plus @flags). -1 with errno on failure.
 */
BFS_MUST_CHECK int bfs_backing_rdfd(struct bfs_fs *fs, struct bfs_inode *in, int fd, int flags);
/* The codec offered under @conf that claims the file open as @fd (consumed), or NULL. */
const struct bfs_codec *bfs_backing_sniff_fd(const struct bfs_codec_conf *conf, int fd);
/* Is @source on local storage or memory (else: a network, another daemon)? */
bool bfs_backing_is_local(const char *source);
/*
 * Give @in descriptor @fd (consumed unless kept; O_PATH, or open for
 * reading if @rd), pinned if @pin; trims the cache.
 */
void bfs_backing_fd_adopt(struct bfs_fs *fs, struct bfs_inode *in, int fd, bool rd, bool pin);
/*
 * A read through @in's cached descriptor, open for reading and pinned by
 * the caller, failed with @err: when that is EIO, ENOTCONN or ESTALE (a
 * network filesystem's handle gone dead, the file itself alive), put a
 * descriptor opened anew by @rpath (@in's, which the caller holds under
 * @in's lock or a copy) in its place, if @rpath still names @in (same
 * device and inode). The number stays: holders of it read the new one.
 * Return: 0 when replaced; else @err, or -ESTALE when @rpath names
 * another object now.
 */
BFS_MUST_CHECK int bfs_backing_fd_revive(struct bfs_fs *fs, struct bfs_inode *in, const char *rpath,
					 int err);
/* @in is going: close its cached descriptor. */
void bfs_backing_fd_release(struct bfs_fs *fs, struct bfs_inode *in);
/*
 * Does the path @in was last found at still name it? 0 and *@st when it
 * does (its stat, which open then needs anyway), 1 when that cannot be
 * told (the root; an error other than a mismatch), -ESTALE when another
 * object or nothing is there now. One fstatat(2), no open: the cached
 * descriptor, or one opened beneath SOURCE, is what is read.
 */
BFS_MUST_CHECK int bfs_backing_check_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st);

/**
 * bfs_backing_fd() - @inode's O_PATH descriptor, pinned until bfs_backing_fd_put().
 * Opens it again by path if the cache closed it.
 * Return: the descriptor, or -errno: -ESTALE when the path no longer names
 * the object (the VFS then looks the name up again), -ENOENT when it names
 * nothing. Context: never with @inode->lock held.
 */
BFS_MUST_CHECK int bfs_backing_fd(struct bfs_fs *fs, struct bfs_inode *inode);
/*
 * The same; *@named says whether it was opened by path just now, and then
 * *@st is its stat: that open checked the name as bfs_backing_check_name()
 * does.
 */
BFS_MUST_CHECK int bfs_backing_fd_named(struct bfs_fs *fs, struct bfs_inode *inode, struct stat *st,
					bool *named);
void bfs_backing_fd_put(struct bfs_fs *fs, struct bfs_inode *inode);
/* @inode's descriptor pinned (bfs_backing_fd_put()) if it is open now, else -1: never opens. */
int bfs_backing_fd_cached(struct bfs_fs *fs, struct bfs_inode *inode);

#endif

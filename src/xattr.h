/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes (man 8 blockfs, EXTENDED ATTRIBUTES): the user.blockfs.* table, read-only
 * facts and writable hints, and the backing file's own attributes, shown
 * read-only. Values and lists follow the xattr(7) size protocol: size 0
 * asks for the length, a short buffer is -ERANGE.
 */
#ifndef BLOCKFS_XATTR_H
#define BLOCKFS_XATTR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/common.h"

struct bfs_fs;
struct bfs_inode;
struct bfs_file;

#define BFS_XATTR_PREFIX "user.blockfs."

/*
 * What a set asks ops.c to do once it has replied: drop the kernel's
 * cached pages of [off, off + len) of the inode (len 0: to the end), or
 * decode that range of version @f ahead (willneed). ops.c, which alone
 * knows the FUSE inode, does it, then lets go of @f: one reference and
 * one use of its descriptor.
 */
struct bfs_xattr_act {
	enum { BFS_XATTR_NONE, BFS_XATTR_DROP_PAGES, BFS_XATTR_WILLNEED } kind;
	uint64_t off, len;
	struct bfs_file *f; /* BFS_XATTR_WILLNEED */
};

/**
 * bfs_xattr_get() - the value of @name, or with @size 0 its length.
 * @who: the requesting thread. A size query of a value that changes on its
 * own (cached, stats) keeps the value it measured, and @who's next get
 * within a second returns exactly that when it fits: the length a size
 * query answers is the length of the get that follows (xattr(7)).
 * Return: value length, or -ENODATA, -ERANGE (the value does not fit
 * @size), -errno.
 */
BFS_MUST_CHECK ssize_t bfs_xattr_get(struct bfs_fs *fs, struct bfs_inode *in, const char *name,
				     char *buf, size_t size, pid_t who);
/* Return: length of the NUL-separated list, or -ERANGE, -errno. */
BFS_MUST_CHECK ssize_t bfs_xattr_list(struct bfs_fs *fs, struct bfs_inode *in, char *buf,
				      size_t size);
/**
 * bfs_xattr_set() - set a hint, or act on one (willneed, dontneed).
 * @act: what ops.c must do after the reply (struct bfs_xattr_act).
 * Return: 0 or -errno: -EROFS outside user.blockfs.*, -ENOTSUP for a name
 * blockfs does not know, -EPERM for a read-only one, -EINVAL for a bad
 * value, -E2BIG for one longer than any valid value, -EEXIST/-ENODATA for
 * XATTR_CREATE/XATTR_REPLACE.
 */
BFS_MUST_CHECK int bfs_xattr_set(struct bfs_fs *fs, struct bfs_inode *in, const char *name,
				 const char *value, size_t size, int flags,
				 struct bfs_xattr_act *act);
/* Return: 0 or -errno: -ENODATA when the hint is not set here, else as set. */
BFS_MUST_CHECK int bfs_xattr_remove(struct bfs_fs *fs, struct bfs_inode *in, const char *name);

#endif

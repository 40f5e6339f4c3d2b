/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes (SPEC §4): the user.blockfs.* table and the backing
 * file's own attributes, shown read-only. Values and lists follow the
 * xattr(7) size protocol: size 0 asks for the length, a short buffer is
 * -ERANGE.
 */
#ifndef BLOCKFS_XATTR_H
#define BLOCKFS_XATTR_H

#include <sys/types.h>

struct bfs_fs;
struct bfs_inode;

#define BFS_XATTR_PREFIX "user.blockfs."

/* Return: value length, or -ENODATA, -ERANGE, -errno. */
ssize_t bfs_xattr_get(struct bfs_fs *fs, struct bfs_inode *in, const char *name, char *buf,
		      size_t size);
/* Return: length of the NUL-separated list, or -ERANGE, -errno. */
ssize_t bfs_xattr_list(struct bfs_fs *fs, struct bfs_inode *in, char *buf, size_t size);
/* Return: 0 or -errno: -ENOTSUP for names blockfs does not take, -EROFS for others. */
int bfs_xattr_set(struct bfs_fs *fs, struct bfs_inode *in, const char *name, const char *value,
		  size_t size, int flags);
int bfs_xattr_remove(struct bfs_fs *fs, struct bfs_inode *in, const char *name);

#endif

/* SPDX-License-Identifier: MIT */
/* Lookups (lookup.c): a shown name to an inode. Private to the mount's modules. */
#ifndef BLOCKFS_LOOKUP_H
#define BLOCKFS_LOOKUP_H

#include <sys/stat.h>

#include "blockfs/common.h"

struct bfs_dirent;
struct bfs_fs;
struct bfs_inode;
struct bfs_snap_ctx;

/**
 * bfs_lookup() - the inode shown as @name in @dir, with its attributes.
 * @out: gains one lookup reference (bfs_inode_forget() drops it).
 * Return: 0 or -errno (-ENOENT when nothing is shown as @name).
 */
BFS_MUST_CHECK int bfs_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name,
			      struct bfs_inode **out, struct stat *st);
/*
 * Like lookup, for entry @de of a listing, already resolved (readdirplus);
 * @c: the context it was made in, with the directory's descriptor.
 */
BFS_MUST_CHECK int bfs_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir,
				    struct bfs_snap_ctx *c, const struct bfs_dirent *de,
				    struct bfs_inode **out, struct stat *st);

#endif

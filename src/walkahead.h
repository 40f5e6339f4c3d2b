/* SPDX-License-Identifier: MIT */
/*
 * Walks side by side for a listing with attributes (walkahead.c). Private
 * to the mount's modules.
 */
#ifndef BLOCKFS_WALKAHEAD_H
#define BLOCKFS_WALKAHEAD_H

#include <stddef.h>

struct bfs_dir;
struct bfs_fs;
struct bfs_inode;
struct bfs_snap_ctx;

#define BFS_WALK_AHEAD_MAX 64 /* entries of one reply looked at */
struct bfs_walk_ahead;

/**
 * bfs_walk_ahead() - look up, on -o workers threads at once, the decoded
 * files among entries [@from, @from + @count) of listing @d whose lookup
 * will walk a big backing file, so that the reply's lookups, made in
 * order, find them sized. Return: what to let go with
 * bfs_walk_ahead_done() once the reply is made (it holds a lookup of
 * each), or NULL when there was nothing worth it.
 */
struct bfs_walk_ahead *bfs_walk_ahead(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir *d,
				      struct bfs_snap_ctx *c, size_t from, size_t count);
void bfs_walk_ahead_done(struct bfs_fs *fs, struct bfs_walk_ahead *w);

#endif

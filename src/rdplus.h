/* SPDX-License-Identifier: MIT */
/*
 * -o readdirplus=auto: whether a listing's first reply gives attributes,
 * weighed from what the regular files listed lately were used for
 * (rdplus.c). Pure counting, no I/O: ops.c reports listings and uses and
 * asks before each first reply. Lock-free (two atomic counters).
 */
#ifndef BLOCKFS_RDPLUS_H
#define BLOCKFS_RDPLUS_H

#include <stdatomic.h>
#include <stdbool.h>

/* Both counts are halved once this many files were listed (rdplus.c). */
#define BFS_RDPLUS_WINDOW 4096u

struct bfs_rdplus {
	bool on;		  /* -o readdirplus=auto; off: every call is a no-op */
	atomic_uint listed, used; /* files listed lately, and looked up or opened */
};

/* Start counting, @on for readdirplus=auto. Nothing to free. */
void bfs_rdplus_init(struct bfs_rdplus *r, bool on);
/* Does a first reply give names alone, the files listed lately being left unused? */
bool bfs_rdplus_names_suffice(struct bfs_rdplus *r);
/*
 * Is a reply of names alone to look for big files to walk side by side
 * (bfs_walk_ahead())? On a mount that has listed few files yet (ls -l of
 * one directory: its first reply gives names alone) or whose files were
 * used lately, yes; not for a walker that uses none (find), where it cost
 * a backing fstatat of 64 files a directory, an inode read each when cold,
 * and found nothing to walk.
 */
bool bfs_rdplus_walk_ahead(struct bfs_rdplus *r);
/* @n regular files (or other non-directories) were listed. */
void bfs_rdplus_listed(struct bfs_rdplus *r, unsigned int n);
/* @n non-directories were looked up, opened or stat'ed. Bounded: uses alone say little. */
void bfs_rdplus_used(struct bfs_rdplus *r, unsigned int n);

#endif

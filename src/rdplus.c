// SPDX-License-Identifier: MIT
/*
 * The READDIRPLUS policy (contract in rdplus.h).
 *
 * -o readdirplus=auto: whether a listing's first reply gives attributes.
 * The kernel asks for them in that reply whatever the reader wants; they
 * cost a backing probe, an inode here and one in the kernel for each
 * entry, which find(1), wanting names only, pays for nothing (0.8 s
 * against 0.05 s for squashfuse_ll over 100,000 files), while a reader
 * that opens what it lists (grep -r, find | xargs cat) saves a LOOKUP per
 * file (doc/decisions/0005-readdirplus.md). So the mount weighs what the
 * regular files it listed lately were used for: when at least half were
 * looked up or opened, a first reply carries attributes for as many
 * entries as fit, else names alone (node id 0: the kernel makes no
 * dentry, as for a READDIR reply). Directories do not count: find looks
 * up each one it descends into. Files given with their attributes are
 * looked up by no one, so their use shows otherwise: the kernel asks
 * for attributes with a later chunk of a listing only when the reader
 * has looked up or stat'ed an entry of it since the last chunk (ls -l
 * does, find does not), and then the files of the reply before count as
 * used; without this ls -lR, never looking a file up, would turn the
 * mount to names alone, and then look up every file of each first reply
 * (the kernel's replies hold hundreds of entries). Both counts are
 * halved once BFS_RDPLUS_WINDOW files were listed, so the mount follows a
 * change of reader within a few directories.
 */
#include "config.h"

#include "rdplus.h"

void bfs_rdplus_init(struct bfs_rdplus *r, bool on)
{
	r->on = on;
	atomic_init(&r->listed, 0);
	atomic_init(&r->used, 0);
}

bool bfs_rdplus_names_suffice(struct bfs_rdplus *r)
{
	unsigned int listed, used;

	if (!r->on)
		return false;
	listed = atomic_load_explicit(&r->listed, memory_order_relaxed);
	used = atomic_load_explicit(&r->used, memory_order_relaxed);
	return !(listed > 0 && used >= listed / 2);
}

bool bfs_rdplus_walk_ahead(struct bfs_rdplus *r)
{
	return atomic_load_explicit(&r->listed, memory_order_relaxed) < BFS_RDPLUS_WINDOW / 4 ||
	       atomic_load_explicit(&r->used, memory_order_relaxed) > 0;
}

void bfs_rdplus_listed(struct bfs_rdplus *r, unsigned int n)
{
	unsigned int listed;

	if (!r->on || n == 0)
		return;
	listed = atomic_fetch_add_explicit(&r->listed, n, memory_order_relaxed) + n;
	if (listed > BFS_RDPLUS_WINDOW) { /* racing halvings only forget a little more */
		atomic_store_explicit(&r->listed, listed / 2, memory_order_relaxed);
		atomic_store_explicit(&r->used,
				      atomic_load_explicit(&r->used, memory_order_relaxed) / 2,
				      memory_order_relaxed);
	}
}

void bfs_rdplus_used(struct bfs_rdplus *r, unsigned int n)
{
	if (r->on && n > 0 &&
	    atomic_load_explicit(&r->used, memory_order_relaxed) < 2 * BFS_RDPLUS_WINDOW)
		atomic_fetch_add_explicit(&r->used, n, memory_order_relaxed);
}

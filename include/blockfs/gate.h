/* SPDX-License-Identifier: MIT */
/*
 * A gate: calls pass while it is open, and shutting it waits for the
 * ones inside (gate.c). blockfs passes through one the notifications to
 * the kernel that may wait for the kernel's locks (fs_i.h, struct bfs_fs).
 */
#ifndef BLOCKFS_GATE_H
#define BLOCKFS_GATE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "blockfs/common.h"

struct bfs_gate {
	atomic_uint n; /* BFS_GATE_SHUT, and how many are inside */
};

#define BFS_GATE_SHUT (1u << 31)

/* Enter @g: false, and nothing is to be done, once it is shut. */
BFS_MUST_CHECK bool bfs_gate_enter(struct bfs_gate *g);
/* Leave @g, after a bfs_gate_enter() that returned true. */
void bfs_gate_leave(struct bfs_gate *g);
/*
 * bfs_gate_shut() - shut @g, then wait until all inside have left;
 * after 5 s, logs once that it waits for that many @what.
 * Calling it again only waits again.
 */
void bfs_gate_shut(struct bfs_gate *g, const char *what);

#endif

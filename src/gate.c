// SPDX-License-Identifier: MIT
/* The gate (contract in gate.h): a count of those inside, and a bit that shuts it. */
#include "config.h"

#include <time.h>

#include "blockfs/gate.h"
#include "blockfs/log.h"

bool bfs_gate_enter(struct bfs_gate *g)
{
	if (atomic_fetch_add(&g->n, 1) & BFS_GATE_SHUT) {
		atomic_fetch_sub(&g->n, 1);
		return false;
	}
	return true;
}

void bfs_gate_leave(struct bfs_gate *g)
{
	atomic_fetch_sub(&g->n, 1);
}

void bfs_gate_shut(struct bfs_gate *g, const char *what)
{
	const struct timespec tick = { .tv_nsec = 1000000 };
	unsigned int n, waited = 0;

	atomic_fetch_or(&g->n, BFS_GATE_SHUT);
	while ((n = atomic_load(&g->n) & ~BFS_GATE_SHUT) != 0) {
		if (++waited == 5000)
			bfs_warn("still waiting for %u %s", n, what);
		nanosleep(&tick, NULL);
	}
}

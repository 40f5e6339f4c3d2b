// SPDX-License-Identifier: MIT
/*
 * The budget of parked decoders (park.h): one count of the bytes that
 * codec_zstd.c and codec_xz.c keep parked between spans, and the budget
 * they are held to. Atomics only; no lock, no call out.
 */
#include "config.h"

#include <stdatomic.h>

#include "blockfs/park.h"

static atomic_size_t parked;
static atomic_size_t park_budget = BFS_PARK_BUDGET;

void bfs_park_charge(size_t bytes)
{
	atomic_fetch_add(&parked, bytes);
}

void bfs_park_release(size_t bytes)
{
	atomic_fetch_sub(&parked, bytes);
}

bool bfs_park_over(size_t more)
{
	return atomic_load(&parked) + more > atomic_load(&park_budget);
}

size_t bfs_parked_bytes(void)
{
	return atomic_load(&parked);
}

size_t bfs_park_set_budget(size_t bytes)
{
	return atomic_exchange(&park_budget, bytes);
}

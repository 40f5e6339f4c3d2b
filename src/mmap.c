// SPDX-License-Identifier: MIT
/*
 * Mappings of backing files (contract in mmap.h). Entering a mapping is a
 * lock-free user count in the common case; the maps lock is taken only to
 * map, to unmap, and to walk the live list. An idle mapping is claimed
 * for unmapping by swinging its user count from 0 to a negative number,
 * which sends any thread arriving meanwhile to the slow path.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blockfs/mmap.h"

#define CLAIMED INT_MIN

struct bfs_maps {
	pthread_mutex_t lock; /* protects the list and count */
	struct bfs_map *head; /* live mappings */
	size_t count, max_live;
	int populate; /* enum bfs_populate */
	atomic_uint_fast64_t tick;
};

static _Thread_local struct bfs_guard guard;

struct bfs_guard *bfs_guard_get(void)
{
	return &guard;
}

/*
 * Only a fault inside the range a guard covers is ours to recover from;
 * any other SIGBUS is a real bug and must still kill the process, so the
 * default action is put back and the faulting access runs again.
 */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const uint8_t *a = si->si_addr;

	(void)uc;
	if (guard.armed && a >= guard.lo && a < guard.hi) {
		guard.armed = 0;
		siglongjmp(guard.env, 1);
	}
	signal(sig, SIG_DFL);
}

int bfs_sigbus_init(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus };

	/* SA_NODEFER: jumping out leaves SIGBUS unblocked without saving masks. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}

int bfs_maps_new(struct bfs_maps **out, size_t max_live, int populate)
{
	struct bfs_maps *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	bfs_mutex_init(&m->lock);
	m->max_live = max_live ? max_live : 1;
	m->populate = populate;
	atomic_init(&m->tick, 0);
	*out = m;
	return 0;
}

void bfs_maps_free(struct bfs_maps *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

bool bfs_maps_populate_async(const struct bfs_maps *m)
{
	return m && m->populate == BFS_POPULATE_ASYNC;
}

size_t bfs_maps_live(struct bfs_maps *m)
{
	size_t n;

	bfs_mutex_lock(&m->lock);
	n = m->count;
	bfs_mutex_unlock(&m->lock);
	return n;
}

void bfs_map_init(struct bfs_map *map, size_t len)
{
	*map = (struct bfs_map){ .len = len };
	atomic_init(&map->base, NULL);
	atomic_init(&map->users, 0);
	atomic_init(&map->used, 0);
	atomic_init(&map->failed, false);
}

bool bfs_map_live(struct bfs_map *map)
{
	return atomic_load(&map->base) != NULL;
}

/* Take @map off the live list and unmap it; lock held, no user inside. */
static void unmap_locked(struct bfs_maps *m, struct bfs_map *map)
{
	const uint8_t *base = atomic_load(&map->base);

	if (!base)
		return;
	*(map->prev ? &map->prev->next : &m->head) = map->next;
	if (map->next)
		map->next->prev = map->prev;
	map->prev = map->next = NULL;
	m->count--;
	atomic_store(&map->base, NULL);
	munmap((void *)base, map->len);
}

/*
 * Unmap the least recently entered idle mapping; lock held. A reader
 * entering the pick between the scan and the claim makes it busy: scan
 * again, a few times, rather than go over the bound for it.
 */
static void evict_one(struct bfs_maps *m)
{
	for (int tries = 0; tries < 4; tries++) {
		struct bfs_map *pick = NULL;
		uint64_t oldest = UINT64_MAX;
		int idle = 0;

		for (struct bfs_map *p = m->head; p; p = p->next) {
			if (atomic_load(&p->users) == 0 && atomic_load(&p->used) < oldest) {
				oldest = atomic_load(&p->used);
				pick = p;
			}
		}
		if (!pick)
			return; /* all in use: over the bound by readers in flight */
		if (atomic_compare_exchange_strong(&pick->users, &idle, CLAIMED)) {
			unmap_locked(m, pick);
			atomic_store(&pick->users, 0);
			return;
		}
	}
}

/* Map @map over @fd; lock held. Return: the base, or NULL with *@made = -errno. */
static const uint8_t *map_locked(struct bfs_maps *m, struct bfs_map *map, int fd, int advice,
				 int *made)
{
	int flags = MAP_SHARED | (m->populate == BFS_POPULATE_ON ? MAP_POPULATE : 0);
	void *base;

	while (m->count >= m->max_live) {
		size_t before = m->count;

		evict_one(m);
		if (m->count == before)
			break;
	}
	base = mmap(NULL, map->len, PROT_READ, flags, fd, 0);
	if (base == MAP_FAILED) {
		*made = -errno;
		atomic_store(&map->failed, true);
		return NULL;
	}
	madvise(base, map->len, advice >= 0 ? advice : MADV_NORMAL);
	map->prev = NULL;
	map->next = m->head;
	if (m->head)
		m->head->prev = map;
	m->head = map;
	m->count++;
	atomic_store(&map->base, base);
	*made = 1;
	return base;
}

const uint8_t *bfs_map_enter(struct bfs_maps *m, struct bfs_map *map, int fd, int advice, int *made)
{
	const uint8_t *base;

	*made = 0;
	if (!m || map->len == 0 || atomic_load_explicit(&map->failed, memory_order_relaxed))
		return NULL;
	if (atomic_fetch_add(&map->users, 1) >= 0) {
		base = atomic_load(&map->base);
		if (base)
			goto entered;
	}
	atomic_fetch_sub(&map->users, 1);

	bfs_mutex_lock(&m->lock); /* slow path: map it, or wait out an unmap */
	base = atomic_load(&map->base);
	if (!base && !atomic_load(&map->failed))
		base = map_locked(m, map, fd, advice, made);
	if (base)
		atomic_fetch_add(&map->users, 1);
	bfs_mutex_unlock(&m->lock);
	if (!base)
		return NULL;
entered:
	atomic_store_explicit(&map->used, atomic_fetch_add(&m->tick, 1), memory_order_relaxed);
	return base;
}

void bfs_map_exit(struct bfs_map *map)
{
	atomic_fetch_sub(&map->users, 1);
}

bool bfs_map_fail(struct bfs_map *map)
{
	return !atomic_exchange(&map->failed, true);
}

void bfs_map_drop(struct bfs_maps *m, struct bfs_map *map)
{
	if (!m || !atomic_load(&map->base))
		return;
	bfs_mutex_lock(&m->lock);
	unmap_locked(m, map);
	bfs_mutex_unlock(&m->lock);
}

int bfs_map_populate(struct bfs_map *map, const uint8_t *base)
{
	size_t len = map->len, page = (size_t)sysconf(_SC_PAGESIZE);
	volatile uint8_t sink = 0;
	int rc = 0;

	madvise((void *)base, len, MADV_WILLNEED);
	if (sigsetjmp(guard.env, 0) == 0) {
		guard.lo = base;
		guard.hi = base + len;
		guard.armed = 1;
		for (size_t off = 0; off < len; off += page)
			sink ^= base[off]; /* fault each page in, in order */
		guard.armed = 0;
	} else {
		rc = -EIO;
	}
	(void)sink;
	return rc;
}

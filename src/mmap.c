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

#include "blockfs/cache.h"
#include "blockfs/file.h"
#include "blockfs/hints.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/workq.h"

#define CLAIMED INT_MIN

struct bfs_maps {
	pthread_mutex_t lock;		/* protects the list and count */
	struct bfs_file *head;		/* live mappings */
	size_t count, max_live;
	int populate;			/* enum bfs_populate */
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
	pthread_mutex_init(&m->lock, NULL);
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

size_t bfs_maps_live(struct bfs_maps *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->count;
	pthread_mutex_unlock(&m->lock);
	return n;
}

static size_t map_len(const struct bfs_file *f)
{
	return (size_t)f->st.st_size;
}

/* Take @f off the live list and unmap it; lock held, no user inside. */
static void unmap_locked(struct bfs_maps *m, struct bfs_file *f)
{
	const uint8_t *base = atomic_load(&f->map);

	if (!base)
		return;
	if (f->map_prev)
		f->map_prev->map_next = f->map_next;
	else
		m->head = f->map_next;
	if (f->map_next)
		f->map_next->map_prev = f->map_prev;
	f->map_prev = f->map_next = NULL;
	m->count--;
	atomic_store(&f->map, NULL);
	munmap((void *)base, map_len(f));
}

/*
 * Unmap the least recently entered idle mapping; lock held. A reader
 * entering the pick between the scan and the claim makes it busy: scan
 * again, a few times, rather than go over the bound for it.
 */
static void evict_one(struct bfs_maps *m)
{
	for (int tries = 0; tries < 4; tries++) {
		struct bfs_file *pick = NULL;
		uint64_t oldest = UINT64_MAX;
		int idle = 0;

		for (struct bfs_file *f = m->head; f; f = f->map_next) {
			if (atomic_load(&f->map_users) == 0 &&
			    atomic_load(&f->map_used) < oldest) {
				oldest = atomic_load(&f->map_used);
				pick = f;
			}
		}
		if (!pick)
			return;		/* all in use: over the bound by readers in flight */
		if (atomic_compare_exchange_strong(&pick->map_users, &idle, CLAIMED)) {
			unmap_locked(m, pick);
			atomic_store(&pick->map_users, 0);
			return;
		}
	}
}

/* Map @f; lock held. */
static const uint8_t *map_locked(struct bfs_maps *m, struct bfs_file *f)
{
	int flags = MAP_SHARED | (m->populate == BFS_POPULATE_ON ? MAP_POPULATE : 0);
	int adv;
	void *base;

	while (m->count >= m->max_live) {
		size_t before = m->count;

		evict_one(m);
		if (m->count == before)
			break;
	}
	base = mmap(NULL, map_len(f), PROT_READ, flags, f->fd, 0);
	BFS_COUNT(f->ctr, syscalls, 1);
	if (base == MAP_FAILED) {
		bfs_warn("%s: cannot map (%s): reading with pread", f->name, strerror(errno));
		atomic_store(&f->map_failed, true);
		return NULL;
	}
	adv = bfs_advice_madv(atomic_load(&f->advice));
	madvise(base, map_len(f), adv >= 0 ? adv : MADV_NORMAL);
	f->map_prev = NULL;
	f->map_next = m->head;
	if (m->head)
		m->head->map_prev = f;
	m->head = f;
	m->count++;
	atomic_store(&f->map, base);
	return base;
}

struct populate_job {
	struct bfs_work work;
	struct bfs_file *f;		/* a reference and a use of its descriptor */
};

static void populate_run(struct bfs_work *w)
{
	struct populate_job *j = (struct populate_job *)w;

	bfs_map_populate(j->f);
	bfs_file_unuse(j->f);
	bfs_file_put(j->f);
	free(j);
}

/* populate=async: pre-fault a new mapping from a worker; a hint, so no errors. */
static void queue_populate(struct bfs_file *f)
{
	struct populate_job *j;

	if (!bfs_workq_threads(f->env->workq) || !bfs_file_use(f))
		return;
	j = malloc(sizeof(*j));
	if (j) {
		*j = (struct populate_job){ .work.fn = populate_run, .f = bfs_file_get(f) };
		if (bfs_workq_try(f->env->workq, &j->work))
			return;
		bfs_file_put(f);
		free(j);
	}
	bfs_file_unuse(f);
}

const uint8_t *bfs_map_enter(struct bfs_maps *m, struct bfs_file *f)
{
	const uint8_t *base;
	bool fresh = false;

	if (!m || map_len(f) == 0 || atomic_load_explicit(&f->map_failed, memory_order_relaxed))
		return NULL;
	if (atomic_fetch_add(&f->map_users, 1) >= 0) {
		base = atomic_load(&f->map);
		if (base)
			goto entered;
	}
	atomic_fetch_sub(&f->map_users, 1);

	pthread_mutex_lock(&m->lock);	/* slow path: map it, or wait out an unmap */
	base = atomic_load(&f->map);
	if (!base && !atomic_load(&f->map_failed)) {
		base = map_locked(m, f);
		fresh = base != NULL;
	}
	if (base)
		atomic_fetch_add(&f->map_users, 1);
	pthread_mutex_unlock(&m->lock);
	if (!base)
		return NULL;
entered:
	atomic_store_explicit(&f->map_used, atomic_fetch_add(&m->tick, 1), memory_order_relaxed);
	if (fresh && m->populate == BFS_POPULATE_ASYNC)
		queue_populate(f);
	return base;
}

void bfs_map_exit(struct bfs_file *f)
{
	atomic_fetch_sub(&f->map_users, 1);
}

void bfs_map_fail(struct bfs_file *f)
{
	if (!atomic_exchange(&f->map_failed, true))
		bfs_err("%s: the backing file shrank under its mapping: reading with pread",
			f->name);
}

void bfs_map_drop(struct bfs_maps *m, struct bfs_file *f)
{
	if (!m || !atomic_load(&f->map))
		return;
	pthread_mutex_lock(&m->lock);
	unmap_locked(m, f);
	pthread_mutex_unlock(&m->lock);
}

void bfs_map_populate(struct bfs_file *f)
{
	const uint8_t *base = bfs_map_enter(f->env->maps, f);
	size_t len = map_len(f), page = (size_t)sysconf(_SC_PAGESIZE);
	volatile uint8_t sink = 0;

	if (!base)
		return;
	madvise((void *)base, len, MADV_WILLNEED);
	if (sigsetjmp(guard.env, 0) == 0) {
		guard.lo = base;
		guard.hi = base + len;
		guard.armed = 1;
		for (size_t off = 0; off < len; off += page)
			sink ^= base[off];	/* fault each page in, in order */
		guard.armed = 0;
	} else {
		bfs_map_fail(f);
	}
	(void)sink;
	bfs_map_exit(f);
}

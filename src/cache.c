// SPDX-License-Identifier: MIT
/*
 * Decompressed-block cache (contract in cache.h). Sixteen shards, each a
 * mutex, a hash table and an LRU list; the byte bound is global. A hit
 * touches only its shard. Eviction is global LRU all the same: every use
 * stamps the block with a global tick, and room is made by evicting the
 * oldest unused tail among all shards, looking at one shard at a time and
 * never holding two shard locks, so no lock order exists to get wrong.
 * (Per-shard eviction alone is close to random when a few big blocks fill
 * the cache, and would drop blocks decoded ahead for a reader.) Blocks
 * being loaded are in the table, so later callers find and wait for them,
 * but never in the LRU, so nothing can evict them.
 *
 * Spares: a freed block of BFS_CACHE_SPARE_MIN bytes or more (a zstd
 * frame of pzstd's, an xz block of xz -T's) is kept whole, header and
 * data, for the next block of about its size, while the cache's blocks
 * and spares together fit its bound: such blocks are mapped by malloc
 * (main.c), and a new mapping's pages fault in and are zeroed again, once
 * per block. Spares are the room the cache has and does not use, so they
 * add nothing to its bound; making room frees them first.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "blockfs/cache.h"
#include "blockfs/handoff.h"

#define NSHARDS	    16
#define NBUCKETS    1024 /* per shard; chains stay short up to ~64 Ki blocks */
#define VICTIM_LOOK 8	 /* held blocks skipped at a tail before giving up on it */
#define SPARES	    4	 /* spare blocks kept at most */

struct shard {
	pthread_mutex_t lock;		       /* never held across decode, I/O or another shard */
	pthread_cond_t loaded;		       /* a LOADING block here became READY or FAILED */
	struct bfs_block *table[NBUCKETS];     /* protected by lock */
	struct bfs_block *lru_head, *lru_tail; /* unused READY blocks, newest first; lock */
};

struct bfs_cache {
	uint64_t limit;
	atomic_uint_fast64_t bytes; /* data bytes of every block in a table */
	atomic_uint_fast64_t tick;  /* use clock */
	struct shard shard[NSHARDS];
	pthread_mutex_t spare_lock;	  /* never held with a shard's */
	struct bfs_block *spare[SPARES];  /* spare_lock */
	atomic_uint_fast64_t spare_bytes; /* their cap, in all; written under spare_lock */
};

/* --- blocks --------------------------------------------------------------- */

/*
 * A spare of @c's for a block of @len bytes, taken out; or NULL. A spare
 * serves a block up to an eighth smaller, no more, so that what it
 * holds unused stays small.
 */
static struct bfs_block *spare_take(struct bfs_cache *c, uint32_t len)
{
	struct bfs_block *b = NULL;

	if (len < BFS_CACHE_SPARE_MIN || atomic_load(&c->spare_bytes) == 0)
		return NULL;
	bfs_mutex_lock(&c->spare_lock);
	for (int i = 0; i < SPARES; i++) {
		struct bfs_block *s = c->spare[i];

		if (s && s->cap >= len && s->cap - len <= s->cap / 8) {
			b = s;
			c->spare[i] = NULL;
			c->spare_bytes -= s->cap;
			break;
		}
	}
	bfs_mutex_unlock(&c->spare_lock);
	return b;
}

/* Keep freed block @b as a spare of its cache if it fits the bound beside the blocks; else free it. */
static void spare_keep(struct bfs_block *b)
{
	struct bfs_cache *c = b->home;
	bool kept = false;

	bfs_mutex_lock(&c->spare_lock);
	if (atomic_load(&c->bytes) + c->spare_bytes + b->cap <= c->limit) {
		for (int i = 0; i < SPARES && !kept; i++) {
			if (!c->spare[i]) {
				c->spare[i] = b;
				c->spare_bytes += b->cap;
				kept = true;
			}
		}
	}
	bfs_mutex_unlock(&c->spare_lock);
	if (!kept)
		free(b);
}

/* Free spares until blocks, spares and @len more bytes fit @c's bound (or none is left). */
static void spare_trim(struct bfs_cache *c, uint64_t len)
{
	struct bfs_block *gone[SPARES];
	int n = 0;

	if (atomic_load(&c->spare_bytes) == 0)
		return; /* no lock on a miss when nothing is kept */
	bfs_mutex_lock(&c->spare_lock);
	for (int i = 0; i < SPARES && c->spare_bytes &&
			atomic_load(&c->bytes) + c->spare_bytes + len > c->limit;
	     i++) {
		if (c->spare[i]) {
			c->spare_bytes -= c->spare[i]->cap;
			gone[n++] = c->spare[i];
			c->spare[i] = NULL;
		}
	}
	bfs_mutex_unlock(&c->spare_lock);
	while (n > 0)
		free(gone[--n]);
}

/*
 * Big buffers are mapped by malloc (main.c) and fault in when first
 * written: asked for in huge pages (transparent huge pages in "madvise"
 * mode), a 24 MiB xz block takes a dozen faults instead of six thousand,
 * each a trip into the kernel (and on a VM that hands freed memory back
 * to its host, one into the host). Only whole huge pages inside the
 * buffer are asked for; a hint, whose failure changes nothing.
 */
void *bfs_big_malloc(size_t len)
{
	const uintptr_t huge = (uintptr_t)2 << 20;
	void *p = malloc(len);
	uintptr_t from = ((uintptr_t)p + huge - 1) & ~(huge - 1);
	uintptr_t to = ((uintptr_t)p + len) & ~(huge - 1);

	if (p && len >= BFS_MAPPED_MIN && to > from)
		(void)madvise((void *)from, to - from, MADV_HUGEPAGE);
	return p;
}

/* A new LOADING block with one reference, the caller's; @c's spare when one fits. */
static struct bfs_block *block_new(struct bfs_cache *c, uint64_t fid, size_t blkno, uint32_t len,
				   struct bfs_counters *acct)
{
	struct bfs_block *b = c ? spare_take(c, len) : NULL;
	uint32_t cap = b ? b->cap : len;

	if (!b && !(b = bfs_big_malloc(sizeof(*b) + len)))
		return NULL;
	memset(b, 0, sizeof(*b));
	b->home = c;
	b->cap = cap;
	b->fid = fid;
	b->blkno = blkno;
	b->len = len;
	b->acct = bfs_counters_get(acct);
	b->data = (uint8_t *)(b + 1);
	b->state = BFS_BLOCK_LOADING;
	atomic_init(&b->refs, 1);
	return b;
}

void bfs_block_put(struct bfs_block *b)
{
	unsigned int was;

	if (!b)
		return;
	was = atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel);
	assert(was > 0); /* a put without a get */
	if (was != 1)
		return;
	bfs_counters_put(b->acct);
	if (b->home && b->cap >= BFS_CACHE_SPARE_MIN)
		spare_keep(b);
	else
		free(b);
}

/* --- tables and lists (shard lock held) ----------------------------------- */

static uint64_t hash(uint64_t fid, size_t blkno)
{
	uint64_t h = (fid * 0x9e3779b97f4a7c15ull) ^ (blkno * 0xc2b2ae3d27d4eb4full);

	return h ^ (h >> 31);
}

static struct shard *shard_of(struct bfs_cache *c, uint64_t h)
{
	return &c->shard[h % NSHARDS];
}

static struct bfs_block **bucket(struct shard *s, uint64_t h)
{
	return &s->table[(h / NSHARDS) % NBUCKETS];
}

static struct bfs_block *find(struct shard *s, uint64_t h, uint64_t fid, size_t blkno)
{
	for (struct bfs_block *b = *bucket(s, h); b; b = b->hnext)
		if (b->fid == fid && b->blkno == blkno)
			return b;
	return NULL;
}

static void lru_unlink(struct shard *s, struct bfs_block *b)
{
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else if (s->lru_head == b)
		s->lru_head = b->lnext;
	else
		return; /* not listed */
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	else
		s->lru_tail = b->lprev;
	b->lprev = b->lnext = NULL;
}

static void lru_push(struct bfs_cache *c, struct shard *s, struct bfs_block *b)
{
	b->used = atomic_fetch_add_explicit(&c->tick, 1, memory_order_relaxed);
	b->lprev = NULL;
	b->lnext = s->lru_head;
	if (s->lru_head)
		s->lru_head->lprev = b;
	s->lru_head = b;
	if (!s->lru_tail)
		s->lru_tail = b;
}

/* @b to the tail of @s's list, older than any use: the next victim there. */
static void lru_demote(struct shard *s, struct bfs_block *b)
{
	lru_unlink(s, b);
	b->used = 0;
	b->lnext = NULL;
	b->lprev = s->lru_tail;
	if (s->lru_tail)
		s->lru_tail->lnext = b;
	s->lru_tail = b;
	if (!s->lru_head)
		s->lru_head = b;
}

/* Take @b out of the table; the caller drops the cache's reference after unlocking. */
static void unhash(struct bfs_cache *c, struct shard *s, struct bfs_block *b)
{
	struct bfs_block **pp = bucket(s, hash(b->fid, b->blkno));

	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	lru_unlink(s, b);
	b->in_cache = false;
	atomic_fetch_sub(&c->bytes, b->len);
	BFS_COUNT(b->acct, cached, -(uint64_t)b->len);
}

/* --- the cache ------------------------------------------------------------ */

int bfs_cache_new(struct bfs_cache **out, uint64_t max_bytes)
{
	struct bfs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->limit = max_bytes;
	atomic_init(&c->bytes, 0);
	atomic_init(&c->tick, 1); /* 0 is older than any use: demoted blocks */
	atomic_init(&c->spare_bytes, 0);
	for (int i = 0; i < NSHARDS; i++) {
		bfs_mutex_init(&c->shard[i].lock);
		pthread_cond_init(&c->shard[i].loaded, NULL);
	}
	bfs_mutex_init(&c->spare_lock);
	*out = c;
	return 0;
}

void bfs_cache_free(struct bfs_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shard[i];

		for (size_t j = 0; j < NBUCKETS; j++) {
			for (struct bfs_block *b = s->table[j], *next; b; b = next) {
				next = b->hnext;
				BFS_COUNT(b->acct, cached, -(uint64_t)b->len);
				b->home = NULL; /* freed, not kept */
				bfs_block_put(b);
			}
		}
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->loaded);
	}
	for (int i = 0; i < SPARES; i++)
		free(c->spare[i]);
	pthread_mutex_destroy(&c->spare_lock);
	free(c);
}

uint64_t bfs_cache_bytes(const struct bfs_cache *c)
{
	return atomic_load(&c->bytes);
}

uint64_t bfs_cache_spare_bytes(const struct bfs_cache *c)
{
	return atomic_load(&c->spare_bytes);
}

uint64_t bfs_cache_limit(const struct bfs_cache *c)
{
	return c->limit;
}

/* The least recent unused block near the tail of @s; lock held. */
static struct bfs_block *victim(struct shard *s)
{
	int looked = 0;

	for (struct bfs_block *b = s->lru_tail; b && looked < VICTIM_LOOK; b = b->lprev, looked++)
		if (atomic_load(&b->refs) == 1) /* only the cache holds it */
			return b;
	return NULL;
}

/*
 * Evict unused blocks, globally least recent first, until @len more bytes
 * fit. A block is unused when the cache holds its only reference;
 * references are taken only under the shard lock, so that cannot change
 * while we hold it. Return: whether @len now fits.
 */
static bool make_room(struct bfs_cache *c, uint64_t len)
{
	spare_trim(c, len);
	while (atomic_load(&c->bytes) + len > c->limit) {
		uint64_t oldest = UINT64_MAX;
		struct shard *pick = NULL;
		struct bfs_block *b;

		for (int i = 0; i < NSHARDS; i++) {
			struct shard *s = &c->shard[i];

			bfs_mutex_lock(&s->lock);
			b = victim(s);
			if (b && b->used < oldest) {
				oldest = b->used;
				pick = s;
			}
			bfs_mutex_unlock(&s->lock);
		}
		if (!pick)
			return false; /* everything is held or loading */
		bfs_mutex_lock(&pick->lock);
		b = victim(pick); /* may have changed meanwhile: still a fair pick */
		if (b)
			unhash(c, pick, b);
		bfs_mutex_unlock(&pick->lock);
		bfs_block_put(b);
	}
	return true;
}

/* Insert new LOADING block @nb, which nobody else can see yet; lock held. */
static struct bfs_block *insert(struct bfs_cache *c, struct shard *s, uint64_t h,
				struct bfs_block *nb)
{
	struct bfs_block **bp = bucket(s, h);

	atomic_store(&nb->refs, 2); /* the caller's and, from now on, the cache's */
	nb->hnext = *bp;
	*bp = nb;
	nb->in_cache = true;
	atomic_fetch_add(&c->bytes, nb->len);
	BFS_COUNT(nb->acct, cached, nb->len);
	return nb;
}

/* Wait for @b (a reference held) to finish loading; lock held. */
static int wait_ready(struct bfs_cache *c, struct shard *s, struct bfs_block *b)
{
	if (b->state == BFS_BLOCK_LOADING)
		bfs_handoff(); /* the FUSE loop's lock is taken after any other */
	while (b->state == BFS_BLOCK_LOADING)
		pthread_cond_wait(&s->loaded, &s->lock);
	if (b->state == BFS_BLOCK_FAILED)
		return b->err;
	if (b->prefetched) {
		b->prefetched = false;
		BFS_COUNT(b->acct, prefetch_used, 1);
	}
	/*
	 * While we waited the block may have been dropped (dontneed): it is
	 * ours alone then, and must not go back on the list it left, or the
	 * list would keep it after our reference frees it.
	 */
	if (b->in_cache) {
		lru_unlink(s, b);
		lru_push(c, s, b);
	}
	return 0;
}

int bfs_cache_get(struct bfs_cache *c, uint64_t fid, size_t blkno, uint32_t len,
		  struct bfs_counters *acct, struct bfs_block **out)
{
	uint64_t h = hash(fid, blkno);
	struct shard *s = shard_of(c, h);
	struct bfs_block *b, *nb = NULL;
	int rc;

	if (c->limit == 0) {
		*out = block_new(NULL, fid, blkno, len, acct); /* private to the caller */
		return *out ? 1 : -ENOMEM;
	}
	for (;;) {
		bfs_mutex_lock(&s->lock);
		b = find(s, h, fid, blkno);
		if (b || nb)
			break;
		bfs_mutex_unlock(&s->lock);
		/* Allocate (a fitting spare first) and make room unlocked; then look again. */
		nb = block_new(c, fid, blkno, len, acct);
		if (!nb)
			return -ENOMEM;
		make_room(c, len);
	}
	if (!b) {
		*out = insert(c, s, h, nb);
		bfs_mutex_unlock(&s->lock);
		spare_trim(c, 0); /* a spare kept since we made room */
		return 1;
	}
	atomic_fetch_add(&b->refs, 1);
	rc = wait_ready(c, s, b);
	bfs_mutex_unlock(&s->lock);
	bfs_block_put(nb); /* lost the race: never inserted */
	if (rc < 0) {
		bfs_block_put(b);
		return rc;
	}
	*out = b;
	return 0;
}

int bfs_cache_lookup(struct bfs_cache *c, uint64_t fid, size_t blkno, struct bfs_block **out)
{
	uint64_t h = hash(fid, blkno);
	struct shard *s = shard_of(c, h);
	struct bfs_block *b;
	int rc;

	*out = NULL;
	if (c->limit == 0)
		return -ENOENT;
	bfs_mutex_lock(&s->lock);
	b = find(s, h, fid, blkno);
	if (!b) {
		bfs_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	atomic_fetch_add(&b->refs, 1);
	rc = wait_ready(c, s, b);
	bfs_mutex_unlock(&s->lock);
	if (rc < 0) {
		bfs_block_put(b);
		return rc;
	}
	*out = b;
	return 0;
}

int bfs_cache_try_new(struct bfs_cache *c, uint64_t fid, size_t blkno, uint32_t len,
		      struct bfs_counters *acct, struct bfs_block **out)
{
	uint64_t h = hash(fid, blkno);
	struct shard *s = shard_of(c, h);
	struct bfs_block *nb;

	*out = NULL;
	if (c->limit == 0)
		return 0;
	/* Already there (a reader may be decoding it): evict nothing for it. */
	bfs_mutex_lock(&s->lock);
	nb = find(s, h, fid, blkno);
	bfs_mutex_unlock(&s->lock);
	if (nb)
		return 0;
	nb = block_new(c, fid, blkno, len, acct);
	if (!nb)
		return 0;
	if (!make_room(c, len)) {
		bfs_block_put(nb); /* back among the spares if it was one */
		return 0;
	}
	bfs_mutex_lock(&s->lock);
	if (find(s, h, fid, blkno)) {
		bfs_mutex_unlock(&s->lock);
		bfs_block_put(nb);
		return 0;
	}
	nb->prefetched = true;
	*out = insert(c, s, h, nb);
	bfs_mutex_unlock(&s->lock);
	spare_trim(c, 0);
	return 1;
}

void bfs_cache_done(struct bfs_cache *c, struct bfs_block *b, int err)
{
	struct shard *s;
	bool drop = false;

	if (!b->in_cache) { /* private (cache size 0) */
		b->state = err ? BFS_BLOCK_FAILED : BFS_BLOCK_READY;
		b->err = err;
		return;
	}
	s = shard_of(c, hash(b->fid, b->blkno));
	bfs_mutex_lock(&s->lock);
	if (err) {
		b->state = BFS_BLOCK_FAILED;
		b->err = err;
		unhash(c, s, b); /* a later reader tries again, and fails on its own */
		drop = true;
	} else {
		b->state = BFS_BLOCK_READY;
		lru_push(c, s, b);
	}
	pthread_cond_broadcast(&s->loaded);
	bfs_mutex_unlock(&s->lock);
	if (drop)
		bfs_block_put(b); /* the cache's reference */
}

/*
 * (@fid, @blkno) if it is READY, else NULL; either way with its shard
 * locked, in *@sp, for the caller to unlock. A READY block found in the
 * table is on its shard's list.
 */
static struct bfs_block *find_ready(struct bfs_cache *c, uint64_t fid, size_t blkno,
				    struct shard **sp)
{
	uint64_t h = hash(fid, blkno);
	struct bfs_block *b;

	*sp = shard_of(c, h);
	bfs_mutex_lock(&(*sp)->lock);
	b = find(*sp, h, fid, blkno);
	return b && b->state == BFS_BLOCK_READY ? b : NULL;
}

bool bfs_cache_contains(struct bfs_cache *c, uint64_t fid, size_t blkno)
{
	struct shard *s;
	struct bfs_block *b;

	if (c->limit == 0)
		return false;
	b = find_ready(c, fid, blkno, &s);
	bfs_mutex_unlock(&s->lock);
	return b != NULL;
}

void bfs_cache_demote(struct bfs_cache *c, uint64_t fid, size_t blkno)
{
	struct shard *s;
	struct bfs_block *b;

	if (c->limit == 0)
		return;
	b = find_ready(c, fid, blkno, &s);
	if (b)
		lru_demote(s, b);
	bfs_mutex_unlock(&s->lock);
}

void bfs_cache_drop(struct bfs_cache *c, uint64_t fid, size_t blkno)
{
	struct shard *s;
	struct bfs_block *b;

	if (c->limit == 0)
		return;
	b = find_ready(c, fid, blkno, &s); /* a loading one is its loader's until done */
	if (b)
		unhash(c, s, b);
	bfs_mutex_unlock(&s->lock);
	bfs_block_put(b);
}

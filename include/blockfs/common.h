/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every module shares: attributes, little-endian loads,
 * overflow-safe arithmetic. Nothing here allocates or does I/O.
 */
#ifndef BLOCKFS_COMMON_H
#define BLOCKFS_COMMON_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_MUST_CHECK	  __attribute__((warn_unused_result))
#define BFS_PRINTF(f, a)  __attribute__((format(printf, f, a)))
#define BFS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline uint16_t bfs_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t bfs_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t bfs_le64(const uint8_t *p)
{
	return (uint64_t)bfs_le32(p) | (uint64_t)bfs_le32(p + 4) << 32;
}

static inline void bfs_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void bfs_put_le64(uint8_t *p, uint64_t v)
{
	bfs_put_le32(p, (uint32_t)v);
	bfs_put_le32(p + 4, (uint32_t)(v >> 32));
}

/*
 * Mutexes: error-checking ones while assertions are on (every build but
 * -Db_ndebug=true), so that a lock taken twice by one thread, or released
 * by another, stops the process on the spot instead of deadlocking later
 * or corrupting silently (squashfuse's debug builds do the same).
 */
static inline void bfs_mutex_init(pthread_mutex_t *m)
{
#ifdef NDEBUG
	pthread_mutex_init(m, NULL);
#else
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
#endif
}

static inline void bfs_mutex_lock(pthread_mutex_t *m)
{
	int rc = pthread_mutex_lock(m);

	assert(rc == 0);
	(void)rc;
}

static inline void bfs_mutex_unlock(pthread_mutex_t *m)
{
	int rc = pthread_mutex_unlock(m);

	assert(rc == 0);
	(void)rc;
}

/* True when [off, off + len) lies inside [0, size), without overflow. */
static inline bool bfs_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

#endif

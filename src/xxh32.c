// SPDX-License-Identifier: MIT
/*
 * XXH32 as the xxHash specification describes it (xxHash_spec.md). liblz4
 * keeps its copy private, so blockfs carries this one: LZ4 header and
 * block checksums, and the checksum of blockfs's own seek table.
 */
#include "config.h"

#include <string.h>

#include "blockfs/common.h"
#include "blockfs/xxh32.h"

#define XXH_P1	   0x9E3779B1u
#define XXH_P2	   0x85EBCA77u
#define XXH_P3	   0xC2B2AE3Du
#define XXH_P4	   0x27D4EB2Fu
#define XXH_P5	   0x165667B1u
#define XXH_STRIPE 16

static uint32_t rotl32(uint32_t x, unsigned int r)
{
	return x << r | x >> (32 - r);
}

static uint32_t xxh_round(uint32_t acc, uint32_t in)
{
	return rotl32(acc + in * XXH_P2, 13) * XXH_P1;
}

static void init_lanes(uint32_t v[4], uint32_t seed)
{
	v[0] = seed + XXH_P1 + XXH_P2;
	v[1] = seed + XXH_P2;
	v[2] = seed;
	v[3] = seed - XXH_P1;
}

/* Consume whole stripes from @p; return the bytes consumed. */
static size_t stripes(uint32_t v[4], const uint8_t *p, size_t len)
{
	const uint8_t *s = p;

	for (; len >= XXH_STRIPE; len -= XXH_STRIPE, s += XXH_STRIPE) {
		v[0] = xxh_round(v[0], bfs_le32(s));
		v[1] = xxh_round(v[1], bfs_le32(s + 4));
		v[2] = xxh_round(v[2], bfs_le32(s + 8));
		v[3] = xxh_round(v[3], bfs_le32(s + 12));
	}
	return (size_t)(s - p);
}

/* The tail rounds and the avalanche, shared by both forms. */
static uint32_t finish(uint32_t h, const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;

	for (; end - p >= 4; p += 4)
		h = rotl32(h + bfs_le32(p) * XXH_P3, 17) * XXH_P4;
	for (; p < end; p++)
		h = rotl32(h + (uint32_t)*p * XXH_P5, 11) * XXH_P1;
	h ^= h >> 15;
	h *= XXH_P2;
	h ^= h >> 13;
	h *= XXH_P3;
	h ^= h >> 16;
	return h;
}

static uint32_t merge(const uint32_t v[4])
{
	return rotl32(v[0], 1) + rotl32(v[1], 7) + rotl32(v[2], 12) + rotl32(v[3], 18);
}

uint32_t bfs_xxh32(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	uint32_t v[4], h;
	size_t done = 0;

	if (len >= XXH_STRIPE) {
		init_lanes(v, seed);
		done = stripes(v, p, len);
		h = merge(v);
	} else {
		h = seed + XXH_P5;
	}
	h += (uint32_t)len; /* the spec adds len mod 2^32 */
	return finish(h, p + done, len - done);
}

void bfs_xxh32_init(struct bfs_xxh32 *s, uint32_t seed)
{
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	init_lanes(s->v, seed);
}

void bfs_xxh32_update(struct bfs_xxh32 *s, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	s->total += len;
	if (s->buflen) {
		size_t take = XXH_STRIPE - s->buflen;

		if (take > len)
			take = len;
		memcpy(s->buf + s->buflen, p, take);
		s->buflen += (uint32_t)take;
		p += take;
		len -= take;
		if (s->buflen < XXH_STRIPE)
			return;
		stripes(s->v, s->buf, XXH_STRIPE);
		s->buflen = 0;
	}
	{
		size_t n = stripes(s->v, p, len);

		p += n;
		len -= n;
	}
	memcpy(s->buf, p, len);
	s->buflen = (uint32_t)len;
}

uint32_t bfs_xxh32_digest(const struct bfs_xxh32 *s)
{
	uint32_t h = s->total >= XXH_STRIPE ? merge(s->v) : s->seed + XXH_P5;

	h += (uint32_t)s->total;
	return finish(h, s->buf, s->buflen);
}

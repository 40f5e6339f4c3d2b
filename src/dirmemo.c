// SPDX-License-Identifier: MIT
/*
 * Directory memos' records (layout and contract in index_cache.h): the
 * encoding and checked decoding of what a listing learnt about its files,
 * kept in the index cache beside the files' own entries
 * (bfs_icache_dir_load(), bfs_icache_dir_save() in index_cache.c). As for
 * those, nothing a memo says is used before its header matches the
 * directory it claims to describe and its checksum holds.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/common.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/xxh32.h"

/* Memo header fields (index_cache.h) */
#define D_MAGIC	   0
#define D_VERSION  8
#define D_RULES	   12
#define D_DEV	   16
#define D_INO	   24
#define D_MTIME	   32
#define D_MTIME_NS 40
#define D_CTIME	   48
#define D_CTIME_NS 56
#define D_COUNT	   64
#define D_NAMES	   72
#define D_RESERVED 76

/* Memo entry fields */
#define M_STAMP 0
#define M_SIZE	8
#define M_FLAGS 17
#define M_ZERO	16 /* and 18 to the end */

/* Entries a memo may hold: a directory larger than this is listed as it is. */
#define DIRMEMO_MAX_ENTRIES (1u << 22)

static void put_dir_key(uint8_t *h, const struct bfs_dirmemo_key *k)
{
	bfs_put_le32(h + D_RULES, k->rules);
	bfs_put_le64(h + D_DEV, k->dev);
	bfs_put_le64(h + D_INO, k->ino);
	bfs_put_le64(h + D_MTIME, (uint64_t)k->mtime_sec);
	bfs_put_le64(h + D_MTIME_NS, k->mtime_nsec);
	bfs_put_le64(h + D_CTIME, (uint64_t)k->ctime_sec);
	bfs_put_le64(h + D_CTIME_NS, k->ctime_nsec);
	bfs_put_le64(h + D_COUNT, k->n);
	bfs_put_le32(h + D_NAMES, k->names);
}

static size_t memo_len(uint64_t n)
{
	return BFS_DIRMEMO_HDR_LEN + (size_t)n * BFS_DIRMEMO_ENTRY_LEN + BFS_ICACHE_CSUM_LEN;
}

size_t bfs_dirmemo_len(uint64_t n)
{
	return n > DIRMEMO_MAX_ENTRIES ? 0 : memo_len(n);
}

int bfs_dirmemo_encode(const struct bfs_dirmemo_key *key, const struct bfs_dirmemo_ent *e,
		       uint8_t **out, size_t *len)
{
	size_t total = memo_len(key->n);
	uint8_t *buf, *p;

	if (key->n > DIRMEMO_MAX_ENTRIES)
		return -EINVAL;
	buf = calloc(1, total);
	if (!buf)
		return -ENOMEM;
	memcpy(buf + D_MAGIC, BFS_DIRMEMO_MAGIC, 8);
	bfs_put_le32(buf + D_VERSION, BFS_DIRMEMO_VERSION);
	put_dir_key(buf, key);
	p = buf + BFS_DIRMEMO_HDR_LEN;
	for (uint64_t i = 0; i < key->n; i++, p += BFS_DIRMEMO_ENTRY_LEN) {
		unsigned int flags = e[i].flags & (BFS_DIRMEMO_STAMPED | BFS_DIRMEMO_SIZED);

		if (!(flags & BFS_DIRMEMO_STAMPED) || e[i].stamp == 0)
			continue; /* all zero: nothing known */
		bfs_put_le64(p + M_STAMP, e[i].stamp);
		if (flags & BFS_DIRMEMO_SIZED)
			bfs_put_le64(p + M_SIZE, e[i].size);
		p[M_FLAGS] = (uint8_t)flags;
	}
	bfs_put_le32(buf + total - BFS_ICACHE_CSUM_LEN,
		     bfs_xxh32(buf, total - BFS_ICACHE_CSUM_LEN, 0));
	*out = buf;
	*len = total;
	return 0;
}

int bfs_dirmemo_decode(const uint8_t *p, size_t len, const struct bfs_dirmemo_key *key,
		       struct bfs_dirmemo_ent *e, const char **why)
{
	uint8_t want[BFS_DIRMEMO_HDR_LEN] = { 0 };
	static const uint8_t zero[BFS_DIRMEMO_ENTRY_LEN - M_FLAGS - 1];
	const uint8_t *q;

	if (key->n > DIRMEMO_MAX_ENTRIES || len != memo_len(key->n)) {
		*why = "length does not match the directory (truncated, extended, or other entries)";
		return 1;
	}
	if (memcmp(p + D_MAGIC, BFS_DIRMEMO_MAGIC, 8) != 0) {
		*why = "not a directory memo";
		return 1;
	}
	if (bfs_le32(p + D_VERSION) != BFS_DIRMEMO_VERSION) {
		*why = "another format version";
		return 1;
	}
	put_dir_key(want, key);
	if (memcmp(p + D_RULES, want + D_RULES, D_RESERVED - D_RULES) != 0) {
		*why = "another directory, version, list of names or gzip= rule";
		return 1;
	}
	if (bfs_le32(p + D_RESERVED) != 0) {
		*why = "reserved field set";
		return 1;
	}
	if (bfs_le32(p + len - BFS_ICACHE_CSUM_LEN) != bfs_xxh32(p, len - BFS_ICACHE_CSUM_LEN, 0)) {
		*why = "checksum mismatch";
		return 1;
	}
	q = p + BFS_DIRMEMO_HDR_LEN;
	for (uint64_t i = 0; i < key->n; i++, q += BFS_DIRMEMO_ENTRY_LEN) {
		unsigned int flags = q[M_FLAGS];

		if (flags & ~(unsigned int)(BFS_DIRMEMO_STAMPED | BFS_DIRMEMO_SIZED) ||
		    q[M_ZERO] != 0 || memcmp(q + M_FLAGS + 1, zero, sizeof(zero)) ||
		    (!(flags & BFS_DIRMEMO_STAMPED) && (flags || bfs_le64(q + M_STAMP))) ||
		    (!(flags & BFS_DIRMEMO_SIZED) && bfs_le64(q + M_SIZE) != 0) ||
		    ((flags & BFS_DIRMEMO_STAMPED) && bfs_le64(q + M_STAMP) == 0)) {
			*why = "an entry fails its checks";
			return 1;
		}
		e[i] = (struct bfs_dirmemo_ent){ .stamp = bfs_le64(q + M_STAMP),
						 .size = bfs_le64(q + M_SIZE),
						 .flags = flags };
	}
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * Directory snapshots' memos in the index cache (contract in dir.h): what
 * lookups learned of a directory's files (their change stamps and decoded
 * sizes), kept as the directory's memo (index_cache.h, dirmemo.c) and
 * taken up by the next mount's first snapshot of the same directory
 * version, so that a listing after a remount stats no file it sized before.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/index_cache.h"
#include "blockfs/stats.h"
#include "blockfs/xxh32.h"
#include "dir.h"
#include "fs_i.h"
#include "snap_i.h"

/*
 * The directory version and names @s was read under, as its memo is keyed.
 * The names are hashed in the snapshot's order, which is the order of the
 * memo's entries: a memo of the same names read in another order is not
 * taken up.
 */
static void memo_key(const struct bfs_fs *fs, const struct bfs_snap *s, struct bfs_dirmemo_key *k)
{
	struct bfs_xxh32 h;

	bfs_xxh32_init(&h, 0);
	for (size_t i = 0; i < s->n; i++) {
		const char *name = bfs_snap_ename(s, &s->e[i]);

		bfs_xxh32_update(&h, name, strlen(name) + 1);
	}
	*k = (struct bfs_dirmemo_key){
		.dev = (uint64_t)s->dev,
		.ino = (uint64_t)s->ino,
		.mtime_sec = (int64_t)s->mtime.tv_sec,
		.mtime_nsec = (uint64_t)s->mtime.tv_nsec,
		.ctime_sec = (int64_t)s->ctime.tv_sec,
		.ctime_nsec = (uint64_t)s->ctime.tv_nsec,
		.n = s->n,
		.names = bfs_xxh32_digest(&h),
		.rules = fs->env.codecs.gzip ? 1u : 0u,
	};
}

void bfs_snap_memo_load(struct bfs_fs *fs, struct bfs_snap *s)
{
	struct bfs_dirmemo_key key;
	struct bfs_dirmemo_ent *m;

	if (!fs->env.icache || s->n == 0)
		return;
	m = malloc(s->n * sizeof(*m));
	if (!m)
		return;
	memo_key(fs, s, &key);
	if (bfs_icache_dir_load(fs->env.icache, &key, m) == 0) {
		for (size_t i = 0; i < s->n; i++) {
			struct snent *e = &s->e[i];

			if (!(m[i].flags & BFS_DIRMEMO_STAMPED))
				continue;
			atomic_init(&e->stamp, m[i].stamp);
			if (m[i].flags & BFS_DIRMEMO_SIZED)
				e->size = m[i].size;
			atomic_init(&e->probed, true);
		}
		BFS_COUNT(fs->env.mount, dir_memos, 1);
	}
	free(m);
}

void bfs_snap_save(struct bfs_fs *fs, struct bfs_snap *s)
{
	struct bfs_dirmemo_key key;
	struct bfs_dirmemo_ent *m;
	bool cached;

	if (!fs->env.icache)
		return;
	bfs_mutex_lock(&fs->snaps.lock);
	cached = s->cached;
	bfs_mutex_unlock(&fs->snaps.lock);
	if (!cached || !atomic_exchange(&s->dirty, false))
		return;
	m = malloc(s->n * sizeof(*m));
	if (!m)
		return;
	bfs_mutex_lock(&s->pair_lock);
	for (size_t i = 0; i < s->n; i++) {
		const struct snent *e = &s->e[i];

		m[i] = (struct bfs_dirmemo_ent){ 0 };
		if (!atomic_load_explicit(&e->probed, memory_order_acquire))
			continue;
		m[i] = (struct bfs_dirmemo_ent){
			.stamp = atomic_load(&e->stamp),
			.size = e->size == NO_SIZE ? 0 : e->size,
			.flags = BFS_DIRMEMO_STAMPED | (e->size == NO_SIZE ? 0 : BFS_DIRMEMO_SIZED),
		};
	}
	bfs_mutex_unlock(&s->pair_lock);
	memo_key(fs, s, &key);
	(void)bfs_icache_dir_save(fs->env.icache, &key, m);
	free(m);
}

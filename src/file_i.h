/* SPDX-License-Identifier: MIT */
/*
 * What a file version (file.c) and its read path (read.c, decode.c,
 * unit.c) share beyond blockfs/file.h: nothing else includes this.
 */
#ifndef BLOCKFS_FILE_I_H
#define BLOCKFS_FILE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/file.h"

/* last_bad when settling failed, not a block: reads fail at once */
#define BFS_SETTLE_FAILED (SIZE_MAX - 1)

/*
 * The stash of decoded chained blocks a decode step passed on its way to
 * a later block while another thread was loading them (file.c; used by
 * decode.c's chain decoding): take block @k's @len bytes into @dst if
 * stashed; stash @data (malloc'd, taken over unless refused) for block @k.
 * Return: whether it was. Context: under @f's chain_lock.
 */
bool bfs_file_stash_take(struct bfs_file *f, size_t k, uint8_t *dst, uint32_t len);
bool bfs_file_stash_put(struct bfs_file *f, size_t k, uint8_t *data, uint32_t len);

/* A block's spill (unit.c, spilled units): f->units[k]; protected by f->unit_lock. */
struct bfs_unit {
	struct bfs_spill *s; /* sealed (or dropped since, to make room), or NULL */
	bool making;	     /* its decoder writes it to the spill now (bfs_unit_claim()) */
	bool refused;	     /* the spill could not take it: decoded as before */
};

/* @f's mapping lost a page: pread from now on, and say so once (file.c). */
void bfs_file_map_failed(struct bfs_file *f);

#endif

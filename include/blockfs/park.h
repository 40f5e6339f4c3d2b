// SPDX-License-Identifier: MIT
/*
 * The budget of decoders parked between the spans of a chain (codec.h,
 * resume()) by codec_zstd.c and codec_xz.c, one for both and for every
 * file of the process (one mount per process: blockfs(8)'s bound is per
 * daemon). A codec charges what it parks and releases what it takes back
 * or frees; while the parked bytes are over the budget it frees its least
 * recently parked, never the one it is parking. The daemon's memory bound
 * (blockfs(8), cache_size) is
 *   cache_size + 32 MiB + one decoder window per stream being decoded:
 * the budget lies within the 32 MiB, and a decoder parked past it (the
 * one a reader just parked) or in use is its stream's window.
 *
 * A leaf below the codecs (doc/design.md, "Layers"): it counts bytes and
 * calls nothing.
 */
#ifndef BLOCKFS_PARK_H
#define BLOCKFS_PARK_H

#include <stdbool.h>
#include <stddef.h>

#define BFS_PARK_BUDGET (24u << 20)
void bfs_park_charge(size_t bytes);
void bfs_park_release(size_t bytes);
/* Would @more bytes parked go over the budget? */
bool bfs_park_over(size_t more);
size_t bfs_parked_bytes(void);
/* For tests: another budget (0 keeps nothing but what is being parked); returns the old one. */
size_t bfs_park_set_budget(size_t bytes);

#endif

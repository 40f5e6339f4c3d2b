// SPDX-License-Identifier: MIT
/* STUB: being written. */
#include "config.h"
#include "blockfs/codec.h"
static bool probe_none(const uint8_t *h, size_t l) { (void)h; (void)l; return false; }
static const char *const sfx[] = { NULL };
const struct bfs_codec bfs_codec_bgzf = { .name = "bgzf", .suffixes = sfx, .probe = probe_none };

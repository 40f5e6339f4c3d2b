/* SPDX-License-Identifier: MIT */
/*
 * LZ4 frames with linked blocks (codec_lz4_linked.c), for codec_lz4.c,
 * which parses frame headers and hands such a frame's blocks over: the
 * walk that decodes the frame once and cuts it into spans with a
 * checkpoint each, the decoding of one span from its checkpoint, and the
 * checkpoints' bytes in the index cache. Knows bytes only.
 */
#ifndef BLOCKFS_LZ4_LINKED_H
#define BLOCKFS_LZ4_LINKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_io;
struct bfs_index;

/*
 * A span's aux: its frame's block max (64 KiB..4 MiB, a power of two)
 * with this bit set, which no block of an independent frame has.
 */
#define BFS_LZ4_SPAN_TAG       1u
/* Largest output and input of one span (a cut after the target, see the .c). */
#define BFS_LZ4_SPAN_USIZE_MAX (8u << 20)
#define BFS_LZ4_SPAN_CLEN_MAX  (24u << 20)

/* What the walk needs of a linked frame's header, checked by codec_lz4.c. */
struct bfs_lz4_lframe {
	uint64_t start;	   /* the frame's magic */
	uint64_t data;	   /* its first block header */
	uint32_t bmax;	   /* block max size */
	bool bcsum, ccsum; /* block checksums, content checksum */
	uint64_t csize;	   /* the content size it states; 0: none */
};

/* One scan's state for its linked frames; NULL until the first one. */
struct bfs_lz4_lwalk;

/**
 * bfs_lz4_lwalk_frame() - decode the linked frame @f of @io, adding its
 * spans to @idx and their checkpoints to *@lw (made on first use).
 * Return: 0 with *@next after the frame; 1 when the index was marked
 * broken (the file ends there); -errno (-ENOMEM, -EIO, -EFBIG).
 */
int bfs_lz4_lwalk_frame(struct bfs_lz4_lwalk **lw, struct bfs_io *io, struct bfs_index *idx,
			const struct bfs_lz4_lframe *f, uint64_t *next);

/**
 * bfs_lz4_lwalk_end() - end a scan: with @keep, hand the checkpoints to
 * @idx as its private data (when there are any); free the rest.
 */
void bfs_lz4_lwalk_end(struct bfs_lz4_lwalk *lw, struct bfs_index *idx, bool keep);

/**
 * bfs_lz4_span_decode() - the first @n bytes (0 < @n <= usize) of span
 * @k of @idx from its clen bytes at @src, as codec.h's decode.
 * A whole span must hold exactly usize bytes in exactly clen bytes, and
 * with @verify match the XXH32 of its output the walk recorded.
 */
int bfs_lz4_span_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
			uint32_t n, bool verify, const char **why);

/* Cache hooks for the checkpoints: as codec.h's cache_save and cache_load. */
int bfs_lz4_lsave(const struct bfs_index *idx, uint8_t **out, size_t *len);
int bfs_lz4_lload(struct bfs_index *idx, const uint8_t *priv, size_t len);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What the harnesses in tests/fuzz share: the libFuzzer entry point each
 * defines, FZ_CHECK (a failed check aborts, which libFuzzer and the replay
 * both report as a crash), the invariants of a block index, the decoding
 * of every block compared with a reference decoder's output, and that
 * reference for gzip. Harnesses link blockfs-core and call it as the
 * daemon does; nothing here is compiled into blockfs itself.
 */
#ifndef BLOCKFS_FUZZ_H
#define BLOCKFS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_blk;
struct bfs_codec;
struct bfs_index;

/* Defined by each harness: run one input. Always returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

_Noreturn void fz_fail(const char *file, int line, const char *what);
#define FZ_CHECK(cond) ((cond) ? (void)0 : fz_fail(__FILE__, __LINE__, #cond))

/* Largest reference output kept: beyond it the comparison stops. */
#define FZ_REF_MAX (64u << 20)

/* Decoded bytes of a whole file by an independent decoder. */
struct fz_ref {
	uint8_t *p; /* the first len bytes it produced, even when it then failed */
	size_t len;
	bool complete; /* the whole input decoded without error */
};

/*
 * Structural invariants of @idx for a backing file of @size bytes: entries
 * contiguous in decompressed offsets and adding up to idx->usize, in file
 * order without overlap, inside the file, exact below nexact, the poison
 * entry only last and only when broken.
 */
void fz_check_index(const struct bfs_index *idx, uint64_t size);

/*
 * Decode block @b from @src (its clen bytes), on its own (outside any
 * index: an lz4 span is refused), into exactly usize bytes with verify on
 * and off; checks the return codes and that both modes agree.
 * Return: the verified bytes (caller frees), or NULL if the block is bad.
 */
uint8_t *fz_decode_both(const struct bfs_codec *codec, const struct bfs_blk *b, const uint8_t *src);

/*
 * Settle @idx completely, then decode every block of @file (@size bytes)
 * with verify on and off, in buffers of exactly clen and usize bytes so
 * that ASan sees any access past them. Checks the codec's return codes,
 * that both verify modes agree, and, for the run of blocks from the start
 * that all decode, that their bytes equal @ref's (when @ref is not NULL).
 * When @ref is complete and every block decodes, the lengths must match.
 */
void fz_check_blocks(const struct bfs_codec *codec, struct bfs_index *idx, const uint8_t *file,
		     size_t size, const struct fz_ref *ref);

/*
 * Point @io at @data and check that sniffing it and probing its head
 * agree on the codec, every codec offered (plain gzip too). Return: the
 * sniffed codec, or NULL.
 */
struct bfs_io;
const struct bfs_codec *fz_sniff(struct bfs_io *io, const uint8_t *data, size_t size);

/* gzip members one after another, decoded by zlib (RFC 1952 multi-member). */
void fz_gunzip(const uint8_t *in, size_t len, struct fz_ref *ref);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Builders for the unit tests: LZ4 frames and BGZF files made in memory
 * with the formats' own libraries (liblz4's frame API; zlib's raw deflate
 * framed by hand-written BGZF headers and trailers), the .gzi bgzip
 * writes for them, and a mount in part on a temporary directory. Linked into the tests that list them in
 * tests/meson.build (unit_builders). A builder that cannot build fails
 * the running test through cmocka's asserts: callers check nothing.
 * Include it after <cmocka.h>.
 */
#ifndef BLOCKFS_TESTS_BUILDERS_H
#define BLOCKFS_TESTS_BUILDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lz4frame.h>

#include "blockfs/codec.h"

/* ---- bytes ---- */

/* A growable byte string: a backing file under construction. */
struct tb_buf {
	uint8_t *p;
	size_t len, cap;
};

void tb_put(struct tb_buf *b, const void *p, size_t len);
void tb_put_le32(struct tb_buf *b, uint32_t v);

/* xorshift64: reproducible bytes without a data file. */
uint64_t tb_rng(uint64_t *s);
/* @n bytes of word salad (compresses well, like text); free() it. */
uint8_t *tb_text(size_t n, uint64_t seed);
/* @n incompressible bytes (LZ4F and bgzip store such blocks raw); free() it. */
uint8_t *tb_random(size_t n, uint64_t seed);

/* ---- LZ4 frames (lz4_Frame_format.md) ---- */

/* Independent blocks of @id; content size @n if @csize; block, content checksums if asked. */
LZ4F_preferences_t tb_lz4_prefs(LZ4F_blockSizeID_t id, bool csize, bool bcsum, bool ccsum,
				size_t n);
/* Append one frame of @in to @b: begin, one update, end. */
void tb_lz4_frame(struct tb_buf *b, const uint8_t *in, size_t n, const LZ4F_preferences_t *p);
/*
 * Append one frame of @in to @b; after each chunk of @chunk bytes (0: one
 * chunk) call LZ4F_flush, which ends the current block early.
 */
void tb_lz4_frame_chunked(struct tb_buf *b, const uint8_t *in, size_t n,
			  const LZ4F_preferences_t *p, size_t chunk);
/* Just the header LZ4F writes for @p (a valid HC for hand-made frames); its length. */
size_t tb_lz4_header(struct tb_buf *b, const LZ4F_preferences_t *p);
/* A skippable frame (magic 0x184D2A5@nibble) of @len (at most 1024) junk bytes. */
void tb_lz4_skippable(struct tb_buf *b, unsigned int nibble, size_t len);

/* ---- BGZF (SAM/BAM spec 4.1) ---- */

#define TB_BGZF_CHUNK	65280 /* what bgzip puts in one member */
#define TB_BGZF_HDR_LEN 18    /* bgzip's header: XLEN 6, BC only */

/* Where each member went: the index a scan must find. */
struct tb_member {
	uint64_t coff, uoff;
	uint32_t clen, usize;
};

/* A BGZF file under construction; zero-initialise, free with tb_bgzf_free(). */
struct tb_bgzf {
	uint8_t *buf;
	size_t len, cap;
	struct tb_member *m; /* every member, empty ones too */
	size_t n, mcap;
	uint64_t usize;
};

/* Raw bytes (junk, a cut member): no member is recorded. */
void tb_bgzf_put(struct tb_bgzf *b, const void *p, size_t len);
/*
 * Append one member holding @len bytes of @data. @foreign adds a 4-byte
 * subfield 'X' 'Y' before BC, as other writers may.
 */
void tb_bgzf_member(struct tb_bgzf *b, const uint8_t *data, size_t len, bool foreign);
/* The empty member that ends a BGZF file. */
void tb_bgzf_eof(struct tb_bgzf *b);
/* @len bytes of @data in TB_BGZF_CHUNK-sized members, then the EOF marker if @eof. */
void tb_bgzf_data(struct tb_bgzf *b, const uint8_t *data, size_t len, bool eof);
/*
 * The .gzi bgzip writes: one pair per data member but the first; empty
 * members get none (they fall into the span before them). free() it.
 */
uint8_t *tb_bgzf_gzi(const struct tb_bgzf *b, size_t *len);
void tb_bgzf_free(struct tb_bgzf *b);

/* ---- one block outside any index ---- */

/*
 * @c's decode() of block @b on its own, as block 0 of an index of one
 * entry (enough for a block that decodes from its own bytes): the whole
 * block, or its first @n bytes. Returns what decode() returns.
 */
int tb_decode(const struct bfs_codec *c, const struct bfs_blk *b, const uint8_t *src, uint8_t *dst,
	      bool verify, const char **why);
int tb_decode_prefix(const struct bfs_codec *c, const struct bfs_blk *b, const uint8_t *src,
		     uint8_t *dst, uint32_t n, bool verify, const char **why);

/* ---- a mount in part (fs_i.h), on a temporary directory ---- */

struct bfs_fs;
struct bfs_opts;

#define TB_DIR_MAX 64

/*
 * A new empty directory, /dev/shm/bfs-@tag.XXXXXX where it can be made
 * (memory: some tests make tens of thousands of files), else in /tmp, its
 * name into @dir; and the parts of a mount every such test uses, options
 * @opts, the counters, a descriptor cache of at most @max_fds and the
 * snapshot cache. The caller adds what else it uses, and takes it down
 * before tb_mount_free().
 */
struct bfs_fs *tb_mount_new(char dir[TB_DIR_MAX], const char *tag, const struct bfs_opts *opts,
			    size_t max_fds);
/* Sleep past the time a just-changed directory counts as racy (snap.c). */
void tb_settle(void);
/* Free tb_mount_new()'s parts and @fs; remove @dir with all in it. */
void tb_mount_free(struct bfs_fs *fs, const char *dir);

#endif

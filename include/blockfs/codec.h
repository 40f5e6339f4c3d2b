/* SPDX-License-Identifier: MIT */
/*
 * Codecs: one const vtable per backing format (codec_lz4.c, codec_bgzf.c)
 * and a registry that recognises a file by its first bytes. A codec
 * knows bytes and formats only: no paths, no FUSE, no locks.
 */
#ifndef BLOCKFS_CODEC_H
#define BLOCKFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"
#include "blockfs/index.h"

struct bfs_io;
struct bfs_blk;

/* Bytes from a file's start that are enough for every probe. */
#define BFS_PROBE_LEN 32

/*
 * A backing name ending and what the shown name ends in instead: ".lz4"
 * is shown as "" (x.lz4 as x), ".tgz" as ".tar".
 */
struct bfs_suffix {
	const char *backing;
	const char *shown;
};

struct bfs_codec {
	const char *name;		   /* "lz4", "bgzf": user.blockfs.format */
	const struct bfs_suffix *suffixes; /* ended by { NULL, NULL } */
	const char *sidecar;		   /* index file beside NAME: NAME + this, or NULL */

	/*
	 * Is @head (a file's first @len bytes, len <= BFS_PROBE_LEN; less when
	 * the file is shorter) this format in a form blockfs serves block by
	 * block or span by span? Magic and header flags only. LZ4 frames
	 * with a dictionary ID say false: such files are shown unchanged.
	 */
	bool (*probe)(const uint8_t *head, size_t len);

	/*
	 * Optional. When @head opens with something this format lets a reader
	 * skip (LZ4 skippable frames), how many bytes to skip before probing
	 * again; 0 otherwise. Lets bfs_codec_sniff() see past a prelude of any
	 * length with one small read per hop.
	 */
	uint64_t (*prelude)(const uint8_t *head, size_t len);

	/*
	 * Append one entry per block of @io to @idx (initialised, empty).
	 * @side: the sidecar index (BGZF .gzi) if one exists, else NULL.
	 * Damage in the middle is not an error: the scan keeps the blocks
	 * before it, calls bfs_index_mark_broken() and returns 0.
	 * Return: 0, or -errno when nothing can be served: -EIO, -ENOMEM,
	 * -EFBIG (too many blocks), -ENOTSUP (a feature blockfs cannot serve).
	 */
	int (*scan)(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx);

	/*
	 * Decode the first @n bytes of block @k of @idx into @dst, which has
	 * room for @n: the whole block when @n is its usize, a prefix (0 < @n <
	 * usize, only when .prefix says the codec stops early) for a reader
	 * that wants a little of a big block. @src holds the blk[k].clen bytes
	 * at blk[k].coff; for a chained block flagged BFS_BLK_OPEN, the whole
	 * chain's input. The one entry for every kind of block: one that
	 * decodes from its own bytes reads only idx->blk[k]; a gzip span or a
	 * linked LZ4 span also its checkpoint in idx->priv (so a block outside
	 * its index, in an index of its own, is refused with -EBADMSG); a
	 * chained block (resume()) continues the decoder parked at its start.
	 * A whole block is checked as far as the format can (with @verify, its
	 * checksum); a prefix as far as can be without the rest (with @verify,
	 * a checksum over the compressed bytes; for gzip, that the deflate data
	 * inflates, not the span's CRC32).
	 * Context: reads nothing but @src (a chain's proof may write to the
	 * spill, spill.h); no lock but the codec's own leaf locks; any thread.
	 * Return: 0; -EBADMSG when the block is corrupt or decodes to another
	 * length; -EILSEQ when @verify and its checksum does not match;
	 * -EAGAIN for a chained block with no decoder parked at it; -ENOMEM;
	 * -EINVAL for an @n out of range. *@why (never NULL) gets a static
	 * one-phrase reason on failure.
	 */
	int (*decode)(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		      uint32_t n, bool verify, const char **why);
	/* Can decode() stop at @n < usize? BGZF's blocks (64 KiB at most) decode whole only. */
	bool prefix;

	/*
	 * Exact decompressed size of a BFS_BLK_GUESS block, from the blk->clen
	 * bytes at @src, without writing output. NULL when scan is always
	 * exact. Return: 0 or -EBADMSG (with *@why).
	 */
	int (*measure)(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
		       const char **why);

	/*
	 * Optional, for formats whose blocks decode only by continuing the
	 * decoder that decoded the block before (one zstd frame, one xz
	 * block: blocks flagged BFS_BLK_CHAIN, spans of one decoder's
	 * output). decode() of such a block takes the decoder parked
	 * at its start (or starts one, at the first block of a chain),
	 * decodes it whole and parks the decoder at the next block; with
	 * none parked there it returns -EAGAIN. resume() says where the
	 * read path must begin so that block @k can be reached: @k itself
	 * when a decoder is parked at its start (or it starts its chain),
	 * else the nearest earlier block that has one. The read path then
	 * decodes blocks [resume, k] in order, each continuing the last.
	 * Context: any thread; takes only the codec's own leaf lock.
	 */
	size_t (*resume)(const struct bfs_index *idx, size_t k);

	/*
	 * Optional, with resume: decode chained block @k flagged BFS_BLK_OPEN
	 * whole into @dst, reading the input it needs through @io (absolute
	 * offsets within the chain's [coff, coff + clen)) from where its
	 * decoder stands, and park the decoder at the next span; otherwise as
	 * decode(). Not a case of decode(): where an open span's input starts
	 * and ends is known only once the span before it is decoded, so the
	 * caller cannot hand over its bytes (decode() takes the whole chain's
	 * input, up to the size of the file, which only a caller that holds
	 * it all, a mapping or a test, can give); the read path reads through
	 * @io just what the decoder consumes. Context: as decode(), but reads
	 * @io (by this thread only).
	 */
	int (*decode_open)(const struct bfs_index *idx, size_t k, struct bfs_io *io, uint8_t *dst,
			   bool verify, const char **why);

	/*
	 * Optional, with resume: does chained block @b start its chain (the
	 * first span of its zstd frame or xz block)? From the entry alone,
	 * so that a pass over the index finds the units a read decodes from
	 * the start of (user.blockfs.units, unit_max).
	 */
	bool (*chain_head)(const struct bfs_blk *b);

	/*
	 * The index cache (index_cache.h). NULL cache_load: this codec's
	 * indexes are never cached.
	 *
	 * check_entry: could this format have produced block @b, read back
	 * from a cache entry (sizes within the format's limits, flags and
	 * aux meaningful)? The cache has checked order and bounds already.
	 *
	 * cache_save: optional; the codec-private bytes to keep with the
	 * entries (*@out: malloc'd, caller frees; *@len 0 for none).
	 * Return: 0 or -ENOMEM.
	 *
	 * cache_load: finish an index whose entries the cache restored: adopt
	 * @len private bytes (checking them; 0 bytes when cache_save wrote
	 * none), and distrust what the entry states but cannot prove, as scan
	 * does with a seek table (bfs_index_guess_irregular()).
	 * Return: 0; 1 when the bytes are unusable (the entry is ignored);
	 * -ENOMEM.
	 */
	bool (*check_entry)(const struct bfs_blk *b);
	int (*cache_save)(const struct bfs_index *idx, uint8_t **out, size_t *len);
	int (*cache_load)(struct bfs_index *idx, const uint8_t *priv, size_t len);
};

extern const struct bfs_codec bfs_codec_lz4;
extern const struct bfs_codec bfs_codec_bgzf;
extern const struct bfs_codec bfs_codec_gzip;
extern const struct bfs_codec bfs_codec_zstd;
extern const struct bfs_codec bfs_codec_xz;
extern const struct bfs_codec bfs_codec_bzip2;

/*
 * Spans of plain gzip this process decoded whole with libdeflate rather
 * than zlib (codec_gzip.c: lib_span()); always 0 without libdeflate. For
 * tests, which must see that the fast path is taken.
 */
uint64_t bfs_codec_gzip_lib_spans(void);

/*
 * zstd (codec_zstd.c), for tests: the low 32 bits of XXH64 (seed 0), as
 * zstd frame and seek table checksums hold them; and the bytes of the
 * decoders parked between spans of big frames, in all.
 */
uint32_t bfs_zstd_xxh64_low(const void *p, size_t len);
size_t bfs_zstd_parked_bytes(void);

/*
 * Which codecs the registry offers, and their settings: a mount's own
 * (struct bfs_file_env's codecs, from its -o gzip= and gzip_span=), so
 * that nothing about codecs is process-wide. The registry's functions
 * take them as @conf; a codec reads them from the index it fills
 * (struct bfs_index's conf) through bfs_codec_config(). NULL stands for
 * the defaults, BFS_CODEC_CONF_DEFAULT: plain gzip off (such files are
 * shown unchanged, as under -o gzip=raw), checkpoints gzip_span apart.
 */
struct bfs_codec_conf {
	bool gzip;	    /* plain gzip is decoded (gzip=index) */
	uint32_t gzip_span; /* bytes of output between gzip checkpoints */
};

/* Default gzip_span (doc/decisions/0011-plain-gzip.md) and its bounds. */
#define BFS_GZIP_SPAN_DEFAULT (1u << 20)
#define BFS_GZIP_SPAN_MIN     (64u << 10)
#define BFS_GZIP_SPAN_MAX     (32u << 20)

/* An initializer: struct bfs_codec_conf c = BFS_CODEC_CONF_DEFAULT; */
#define BFS_CODEC_CONF_DEFAULT                                    \
	{                                                         \
		.gzip = false, .gzip_span = BFS_GZIP_SPAN_DEFAULT \
	}

/* The settings @idx was given (its conf), or the defaults when none (@idx NULL too). */
static inline const struct bfs_codec_conf *bfs_codec_config(const struct bfs_index *idx)
{
	static const struct bfs_codec_conf defaults = BFS_CODEC_CONF_DEFAULT;

	return idx && idx->conf ? idx->conf : &defaults;
}

/* The codec offered under @conf that claims @head, or NULL (serve the file unchanged). */
const struct bfs_codec *bfs_codec_probe(const struct bfs_codec_conf *conf, const uint8_t *head,
					size_t len);
/*
 * The codec offered under @conf that claims the file behind @io, looking
 * past preludes; NULL when none does or the file cannot be read. A few
 * small reads.
 */
const struct bfs_codec *bfs_codec_sniff(const struct bfs_codec_conf *conf, struct bfs_io *io);
/**
 * bfs_codec_settle() - how to show a file whose name says codec @named.
 * Names come from suffixes alone; the bytes settle the format once a
 * file is used. Any codec that lists a suffix @named lists may claim it
 * (a .gz file is BGZF or plain gzip).
 * Return: 0 and *@codec, the codec to decode with, or NULL when the
 * format is one @conf shows unchanged (plain gzip under gzip=raw);
 * -EMEDIUMTYPE when the bytes are not of that family, with *@found what
 * they are ("raw", or another codec's name); -errno when they cannot be
 * read.
 */
BFS_MUST_CHECK int bfs_codec_settle(const struct bfs_codec_conf *conf,
				    const struct bfs_codec *named, struct bfs_io *io,
				    const struct bfs_codec **codec, const char **found);
/*
 * The @n-th (codec, suffix) pair offered under @conf, in registry order,
 * false past the end. This order decides name collisions: .lz4, then .gz
 * and .bgz of BGZF, then .gz of plain gzip (when @conf offers it).
 */
bool bfs_codec_suffix_at(const struct bfs_codec_conf *conf, size_t n,
			 const struct bfs_codec **codec, const struct bfs_suffix **suffix);

#endif

// SPDX-License-Identifier: MIT
/*
 * blockfs-pack -t and --index. Both read a file the way blockfs does
 * (the core's codecs: walk, measure, decode with checksums; for zstd, xz
 * and bzip2 the core's whole read path, bfs_file_read(), as a mount
 * serves them), so what -t accepts blockfs serves; -t also decodes the
 * whole file with the format's own library (LZ4F, zlib, libzstd,
 * liblzma, libbz2), so what it accepts lz4 -d, gzip -d, zstd -d, xz -d
 * and bzip2 -d accept too, and compares the two decodings.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/log.h"
#include "blockfs/seektable.h"
#include "blockfs/stats.h"
#include "blockfs/xxh32.h"
#include "pack.h"

#define LZ4_MAGIC	   0x184D2204u
#define LZ4_LEGACY	   0x184C2102u
#define STREAM_CHUNK	   (1u << 20)
/* the zstd seekable format's footer, its last 4 bytes (codec_zstd.c) */
#define ZSEEK_FOOTER_MAGIC 0x8F92EAB1u

/* SAM/BAM spec 4.1: the empty member that ends every BGZF file */
static const uint8_t bgzf_eof[28] = {
	0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C',
	2,    0,    0x1b, 0,	3, 0, 0, 0, 0, 0,    0, 0, 0,	0,
};

static int bad(const char *path, const char *fmt, ...) BFS_PRINTF(2, 3);

static int bad(const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pk_err("%s: %s", path, msg);
	return 1;
}

/* What a whole-file decode gave: length and XXH32 of the bytes. */
struct digest {
	uint64_t len;
	struct bfs_xxh32 h;
};

static void digest_init(struct digest *d)
{
	d->len = 0;
	bfs_xxh32_init(&d->h, 0);
}

static void digest_add(struct digest *d, const void *p, size_t n)
{
	d->len += n;
	bfs_xxh32_update(&d->h, p, n);
}

static bool digest_eq(const struct digest *a, const struct digest *b)
{
	return a->len == b->len && bfs_xxh32_digest(&a->h) == bfs_xxh32_digest(&b->h);
}

/*
 * Build the index as blockfs does without a table (@io may end before a
 * seek table), settle every block and decode each with its checksum.
 * Return 0 with *@d, or 1 after saying what is wrong.
 */
static int walk_and_decode(const char *path, struct bfs_io *io, const struct bfs_codec *c,
			   struct bfs_index *idx, struct digest *d)
{
	uint8_t *src = NULL, *dst = NULL;
	size_t srccap = 0;
	int rc;

	rc = c->scan(io, NULL, idx);
	if (rc == -ENOTSUP)
		return bad(path, "uses a feature blockfs cannot serve block by block");
	if (rc < 0)
		return bad(path, "read error: %s", strerror(-rc));
	rc = bfs_settle(idx, io, c, UINT64_MAX);
	if (rc < 0)
		return bad(path, "read error: %s", strerror(-rc));
	digest_init(d);
	dst = malloc(idx->max_usize ? idx->max_usize : 1);
	if (!dst)
		return bad(path, "out of memory");
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		const char *why = "corrupt block";

		if ((b->flags & BFS_BLK_BAD) && k + 1 == idx->n && idx->broken) {
			rc = bad(path, "%s", idx->why);
			goto out;
		}
		if (b->clen > srccap) {
			free(src);
			srccap = b->clen;
			src = malloc(srccap);
			if (!src) {
				rc = bad(path, "out of memory");
				goto out;
			}
		}
		rc = bfs_io_read(io, src, b->clen, b->coff);
		if (rc < 0) {
			rc = bad(path, "read error at byte %llu: %s", (unsigned long long)b->coff,
				 strerror(-rc));
			goto out;
		}
		rc = c->decode(idx, k, src, dst, b->usize, true, &why);
		if (rc == 0 && (b->flags & BFS_BLK_BAD))
			rc = -EBADMSG; /* decodes, but failed to measure */
		if (rc < 0) {
			rc = bad(path, "block %zu at byte %llu: %s", k, (unsigned long long)b->coff,
				 why);
			goto out;
		}
		digest_add(d, dst, b->usize);
	}
	rc = 0;
out:
	free(src);
	free(dst);
	return rc;
}

/* The whole file through LZ4F, as lz4 -d reads it. */
static int lz4f_decode(const char *path, struct bfs_io *io, struct digest *d)
{
	LZ4F_dctx *dc;
	uint8_t *in = malloc(STREAM_CHUNK), *out = malloc(STREAM_CHUNK);
	uint64_t off = 0;
	size_t hint = 1;
	int rc = 0;

	digest_init(d);
	if (!in || !out || LZ4F_isError(LZ4F_createDecompressionContext(&dc, LZ4F_VERSION))) {
		free(in);
		free(out);
		return bad(path, "out of memory");
	}
	while (off < io->size) {
		size_t len =
			io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) : STREAM_CHUNK;
		size_t pos = 0;

		rc = bfs_io_read(io, in, len, off);
		if (rc < 0) {
			rc = bad(path, "read error: %s", strerror(-rc));
			goto out;
		}
		off += len;
		while (pos < len) {
			size_t sin = len - pos, sout = STREAM_CHUNK;

			hint = LZ4F_decompress(dc, out, &sout, in + pos, &sin, NULL);
			if (LZ4F_isError(hint)) {
				rc = bad(path, "liblz4 refuses it: %s", LZ4F_getErrorName(hint));
				goto out;
			}
			digest_add(d, out, sout);
			pos += sin;
		}
	}
	if (hint != 0)
		rc = bad(path, "liblz4: the file ends inside a frame (truncated)");
out:
	LZ4F_freeDecompressionContext(dc);
	free(in);
	free(out);
	return rc;
}

static int check_lz4(const char *path, struct bfs_io *io)
{
	struct bfs_seektable t = { 0 };
	struct bfs_io walk = *io;
	struct bfs_index idx;
	struct digest dw, dl;
	const char *why = NULL;
	int rc;

	rc = bfs_seektable_load(io, BFS_INDEX_MAX_BLOCKS, &t, &why);
	if (rc == -EBADMSG)
		return bad(path, "seek table unusable (blockfs ignores it): %s", why);
	if (rc < 0)
		return bad(path, "read error: %s", strerror(-rc));
	if (rc == 0)
		walk.size = t.table_off; /* walk the frames, not the table */
	bfs_index_init(&idx, walk.size);
	rc = walk_and_decode(path, &walk, &bfs_codec_lz4, &idx, &dw);
	if (rc == 0 && t.e) {
		if (t.n != idx.n)
			rc = bad(path, "seek table lists %zu blocks, the frames hold %zu", t.n,
				 idx.n);
		for (size_t k = 0; rc == 0 && k < t.n; k++) {
			const struct bfs_blk *b = &idx.blk[k];
			const struct bfs_seektable_entry *e = &t.e[k];

			if (e->coff != b->coff || e->clen != b->clen || e->usize != b->usize ||
			    e->bmax != b->aux || e->csum != !!(b->flags & BFS_BLK_CSUM))
				rc = bad(path, "seek table disagrees with block %zu at byte %llu",
					 k, (unsigned long long)b->coff);
		}
	}
	if (rc == 0)
		rc = lz4f_decode(path, io, &dl);
	if (rc == 0 && !digest_eq(&dw, &dl))
		rc = bad(path, "blockfs and liblz4 decode it differently");
	free(t.e);
	bfs_index_destroy(&idx);
	return rc;
}

/* The whole file through zlib, member after member, as gzip -d reads it. */
static int zlib_decode(const char *path, struct bfs_io *io, struct digest *d)
{
	uint8_t *in = malloc(STREAM_CHUNK), *out = malloc(STREAM_CHUNK);
	z_stream z = { 0 };
	uint64_t off = 0;
	int rc = 0, zr = Z_STREAM_END;

	digest_init(d);
	if (!in || !out || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(in);
		free(out);
		return bad(path, "out of memory");
	}
	while (off < io->size) {
		size_t len =
			io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) : STREAM_CHUNK;

		rc = bfs_io_read(io, in, len, off);
		if (rc < 0) {
			rc = bad(path, "read error: %s", strerror(-rc));
			goto out;
		}
		off += len;
		z.next_in = in;
		z.avail_in = (uInt)len;
		while (z.avail_in > 0) {
			if (zr == Z_STREAM_END && z.total_in > 0)
				inflateReset(&z); /* the next member */
			z.next_out = out;
			z.avail_out = STREAM_CHUNK;
			zr = inflate(&z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END) {
				rc = bad(path, "zlib refuses it: %s",
					 z.msg ? z.msg : "corrupt data");
				goto out;
			}
			digest_add(d, out, STREAM_CHUNK - z.avail_out);
		}
	}
	if (zr != Z_STREAM_END)
		rc = bad(path, "zlib: the file ends inside a member (truncated)");
out:
	inflateEnd(&z);
	free(in);
	free(out);
	return rc;
}

/* The .gzi bgzip -i would write for @idx, into *@out (caller frees). */
static int gzi_bytes(const struct bfs_index *idx, uint8_t **out, size_t *len)
{
	size_t n = idx->n ? idx->n - 1 : 0;
	uint8_t *b = malloc(8 + n * 16);

	if (!b)
		return -ENOMEM;
	bfs_put_le64(b, n);
	for (size_t i = 1; i < idx->n; i++) {
		bfs_put_le64(b + 8 + (i - 1) * 16, idx->blk[i].coff);
		bfs_put_le64(b + 8 + (i - 1) * 16 + 8, idx->blk[i].uoff);
	}
	*out = b;
	*len = 8 + n * 16;
	return 0;
}

/* 1 when @path exists with exactly @want's bytes, 0 when it differs, -errno. */
static int same_file(const char *path, const uint8_t *want, size_t len)
{
	struct stat st;
	uint8_t *have;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != len) {
		close(fd);
		return 0;
	}
	have = malloc(len ? len : 1);
	if (!have) {
		close(fd);
		return -ENOMEM;
	}
	{
		struct bfs_io io;

		bfs_io_init_fd(&io, fd, len);
		rc = bfs_io_read(&io, have, len, 0);
	}
	if (rc == 0)
		rc = memcmp(have, want, len) == 0;
	free(have);
	close(fd);
	return rc;
}

static int check_bgzf(const char *path, struct bfs_io *io)
{
	struct bfs_index idx;
	struct digest dw, dz;
	uint8_t tail[sizeof(bgzf_eof)], *gzi = NULL;
	char *side = NULL;
	size_t glen;
	int rc;

	bfs_index_init(&idx, io->size);
	rc = walk_and_decode(path, io, &bfs_codec_bgzf, &idx, &dw);
	if (rc == 0 && (io->size < sizeof(tail) ||
			bfs_io_read(io, tail, sizeof(tail), io->size - sizeof(tail)) < 0 ||
			memcmp(tail, bgzf_eof, sizeof(tail)) != 0))
		rc = bad(path, "no BGZF end-of-file marker (truncated?)");
	if (rc == 0 && asprintf(&side, "%s.gzi", path) < 0) {
		side = NULL;
		rc = bad(path, "out of memory");
	}
	if (rc == 0 && gzi_bytes(&idx, &gzi, &glen) < 0)
		rc = bad(path, "out of memory");
	if (rc == 0) {
		int same = same_file(side, gzi, glen);

		if (same == 0)
			rc = bad(path,
				 "%s does not match the members (stale? blockfs-pack --index -f)",
				 side);
		else if (same < 0 && same != -ENOENT)
			rc = bad(path, "%s: %s", side, strerror(-same));
	}
	if (rc == 0)
		rc = zlib_decode(path, io, &dz);
	if (rc == 0 && !digest_eq(&dw, &dz))
		rc = bad(path, "blockfs and zlib decode it differently");
	free(gzi);
	free(side);
	bfs_index_destroy(&idx);
	return rc;
}

/* ---- zstd, xz, bzip2: a mount's read path against the format's library ---- */

/* Decoded blocks kept while reading: the spans a chunk ends in, for the next one. */
#define CORE_CACHE (64u << 20)

/*
 * Open the file behind @fd (not consumed) as a mount does (bfs_file_open():
 * its seek table or a walk, measured; checksums verified as -o verify
 * does) and read all of it through bfs_file_read(), in order, as cat of
 * the shown file would. Return 0 with *@d, or 1 after saying what is
 * wrong. *@blocks: the index's blocks (spans of chained ones included);
 * *@source: where the index came from (enum bfs_index_source).
 */
static int core_decode(const char *path, int fd, const struct bfs_codec *c, struct digest *d,
		       size_t *blocks, uint8_t *source)
{
	struct bfs_file_env env = { .verify = true };
	struct bfs_file *f = NULL;
	uint8_t *buf = malloc(STREAM_CHUNK);
	uint64_t off = 0, size;
	int dfd, rc;

	digest_init(d);
	env.mount = bfs_counters_new(NULL);
	if (!buf || !env.mount || bfs_cache_new(&env.cache, CORE_CACHE) < 0) {
		rc = bad(path, "out of memory");
		goto out;
	}
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0) {
		rc = bad(path, "%s", strerror(errno));
		goto out;
	}
	rc = bfs_file_open(&f, dfd, NULL, -1, c, path, &env, NULL);
	if (rc < 0) {
		close(dfd);
		f = NULL;
		if (rc == -ENOTSUP)
			rc = bad(path, "blockfs cannot serve it: %s",
				 "it uses a feature blockfs does not decode (a dictionary, or a "
				 "window or filter beyond its limits)");
		else
			rc = bad(path, "blockfs cannot index it: %s", strerror(-rc));
		goto out;
	}
	if (f->idx.broken) {
		rc = bad(path,
			 "damaged: %s; blockfs serves %" PRIu64 " bytes of it, reads past "
			 "them fail",
			 f->idx.why, f->idx.n ? f->idx.blk[f->idx.n - 1].uoff : 0);
		goto out;
	}
	*blocks = f->idx.n;
	*source = f->idx.source;
	size = bfs_file_size(f);
	while (off < size) {
		ssize_t n = bfs_file_read(f, buf, STREAM_CHUNK, off);

		if (n <= 0) {
			int err = n < 0 ? (int)-n : EIO;

			rc = bad(path,
				 "damaged: blockfs fails to read decoded byte %" PRIu64 ": %s%s%s",
				 off,
				 err == EILSEQ	? "checksum mismatch" :
				 err == EBADMSG ? "corrupt data" :
						  strerror(err),
				 f->idx.why[0] ? ": " : "", f->idx.why);
			goto out;
		}
		digest_add(d, buf, (size_t)n);
		off += (uint64_t)n;
	}
	rc = 0;
out:
	bfs_file_put(f);
	bfs_cache_free(env.cache);
	bfs_counters_put(env.mount);
	free(buf);
	return rc;
}

/* The whole file through libzstd, frame after frame (skippable ones skipped), as zstd -d. */
static int zstd_lib_decode(const char *path, struct bfs_io *io, struct digest *d)
{
	ZSTD_DCtx *z = ZSTD_createDCtx();
	uint8_t *in = malloc(STREAM_CHUNK), *out = malloc(STREAM_CHUNK);
	uint64_t off = 0;
	size_t r = 0;
	int rc = 0;

	digest_init(d);
	if (!z || !in || !out) {
		rc = bad(path, "out of memory");
		goto out;
	}
	while (off < io->size) {
		size_t len =
			io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) : STREAM_CHUNK;
		ZSTD_inBuffer ib = { in, len, 0 };

		rc = bfs_io_read(io, in, len, off);
		if (rc < 0) {
			rc = bad(path, "read error: %s", strerror(-rc));
			goto out;
		}
		off += len;
		while (ib.pos < ib.size) {
			ZSTD_outBuffer ob = { out, STREAM_CHUNK, 0 };

			r = ZSTD_decompressStream(z, &ob, &ib);
			if (ZSTD_isError(r)) {
				rc = bad(path, "libzstd refuses it: %s", ZSTD_getErrorName(r));
				goto out;
			}
			digest_add(d, out, ob.pos);
		}
	}
	/* What the decoder still holds once all the input is in. */
	for (;;) {
		ZSTD_inBuffer ib = { in, 0, 0 };
		ZSTD_outBuffer ob = { out, STREAM_CHUNK, 0 };

		if (r == 0)
			break;
		r = ZSTD_decompressStream(z, &ob, &ib);
		if (ZSTD_isError(r)) {
			rc = bad(path, "libzstd refuses it: %s", ZSTD_getErrorName(r));
			goto out;
		}
		digest_add(d, out, ob.pos);
		if (ob.pos == 0)
			break;
	}
	if (r != 0)
		rc = bad(path, "libzstd: the file ends inside a frame (truncated)");
out:
	ZSTD_freeDCtx(z);
	free(in);
	free(out);
	return rc;
}

/* The whole file through liblzma, stream after stream, as xz -d. */
static int xz_lib_decode(const char *path, struct bfs_io *io, struct digest *d)
{
	lzma_stream z = LZMA_STREAM_INIT;
	uint8_t *in = malloc(STREAM_CHUNK), *out = malloc(STREAM_CHUNK);
	uint64_t off = 0;
	lzma_ret lr = LZMA_OK;
	int rc = 0;

	digest_init(d);
	if (!in || !out || lzma_stream_decoder(&z, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
		rc = bad(path, "out of memory");
		goto out;
	}
	while (lr == LZMA_OK) {
		lzma_action act = LZMA_RUN;

		if (z.avail_in == 0 && off < io->size) {
			size_t len = io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) :
								     STREAM_CHUNK;

			rc = bfs_io_read(io, in, len, off);
			if (rc < 0) {
				rc = bad(path, "read error: %s", strerror(-rc));
				goto out;
			}
			off += len;
			z.next_in = in;
			z.avail_in = len;
		}
		if (off == io->size)
			act = LZMA_FINISH;
		z.next_out = out;
		z.avail_out = STREAM_CHUNK;
		lr = lzma_code(&z, act);
		digest_add(d, out, STREAM_CHUNK - z.avail_out);
	}
	if (lr == LZMA_BUF_ERROR)
		rc = bad(path, "liblzma: the file ends inside a stream (truncated)");
	else if (lr != LZMA_STREAM_END)
		rc = bad(path, "liblzma refuses it: %s",
			 lr == LZMA_DATA_ERROR	  ? "corrupt data" :
			 lr == LZMA_FORMAT_ERROR  ? "not xz" :
			 lr == LZMA_OPTIONS_ERROR ? "unsupported options" :
			 lr == LZMA_MEM_ERROR	  ? "out of memory" :
						    "error");
out:
	lzma_end(&z);
	free(in);
	free(out);
	return rc;
}

/* Are @n bytes of @p all zero? */
static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * The whole file through libbz2, stream after stream, as bzip2 -d; zero
 * bytes after the last stream are padding (tape blocks), anything else
 * is not.
 */
static int bz2_lib_decode(const char *path, struct bfs_io *io, struct digest *d)
{
	bz_stream z = { 0 };
	uint8_t *in = malloc(STREAM_CHUNK), *out = malloc(STREAM_CHUNK);
	uint64_t off = 0;
	bool open = false, padding = false;
	unsigned int streams = 0;
	int rc = 0, br;

	digest_init(d);
	if (!in || !out) {
		rc = bad(path, "out of memory");
		goto out;
	}
	for (;;) {
		if (z.avail_in == 0) {
			size_t len;

			if (off == io->size)
				break;
			len = io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) :
							      STREAM_CHUNK;
			rc = bfs_io_read(io, in, len, off);
			if (rc < 0) {
				rc = bad(path, "read error: %s", strerror(-rc));
				goto out;
			}
			off += len;
			z.next_in = (char *)in;
			z.avail_in = (unsigned int)len;
		}
		if (!open && streams > 0 && z.next_in[0] == 0)
			padding = true;
		if (padding) {
			if (!all_zero((const uint8_t *)z.next_in, z.avail_in)) {
				rc = bad(path,
					 "libbz2: bytes after the last stream are not a stream");
				goto out;
			}
			z.avail_in = 0;
			continue;
		}
		if (!open) {
			if (BZ2_bzDecompressInit(&z, 0, 0) != BZ_OK) {
				rc = bad(path, "out of memory");
				goto out;
			}
			open = true;
		}
		z.next_out = (char *)out;
		z.avail_out = STREAM_CHUNK;
		br = BZ2_bzDecompress(&z);
		if (br != BZ_OK && br != BZ_STREAM_END) {
			rc = bad(path, "libbz2 refuses it: %s",
				 br == BZ_DATA_ERROR ? "corrupt data (a block CRC does not match)" :
				 br != BZ_DATA_ERROR_MAGIC ? "error" :
				 streams ? "bytes after the last stream are not a stream" :
					   "not a bzip2 stream");
			goto out;
		}
		digest_add(d, out, STREAM_CHUNK - z.avail_out);
		if (br == BZ_STREAM_END) {
			unsigned int left = z.avail_in;
			char *next = z.next_in;

			BZ2_bzDecompressEnd(&z);
			open = false;
			streams++;
			z.next_in = next;
			z.avail_in = left;
		}
	}
	if (open)
		rc = bad(path, "libbz2: the file ends inside a stream (truncated)");
out:
	if (open)
		BZ2_bzDecompressEnd(&z);
	free(in);
	free(out);
	return rc;
}

/* -t of a zstd, xz or bzip2 file: blockfs's reading and the library's must agree. */
static int check_core(const char *path, int fd, struct bfs_io *io, const struct bfs_codec *c,
		      const struct pk_opts *o)
{
	struct digest dc, dl;
	uint8_t source = 0;
	size_t blocks = 0;
	int rc;

	/* The core's own reasons go into the one line below: its log is for -vv. */
	bfs_log_set_level(o->verbose > 1 ? LOG_DEBUG : LOG_EMERG);
	rc = core_decode(path, fd, c, &dc, &blocks, &source);
	bfs_log_set_level(LOG_INFO);
	/*
	 * A seek table's footer at the end that blockfs did not use: the
	 * table is damaged or does not fit the frames, and every mount walks
	 * the file instead (blockfs-pack -f -c zstd makes it again).
	 */
	if (rc == 0 && c == &bfs_codec_zstd && source != BFS_SRC_SEEKTABLE) {
		uint8_t tail[4];

		if (io->size >= sizeof(tail) &&
		    bfs_io_read(io, tail, sizeof(tail), io->size - sizeof(tail)) == 0 &&
		    bfs_le32(tail) == ZSEEK_FOOTER_MAGIC)
			rc = bad(path, "seek table unusable (blockfs ignores it and walks the "
				       "frames)");
	}
	if (rc == 0 && c == &bfs_codec_zstd)
		rc = zstd_lib_decode(path, io, &dl);
	else if (rc == 0 && c == &bfs_codec_xz)
		rc = xz_lib_decode(path, io, &dl);
	else if (rc == 0)
		rc = bz2_lib_decode(path, io, &dl);
	if (rc == 0 && dc.len != dl.len)
		rc = bad(path, "blockfs reads %" PRIu64 " bytes of it, the %s library %" PRIu64,
			 dc.len, c->name, dl.len);
	else if (rc == 0 && !digest_eq(&dc, &dl))
		rc = bad(path, "blockfs and the %s library decode it differently", c->name);
	if (rc == 0 && o->verbose)
		fprintf(stderr, "%s: %s, %" PRIu64 " bytes, %zu blocks\n", path, c->name, dc.len,
			blocks);
	return rc;
}

static int open_checked(const char *path, int flags, struct bfs_io *io, uint8_t *head, size_t *hlen)
{
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, flags | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return bad(path, "%s", strerror(errno)), -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return bad(path, "not a regular file"), -1;
	}
	bfs_io_init_fd(io, fd, (uint64_t)st.st_size);
	n = pread(fd, head, BFS_PROBE_LEN, 0);
	if (n < 0) {
		bad(path, "read error: %s", strerror(errno));
		close(fd);
		return -1;
	}
	*hlen = (size_t)n;
	return fd;
}

int pk_check_file(const char *path, const struct pk_opts *o)
{
	const struct bfs_codec *c;
	uint8_t head[BFS_PROBE_LEN];
	struct bfs_io io;
	struct digest d;
	size_t hlen;
	int fd, rc;

	fd = open_checked(path, O_RDONLY, &io, head, &hlen);
	if (fd < 0)
		return 1;
	if (bfs_codec_lz4.probe(head, hlen)) {
		rc = check_lz4(path, &io);
	} else if (bfs_codec_bgzf.probe(head, hlen)) {
		rc = check_bgzf(path, &io);
	} else if ((c = bfs_codec_sniff(o->codecs, &io)) == &bfs_codec_zstd || c == &bfs_codec_xz ||
		   c == &bfs_codec_bzip2) {
		rc = check_core(path, fd, &io, c, o);
	} else if (hlen >= 4 && (bfs_le32(head) == LZ4_MAGIC || bfs_le32(head) == LZ4_LEGACY ||
				 (bfs_le32(head) & 0xFFFFFFF0u) == 0x184D2A50u)) {
		/* linked blocks, a dictionary, legacy: blockfs shows it unchanged */
		rc = lz4f_decode(path, &io, &d);
	} else if (hlen >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
		rc = zlib_decode(path, &io, &d); /* plain gzip: shown unchanged */
	} else {
		rc = bad(path, "not an LZ4, gzip, zstd, xz or bzip2 file blockfs can serve");
	}
	close(fd);
	if (rc == 0 && o->verbose)
		fprintf(stderr, "%s: OK\n", path);
	return rc;
}

/* ---- -u ---- */

/*
 * Do blocks of @n sizes (@usize_at(k)) hold @block bytes each but the
 * last, which holds 1 to @block? The layout blockfs-pack writes.
 */
static bool cut_at(size_t n, uint32_t (*usize_at)(const void *, size_t), const void *ctx,
		   uint32_t block)
{
	for (size_t k = 0; k < n; k++) {
		uint32_t u = usize_at(ctx, k);

		if (k + 1 < n ? u != block : u == 0 || u > block)
			return false;
	}
	return true;
}

static uint32_t table_usize(const void *ctx, size_t k)
{
	return ((const struct bfs_seektable *)ctx)->e[k].usize;
}

static uint32_t index_usize(const void *ctx, size_t k)
{
	const struct bfs_blk *b = &((const struct bfs_index *)ctx)->blk[k];

	/* a chained span is part of a bigger unit: never the layout asked for */
	return b->flags & (BFS_BLK_CHAIN | BFS_BLK_BAD) ? 0 : b->usize;
}

/* A walk of @c's blocks: settled, undamaged, cut at @block, @usize in all. */
static bool walked_current(struct bfs_io *io, const struct bfs_codec *c, uint32_t block,
			   uint64_t usize)
{
	struct bfs_index idx;
	bool ok;
	int rc;

	bfs_index_init(&idx, io->size);
	rc = c->scan(io, NULL, &idx);
	if (rc == 0)
		rc = bfs_settle(&idx, io, c, UINT64_MAX);
	ok = rc == 0 && !idx.broken && atomic_load(&idx.usize) == usize &&
	     cut_at(idx.n, index_usize, &idx, block);
	bfs_index_destroy(&idx);
	return ok;
}

/*
 * The zstd seekable format: the footer's magic at the very end (written
 * last, so a cut file has none), then the codec's own reading of the
 * table: frames tiling the file, the first and last headers checked.
 * Without a table the file is not what -c zstd writes, whatever it holds:
 * no walk of it is needed to say so.
 */
static bool zstd_current(struct bfs_io *io, uint32_t block, uint64_t usize)
{
	struct bfs_index idx;
	uint8_t tail[4];
	bool ok;

	if (io->size < sizeof(tail) || bfs_io_read(io, tail, sizeof(tail), io->size - 4) < 0 ||
	    bfs_le32(tail) != ZSEEK_FOOTER_MAGIC)
		return false;
	bfs_index_init(&idx, io->size);
	ok = bfs_codec_zstd.scan(io, NULL, &idx) == 0 && idx.source == BFS_SRC_SEEKTABLE &&
	     !idx.broken && atomic_load(&idx.usize) == usize &&
	     cut_at(idx.n, index_usize, &idx, block);
	bfs_index_destroy(&idx);
	return ok;
}

/*
 * xz: one stream whose blocks are cut at @block, read from its index
 * with liblzma's file-info decoder (the footers and indexes only, a few
 * reads from the end): not the codec's scan, which decodes a big block
 * whole to find its spans.
 */
static bool xz_current(struct bfs_io *io, uint32_t block, uint64_t usize)
{
	lzma_stream z = LZMA_STREAM_INIT;
	lzma_index *xi = NULL;
	uint8_t *buf = malloc(STREAM_CHUNK);
	uint64_t off = 0;
	lzma_ret lr;
	bool ok = false;

	if (!buf || lzma_file_info_decoder(&z, &xi, UINT64_MAX, io->size) != LZMA_OK)
		goto out;
	do {
		if (z.avail_in == 0 && off < io->size) {
			size_t len = io->size - off < STREAM_CHUNK ? (size_t)(io->size - off) :
								     STREAM_CHUNK;

			if (bfs_io_read(io, buf, len, off) < 0)
				goto out;
			z.next_in = buf;
			z.avail_in = len;
			off += len;
		}
		lr = lzma_code(&z, LZMA_RUN);
		if (lr == LZMA_SEEK_NEEDED) {
			off = z.seek_pos;
			z.avail_in = 0;
			lr = LZMA_OK;
		}
	} while (lr == LZMA_OK && (z.avail_in > 0 || off < io->size));
	if (lr != LZMA_STREAM_END || !xi)
		goto out;
	if (lzma_index_stream_count(xi) == 1 && lzma_index_uncompressed_size(xi) == usize) {
		lzma_vli n = lzma_index_block_count(xi), k = 0;
		lzma_index_iter it;

		ok = true;
		lzma_index_iter_init(&it, xi);
		while (ok && !lzma_index_iter_next(&it, LZMA_INDEX_ITER_BLOCK)) {
			lzma_vli u = it.block.uncompressed_size;

			ok = ++k < n ? u == block : u > 0 && u <= block;
		}
	}
out:
	if (xi)
		lzma_index_end(xi, NULL);
	lzma_end(&z);
	free(buf);
	return ok;
}

int pk_output_current(const char *path, const struct pk_opts *o, uint64_t usize)
{
	const struct bfs_codec *want = o->codec == PK_GZIP ? &bfs_codec_bgzf :
				       o->codec == PK_ZSTD ? &bfs_codec_zstd :
				       o->codec == PK_XZ   ? &bfs_codec_xz :
							     &bfs_codec_lz4;
	uint8_t tail[sizeof(bgzf_eof)];
	struct bfs_seektable t = { 0 };
	const struct bfs_codec *c;
	const char *why = NULL;
	struct bfs_io io;
	struct stat st;
	bool ok = false;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	bfs_io_init_fd(&io, fd, (uint64_t)st.st_size);
	/* The codec a mount would take it for (bfs_codec_sniff()) must be the one asked for. */
	c = bfs_codec_sniff(o->codecs, &io);
	if (c != want)
		goto out;
	switch (o->codec) {
	case PK_ZSTD:
		ok = zstd_current(&io, o->block, usize);
		break;
	case PK_XZ:
		ok = xz_current(&io, o->block, usize);
		break;
	case PK_GZIP:
		/* written last: without it the file was cut short */
		ok = io.size >= sizeof(tail) &&
		     bfs_io_read(&io, tail, sizeof(tail), io.size - sizeof(tail)) == 0 &&
		     memcmp(tail, bgzf_eof, sizeof(tail)) == 0 &&
		     walked_current(&io, c, o->block, usize);
		break;
	default:
		/* The seek table is written last and states the size; past the
		 * index's limit blockfs-pack writes none, and the frames are walked. */
		rc = bfs_seektable_load(&io, BFS_INDEX_MAX_BLOCKS, &t, &why);
		if (rc == 0)
			ok = t.usize == usize && cut_at(t.n, table_usize, &t, o->block);
		else if (rc == 1)
			ok = walked_current(&io, c, o->block, usize);
		free(t.e);
		break;
	}
out:
	close(fd);
	return ok;
}

/* ---- --index ---- */

static int index_lz4(const char *path, int fd, struct bfs_io *io, const struct pk_opts *o)
{
	struct bfs_seektable_writer w = { 0 };
	struct bfs_seektable t;
	struct bfs_index idx;
	const char *why = NULL;
	const uint8_t *tab;
	size_t len;
	int rc;

	rc = bfs_seektable_load(io, BFS_INDEX_MAX_BLOCKS, &t, &why);
	if (rc == 0) {
		free(t.e);
		if (!o->quiet)
			fprintf(stderr, "%s: already has a seek table\n", path);
		return 0;
	}
	if (rc < 0 && rc != -EBADMSG)
		return bad(path, "read error: %s", strerror(-rc));
	/* An unusable table (rc == -EBADMSG) is a skippable frame like any other: walk past it. */
	bfs_index_init(&idx, io->size);
	rc = bfs_codec_lz4.scan(io, NULL, &idx);
	if (rc == 0)
		rc = bfs_settle(&idx, io, &bfs_codec_lz4, UINT64_MAX);
	if (rc < 0) {
		rc = bad(path, rc == -ENOTSUP ? "cannot be read block by block" : "read error: %s",
			 strerror(-rc));
		goto out;
	}
	for (size_t k = 0; k < idx.n; k++) {
		const struct bfs_blk *b = &idx.blk[k];
		struct bfs_seektable_entry e = { .coff = b->coff,
						 .clen = b->clen,
						 .usize = b->usize,
						 .bmax = b->aux,
						 .csum = b->flags & BFS_BLK_CSUM };

		if (b->flags & BFS_BLK_BAD) {
			rc = bad(path, "damaged, not indexed: %s", idx.why);
			goto out;
		}
		if (bfs_seektable_writer_add(&w, &e) < 0) {
			rc = bad(path, "block %zu at byte %llu cannot be described by a seek table",
				 k, (unsigned long long)b->coff);
			goto out;
		}
	}
	if (bfs_seektable_writer_finish(&w, io->size, 0, &tab, &len) < 0) {
		rc = bad(path, "cannot build a seek table (%zu blocks)", idx.n);
		goto out;
	}
	/* An interrupt from here on cuts the file back: it stays valid LZ4 either way. */
	pk_cleanup_truncate(fd, io->size);
	{
		ssize_t n = pwrite(fd, tab, len, (off_t)io->size);

		if (n != (ssize_t)len || fsync(fd) < 0) {
			int err = n < 0 ? errno : (n != (ssize_t)len ? ENOSPC : errno);

			if (ftruncate(fd, (off_t)io->size) < 0)
				err = errno;
			pk_cleanup_truncate(-1, 0);
			rc = bad(path, "write error: %s (file left as it was)", strerror(err));
			goto out;
		}
	}
	pk_cleanup_truncate(-1, 0);
	if (o->verbose)
		fprintf(stderr, "%s: seek table of %zu blocks added (%zu bytes)\n", path, idx.n,
			len);
	rc = 0;
out:
	bfs_seektable_writer_release(&w);
	bfs_index_destroy(&idx);
	return rc;
}

static int index_bgzf(const char *path, struct bfs_io *io, const struct pk_opts *o)
{
	struct bfs_index idx;
	uint8_t *gzi = NULL;
	char *side = NULL, *tmp = NULL;
	size_t glen;
	int rc, same, fd = -1;

	bfs_index_init(&idx, io->size);
	rc = bfs_codec_bgzf.scan(io, NULL, &idx);
	if (rc < 0) {
		rc = bad(path, "read error: %s", strerror(-rc));
		goto out;
	}
	if (idx.broken) {
		rc = bad(path, "damaged, not indexed: %s", idx.why);
		goto out;
	}
	if (gzi_bytes(&idx, &gzi, &glen) < 0 || asprintf(&side, "%s.gzi", path) < 0) {
		side = NULL;
		rc = bad(path, "out of memory");
		goto out;
	}
	same = same_file(side, gzi, glen);
	if (same == 1) {
		if (!o->quiet)
			fprintf(stderr, "%s: %s is already up to date\n", path, side);
		rc = 0;
		goto out;
	}
	if (same == 0 && !o->force) {
		rc = bad(path, "%s already exists and differs; use -f to replace it", side);
		goto out;
	}
	fd = pk_tmp_open(1, side, &tmp);
	if (fd < 0) {
		rc = bad(side, "cannot create: %s", strerror(-fd));
		goto out;
	}
	{
		struct stat st;
		ssize_t n = write(fd, gzi, glen);

		if (n != (ssize_t)glen) {
			rc = bad(side, "write error: %s", strerror(n < 0 ? errno : ENOSPC));
			pk_tmp_abort(1, fd, tmp);
			goto out;
		}
		/* readable by whoever may read the .gz */
		if (fstat(io->fd, &st) == 0)
			(void)fchmod(fd, st.st_mode & 0666);
	}
	rc = pk_tmp_commit(1, fd, tmp, side, o->force);
	if (rc < 0) {
		rc = bad(side, "%s",
			 rc == -EEXIST ? "appeared meanwhile; use -f to replace it" :
					 strerror(-rc));
		goto out;
	}
	if (o->verbose)
		fprintf(stderr, "%s: wrote %s (%zu members)\n", path, side, idx.n);
	rc = 0;
out:
	free(gzi);
	free(side);
	bfs_index_destroy(&idx);
	return rc;
}

/*
 * --index --index-cache: walk @path as a mount does (scan, then measure
 * what the file does not state) and keep the index in the cache, keyed
 * by the file's identity, so that a mount with -o index_cache=DIR opens
 * it with one read of the entry. The file itself is not touched.
 */
static int index_cached(const char *path, int fd, struct bfs_io *io, const struct bfs_codec *c,
			const struct pk_opts *o)
{
	struct bfs_index idx;
	uint64_t reads;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return bad(path, "%s", strerror(errno));
	bfs_index_init(&idx, io->size);
	idx.conf = o->codecs;
	rc = c->scan(io, NULL, &idx);
	if (rc == 0)
		rc = bfs_measure(&idx, io, c, NULL);
	reads = atomic_load(&io->nread);
	if (rc < 0) {
		rc = bad(path, "read error: %s", strerror(-rc));
	} else if (idx.broken) {
		rc = bad(path, "damaged, not indexed: %s", idx.why);
	} else if (idx.source != BFS_SRC_WALK) {
		if (!o->quiet)
			fprintf(stderr, "%s: has its own index (a seek table): nothing to keep\n",
				path);
		rc = 0;
	} else if (reads < BFS_ICACHE_MIN_READS) {
		if (!o->quiet)
			fprintf(stderr,
				"%s: walked in %" PRIu64 " reads, about what reading an "
				"entry costs: not kept (a mount does the same)\n",
				path, reads);
		rc = 0;
	} else {
		rc = bfs_icache_save(o->icache, fd, &st, c, &idx, reads);
		if (rc == 1)
			rc = bad(path, "changed while it was walked; not kept");
		else if (rc < 0)
			rc = bad(path, "cannot write its index cache entry: %s", strerror(-rc));
		else if (o->verbose)
			fprintf(stderr,
				"%s: kept its %s index (%zu blocks, %" PRIu64
				" bytes decoded, %" PRIu64 " reads to walk)\n",
				path, c->name, idx.n, (uint64_t)atomic_load(&idx.usize), reads);
	}
	bfs_index_destroy(&idx);
	return rc;
}

int pk_index_file(const char *path, const struct pk_opts *o)
{
	uint8_t head[BFS_PROBE_LEN];
	const struct bfs_codec *c;
	struct bfs_io io;
	size_t hlen;
	int fd, rc;

	fd = open_checked(path, O_RDONLY, &io, head, &hlen);
	if (fd < 0)
		return 1;
	/* The codec a mount would pick, past any prelude (bfs_codec_sniff()). */
	c = bfs_codec_sniff(o->codecs, &io);
	if (o->icache && c && c->cache_load) {
		rc = index_cached(path, fd, &io, c, o);
	} else if (o->icache && c) {
		rc = bad(path, "%s: blockfs keeps no index of this format in a cache", c->name);
	} else if (c == &bfs_codec_lz4) {
		close(fd);
		fd = open_checked(path, O_RDWR, &io, head, &hlen); /* only LZ4 is written to */
		if (fd < 0)
			return 1;
		rc = index_lz4(path, fd, &io, o);
	} else if (c == &bfs_codec_bgzf) {
		rc = index_bgzf(path, &io, o);
	} else if (c == &bfs_codec_zstd || c == &bfs_codec_xz || c == &bfs_codec_bzip2) {
		rc = bad(path,
			 "%s: nothing to add in place (blockfs reads %s); "
			 "--index-cache DIR keeps the index a mount's walk makes, and "
			 "blockfs-pack -c %s makes a file blockfs opens from its own index",
			 c->name,
			 c == &bfs_codec_zstd ?
				 "a seek table, or walks the frames" :
			 c == &bfs_codec_xz ?
				 "the stream's own index, and decodes big blocks once" :
				 "every block once to find them",
			 c == &bfs_codec_xz ? "xz" : "zstd");
	} else if (hlen >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
		rc = bad(path, "plain gzip, not BGZF: its checkpoints can only go to an index "
			       "cache (--index-cache DIR), or repack it with blockfs-pack -c gzip");
	} else if (hlen >= 4 && bfs_le32(head) == LZ4_MAGIC) {
		rc = bad(path, "LZ4 with linked blocks or a dictionary: its blocks cannot be "
			       "read alone; repack it with blockfs-pack");
	} else {
		rc = bad(path, "not a format blockfs serves block by block (LZ4, gzip, zstd, xz, "
			       "bzip2)");
	}
	close(fd);
	return rc;
}

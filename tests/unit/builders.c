// SPDX-License-Identifier: MIT
/*
 * The unit tests' builders (builders.h): LZ4 frames through liblz4's
 * frame API, BGZF members through zlib's raw deflate with the header and
 * trailer written here, bgzip's .gzi for them, and the parts of a mount
 * the inode and snapshot tests share.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "blockfs/common.h"
#include "blockfs/stats.h"
#include "builders.h"
#include "fs_i.h"

/* ---- bytes ---- */

void tb_put(struct tb_buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (len)
		memcpy(b->p + b->len, p, len);
	b->len += len;
}

void tb_put_le32(struct tb_buf *b, uint32_t v)
{
	uint8_t w[4];

	bfs_put_le32(w, v);
	tb_put(b, w, 4);
}

uint64_t tb_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

uint8_t *tb_text(size_t n, uint64_t seed)
{
	static const char *const words[] = { "block",  "frame",	  "lz4 ",     "index ",
					     "the ",   "of ",	  "random ",  "access\n",
					     "settle", "decode ", "measure ", "42 " };
	uint8_t *p = malloc(n ? n : 1);
	size_t i = 0;

	assert_non_null(p);
	seed = seed * 2654435761u + 1;
	while (i < n) {
		const char *w = words[tb_rng(&seed) % BFS_ARRAY_SIZE(words)];
		size_t wl = strlen(w);

		if (wl > n - i)
			wl = n - i;
		memcpy(p + i, w, wl);
		i += wl;
	}
	return p;
}

uint8_t *tb_random(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);

	assert_non_null(p);
	seed = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(tb_rng(&seed) >> 24);
	return p;
}

/* ---- LZ4 frames ---- */

LZ4F_preferences_t tb_lz4_prefs(LZ4F_blockSizeID_t id, bool csize, bool bcsum, bool ccsum, size_t n)
{
	LZ4F_preferences_t p;

	memset(&p, 0, sizeof(p));
	p.frameInfo.blockSizeID = id;
	p.frameInfo.blockMode = LZ4F_blockIndependent;
	p.frameInfo.contentChecksumFlag = ccsum ? LZ4F_contentChecksumEnabled : 0;
	p.frameInfo.blockChecksumFlag = bcsum ? LZ4F_blockChecksumEnabled : 0;
	p.frameInfo.contentSize = csize ? n : 0;
	return p;
}

void tb_lz4_frame_chunked(struct tb_buf *b, const uint8_t *in, size_t n,
			  const LZ4F_preferences_t *p, size_t chunk)
{
	LZ4F_cctx *c;
	size_t cap = LZ4F_HEADER_SIZE_MAX, r, done = 0;
	uint8_t *out;

	assert_false(LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)));
	if (!chunk)
		chunk = n ? n : 1;
	cap += LZ4F_compressBound(chunk, p) * (n / chunk + 2) + LZ4F_compressBound(0, p);
	out = malloc(cap);
	assert_non_null(out);
	r = LZ4F_compressBegin(c, out, cap, p);
	assert_false(LZ4F_isError(r));
	tb_put(b, out, r);
	while (done < n) {
		size_t len = n - done < chunk ? n - done : chunk;

		r = LZ4F_compressUpdate(c, out, cap, in + done, len, NULL);
		assert_false(LZ4F_isError(r));
		tb_put(b, out, r);
		if (done + len < n) {
			r = LZ4F_flush(c, out, cap, NULL);
			assert_false(LZ4F_isError(r));
			tb_put(b, out, r);
		}
		done += len;
	}
	r = LZ4F_compressEnd(c, out, cap, NULL);
	assert_false(LZ4F_isError(r));
	tb_put(b, out, r);
	free(out);
	LZ4F_freeCompressionContext(c);
}

void tb_lz4_frame(struct tb_buf *b, const uint8_t *in, size_t n, const LZ4F_preferences_t *p)
{
	tb_lz4_frame_chunked(b, in, n, p, 0);
}

size_t tb_lz4_header(struct tb_buf *b, const LZ4F_preferences_t *p)
{
	LZ4F_cctx *c;
	uint8_t out[LZ4F_HEADER_SIZE_MAX];
	size_t r;

	assert_false(LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)));
	r = LZ4F_compressBegin(c, out, sizeof(out), p);
	assert_false(LZ4F_isError(r));
	tb_put(b, out, r);
	LZ4F_freeCompressionContext(c);
	return r;
}

void tb_lz4_skippable(struct tb_buf *b, unsigned int nibble, size_t len)
{
	uint8_t junk[1024];

	assert_true(len <= sizeof(junk));
	memset(junk, 0xA5, sizeof(junk));
	tb_put_le32(b, 0x184D2A50u + nibble);
	tb_put_le32(b, (uint32_t)len);
	tb_put(b, junk, len);
}

/* ---- BGZF ---- */

void tb_bgzf_put(struct tb_bgzf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->buf = realloc(b->buf, b->cap);
		assert_non_null(b->buf);
	}
	memcpy(b->buf + b->len, p, len);
	b->len += len;
}

void tb_bgzf_member(struct tb_bgzf *b, const uint8_t *data, size_t len, bool foreign)
{
	uint8_t hdr[12 + 8 + 6] = { 0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff };
	size_t xlen = foreign ? 8 + 6 : 6, hlen = 12 + xlen, p = 12;
	uint8_t cdata[70000], tail[8];
	z_stream zs = { 0 };
	size_t clen, mlen;

	assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = (Bytef *)(uintptr_t)data;
	zs.avail_in = (uInt)len;
	zs.next_out = cdata;
	zs.avail_out = sizeof(cdata);
	assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
	clen = sizeof(cdata) - zs.avail_out;
	deflateEnd(&zs);

	mlen = hlen + clen + 8;
	assert_true(mlen <= 65536);
	hdr[10] = (uint8_t)xlen;
	hdr[11] = 0;
	if (foreign) {
		memcpy(hdr + p,
		       "XY\x04\x00"
		       "abcd",
		       8);
		p += 8;
	}
	hdr[p++] = 'B';
	hdr[p++] = 'C';
	hdr[p++] = 2;
	hdr[p++] = 0;
	hdr[p++] = (uint8_t)(mlen - 1);
	hdr[p++] = (uint8_t)((mlen - 1) >> 8);

	if (b->n == b->mcap) {
		b->mcap = b->mcap ? b->mcap * 2 : 16;
		b->m = realloc(b->m, b->mcap * sizeof(*b->m));
		assert_non_null(b->m);
	}
	b->m[b->n++] = (struct tb_member){ .coff = b->len,
					   .uoff = b->usize,
					   .clen = (uint32_t)mlen,
					   .usize = (uint32_t)len };
	tb_bgzf_put(b, hdr, hlen);
	tb_bgzf_put(b, cdata, clen);
	bfs_put_le32(tail, (uint32_t)crc32(0, data, (uInt)len));
	bfs_put_le32(tail + 4, (uint32_t)len);
	tb_bgzf_put(b, tail, 8);
	b->usize += len;
}

void tb_bgzf_eof(struct tb_bgzf *b)
{
	tb_bgzf_member(b, (const uint8_t *)"", 0, false);
}

void tb_bgzf_data(struct tb_bgzf *b, const uint8_t *data, size_t len, bool eof)
{
	for (size_t off = 0; off < len; off += TB_BGZF_CHUNK)
		tb_bgzf_member(b, data + off, len - off < TB_BGZF_CHUNK ? len - off : TB_BGZF_CHUNK,
			       false);
	if (eof)
		tb_bgzf_eof(b);
}

uint8_t *tb_bgzf_gzi(const struct tb_bgzf *b, size_t *len)
{
	uint8_t *g = malloc(8 + 16 * b->n);
	uint64_t count = 0;
	bool first = true;

	assert_non_null(g);
	for (size_t i = 0; i < b->n; i++) {
		if (b->m[i].usize == 0)
			continue;
		if (!first) {
			bfs_put_le64(g + 8 + 16 * count, b->m[i].coff);
			bfs_put_le64(g + 8 + 16 * count + 8, b->m[i].uoff);
			count++;
		}
		first = false;
	}
	bfs_put_le64(g, count);
	*len = 8 + 16 * count;
	return g;
}

void tb_bgzf_free(struct tb_bgzf *b)
{
	free(b->buf);
	free(b->m);
	memset(b, 0, sizeof(*b));
}

/* ---- one block outside any index ---- */

int tb_decode_prefix(const struct bfs_codec *c, const struct bfs_blk *b, const uint8_t *src,
		     uint8_t *dst, uint32_t n, bool verify, const char **why)
{
	struct bfs_blk one = *b;
	struct bfs_index idx = { .blk = &one, .n = 1, .cap = 1 };

	return c->decode(&idx, 0, src, dst, n, verify, why);
}

int tb_decode(const struct bfs_codec *c, const struct bfs_blk *b, const uint8_t *src, uint8_t *dst,
	      bool verify, const char **why)
{
	return tb_decode_prefix(c, b, src, dst, b->usize, verify, why);
}

/* ---- a mount in part ---- */

/* Remove @name under @at, all in it too; quietly. */
static void rm_tree(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *d;

	if (!dp) {
		unlinkat(at, name, 0);
		return;
	}
	while ((d = readdir(dp)))
		if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
			rm_tree(dirfd(dp), d->d_name);
	closedir(dp);
	unlinkat(at, name, AT_REMOVEDIR);
}

struct bfs_fs *tb_mount_new(char dir[TB_DIR_MAX], const char *tag, const struct bfs_opts *opts,
			    size_t max_fds)
{
	struct bfs_fs *fs;

	snprintf(dir, TB_DIR_MAX, "/dev/shm/bfs-%s.XXXXXX", tag);
	if (!mkdtemp(dir)) {
		snprintf(dir, TB_DIR_MAX, "/tmp/bfs-%s.XXXXXX", tag);
		assert_non_null(mkdtemp(dir));
	}
	fs = calloc(1, sizeof(*fs));
	assert_non_null(fs);
	fs->opts = opts;
	fs->env.mount = bfs_counters_new(NULL);
	assert_non_null(fs->env.mount);
	bfs_fdc_init(&fs->fdc, max_fds);
	assert_int_equal(bfs_snap_cache_init(&fs->snaps), 0);
	return fs;
}

void tb_settle(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 80 * 1000 * 1000 }, NULL);
}

void tb_mount_free(struct bfs_fs *fs, const char *dir)
{
	bfs_snap_cache_free(fs);
	assert_null(fs->snaps.chains);
	bfs_fdc_destroy(&fs->fdc);
	bfs_counters_put(fs->env.mount);
	free(fs);
	rm_tree(AT_FDCWD, dir);
}

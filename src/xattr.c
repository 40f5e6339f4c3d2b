// SPDX-License-Identifier: MIT
/*
 * user.blockfs.* attributes: one table of {name, formatter} walked by get
 * and list, so that a name is listed exactly when it can be read. The
 * backing file's own attributes pass through, read-only.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "fs_i.h"
#include "xattr.h"

/* Longest value any formatter writes, NUL included. */
#define VALUE_MAX 64

/* Writes the value into @out; -ENODATA when it does not apply to @f. */
typedef int (*fmt_fn)(const struct bfs_file *f, char *out);

static int fmt_format(const struct bfs_file *f, char *out)
{
	snprintf(out, VALUE_MAX, "%s", f->codec ? f->codec->name : "raw");
	return 0;
}

static int fmt_csize(const struct bfs_file *f, char *out)
{
	snprintf(out, VALUE_MAX, "%" PRIu64, (uint64_t)f->st.st_size);
	return 0;
}

static int fmt_block_size(const struct bfs_file *f, char *out)
{
	if (!f->codec)
		return -ENODATA;
	snprintf(out, VALUE_MAX, "%" PRIu32, f->idx.block_size);
	return 0;
}

static int fmt_blocks(const struct bfs_file *f, char *out)
{
	if (!f->codec)
		return -ENODATA;
	/* The poison entry that marks damage is not a block of the file. */
	snprintf(out, VALUE_MAX, "%zu", f->idx.n - (f->idx.broken ? 1 : 0));
	return 0;
}

static const struct {
	const char *name;
	fmt_fn fmt;
} attrs[] = {
	{ BFS_XATTR_PREFIX "format", fmt_format },
	{ BFS_XATTR_PREFIX "compressed_size", fmt_csize },
	{ BFS_XATTR_PREFIX "block_size", fmt_block_size },
	{ BFS_XATTR_PREFIX "blocks", fmt_blocks },
};

static bool ours(const char *name)
{
	return strncmp(name, BFS_XATTR_PREFIX, sizeof(BFS_XATTR_PREFIX) - 1) == 0;
}

static ssize_t reply_value(const char *val, size_t len, char *buf, size_t size)
{
	if (size == 0)
		return (ssize_t)len;
	if (size < len)
		return -ERANGE;
	memcpy(buf, val, len);
	return (ssize_t)len;
}

static void procpath(const struct bfs_inode *in, char *path, size_t len)
{
	snprintf(path, len, "/proc/self/fd/%d", in->fd);
}

/* Only regular files and directories carry attributes we pass through. */
static bool passes_through(const struct bfs_inode *in)
{
	return in->type == S_IFREG || in->type == S_IFDIR;
}

ssize_t bfs_xattr_get(struct bfs_fs *fs, struct bfs_inode *in, const char *name, char *buf,
		      size_t size)
{
	char val[VALUE_MAX], path[64];
	struct bfs_file *f;
	bool changed;
	ssize_t n;
	int rc = -ENODATA;

	if (!ours(name)) {
		if (!passes_through(in))
			return -ENODATA;
		procpath(in, path, sizeof(path));
		n = getxattr(path, name, buf, size);
		return n < 0 ? -errno : n;
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(attrs); i++) {
		if (strcmp(name, attrs[i].name) != 0)
			continue;
		if (in->type != S_IFREG)
			return -ENODATA;
		rc = bfs_inode_file(fs, in, &f, &changed);
		if (rc < 0)
			return rc;
		rc = attrs[i].fmt(f, val);
		bfs_file_put(f);
		break;
	}
	return rc < 0 ? rc : reply_value(val, strlen(val), buf, size);
}

ssize_t bfs_xattr_list(struct bfs_fs *fs, struct bfs_inode *in, char *buf, size_t size)
{
	char list[1024], path[64];
	size_t len = 0;
	ssize_t n;

	if (in->type == S_IFREG) {
		struct bfs_file *f;
		char val[VALUE_MAX];
		bool changed;
		int rc = bfs_inode_file(fs, in, &f, &changed);

		if (rc < 0)
			return rc;
		for (size_t i = 0; i < BFS_ARRAY_SIZE(attrs); i++) {
			size_t nl = strlen(attrs[i].name) + 1;

			if (attrs[i].fmt(f, val) < 0)
				continue;
			memcpy(list + len, attrs[i].name, nl);	/* the table fits: see list[] */
			len += nl;
		}
		bfs_file_put(f);
	}
	if (passes_through(in)) {
		procpath(in, path, sizeof(path));
		n = listxattr(path, NULL, 0);
		if (n < 0 && errno != ENOTSUP)
			return -errno;
		if (n > 0) {
			/* Ask for the names straight into the reply, after ours. */
			if (size == 0)
				return (ssize_t)len + n;
			if (size < len)
				return -ERANGE;
			n = listxattr(path, buf + len, size - len);
			if (n < 0)
				return -errno;
			memcpy(buf, list, len);
			return (ssize_t)len + n;
		}
	}
	return reply_value(list, len, buf, size);
}

int bfs_xattr_set(struct bfs_fs *fs, struct bfs_inode *in, const char *name, const char *value,
		  size_t size, int flags)
{
	(void)fs;
	(void)in;
	(void)value;
	(void)size;
	(void)flags;
	/* No writable user.blockfs.* attribute yet; the hints will be the first. */
	return ours(name) ? -ENOTSUP : -EROFS;
}

int bfs_xattr_remove(struct bfs_fs *fs, struct bfs_inode *in, const char *name)
{
	return bfs_xattr_set(fs, in, name, NULL, 0, 0);
}

// SPDX-License-Identifier: MIT
/*
 * fuse_lowlevel_ops: each bfs_op_* turns a request into calls on inodes
 * and file versions, then sends exactly one reply. Internal codes are
 * 0/-errno; bfs_kernel_errno() is the one place they become reply codes.
 * No locks are held here; nothing here decodes.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "blockfs/file.h"
#include "blockfs/log.h"
#include "blockfs/push.h"
#include "blockfs/stats.h"
#include "blockfs/stream.h"
#include "blockfs/workq.h"
#include "fs_i.h"
#include "handle.h"
#include "ops.h"
#include "rdplus.h"
#include "xattr.h"

/*
 * Backing files may change, so names and attributes are trusted for
 * -o entry_timeout and attr_timeout seconds, absent names for
 * negative_timeout (0: a new file shows at once) (README: how the defaults were
 * chosen); file data is kept across opens unless the backing file changed
 * (bfs_op_open), which is what keeps repeated reads of an unchanged file
 * away from the daemon.
 */
_Static_assert(sizeof(fuse_ino_t) >= sizeof(struct bfs_inode *), "inode pointers are node ids");

static struct bfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct bfs_inode *inode_of(fuse_req_t req, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &fs_of(req)->root : (struct bfs_inode *)(uintptr_t)ino;
}

static fuse_ino_t ino_of(struct bfs_fs *fs, struct bfs_inode *in)
{
	return in == &fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
}

int bfs_kernel_errno(int rc)
{
	switch (rc) {
	case -EBADMSG: /* corrupt block */
	case -EILSEQ:  /* checksum mismatch */
	case -EFBIG:   /* more blocks than blockfs indexes */
		return EIO;
	default:
		return -rc;
	}
}

int bfs_ops_push(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	struct bfs_fs *fs = ctx;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	int rc;

	if (!bfs_gate_enter(&fs->notify))
		return -ESHUTDOWN;
	bv.buf[0].mem = (void *)buf;
	rc = fuse_lowlevel_notify_store(fs->se, (fuse_ino_t)ino, (off_t)off, &bv, 0);
	bfs_gate_leave(&fs->notify);
	return rc;
}

static void bfs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct bfs_fs *fs = userdata;

	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/*
	 * -o kernel_open: the first open answers ENOSYS, and from then on
	 * the kernel opens and releases files without asking (handle.c shares a
	 * handle per file among their READs).
	 */
	if (fs->opts->kernel_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
		atomic_store(&fs->kernel_open, true);
		/*
		 * With atomic O_TRUNC the kernel leaves truncating to the OPEN
		 * it no longer sends, and empties its cached copy without a
		 * word: an O_TRUNC open must become a SETATTR that gets EROFS.
		 */
		conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	} else if (fs->opts->kernel_open)
		bfs_warn("kernel_open: this kernel cannot open files itself; each open is checked");
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * READDIRPLUS in the kernel's AUTO mode: it asks for attributes with
	 * the names for a listing's first chunk, and for later chunks only
	 * once an entry of the listing has been looked up (ls -l). The first
	 * reply gives names alone while names seem to suffice, or is cut at
	 * -o readdirplus=N entries (readdir_common), so that a find that
	 * wants only names does not pay a backing stat, an inode and a
	 * dentry for each file of a big directory (README, Trees).
	 */
	if (fs->opts->readdirplus == 0)
		conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	else if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	/*
	 * The kernel offers its bdi's read-ahead and keeps the smaller of
	 * that and this; main.c has raised the bdi to -o kernel_readahead
	 * already (bfs_set_kernel_readahead()), so ask for as much here or
	 * the reply lowers it again.
	 */
	if (fs->opts->kernel_readahead > conn->max_readahead)
		conn->max_readahead = (unsigned int)fs->opts->kernel_readahead;
	/* libfuse ends the session unless this is the max_read it mounted with. */
	if (bfs_opts_given(fs->opts, "max_read"))
		conn->max_read = fs->opts->max_read;
}

static void reply_entry(fuse_req_t req, struct bfs_fs *fs, struct bfs_inode *in,
			const struct stat *st)
{
	struct fuse_entry_param e = {
		.ino = ino_of(fs, in),
		.attr = *st,
		.attr_timeout = fs->opts->attr_timeout,
		.entry_timeout = fs->opts->entry_timeout,
	};

	if (fuse_reply_entry(req, &e) == -ENOENT)
		bfs_inode_forget(fs, in, 1); /* interrupted: the kernel never got it */
}

static void bfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct bfs_fs *fs = fs_of(req);
	struct bfs_inode *in;
	struct stat st;
	int rc = bfs_lookup(fs, inode_of(req, parent), name, &in, &st);

	bfs_trim_note(fs, inode_of(req, parent));
	if (rc == 0)
		bfs_trim_poke(fs);
	if (rc == -ENOENT && fs->opts->negative_timeout > 0) {
		/* Node id 0: the kernel keeps a negative entry for negative_timeout. */
		struct fuse_entry_param e = { .entry_timeout = fs->opts->negative_timeout };

		fuse_reply_entry(req, &e);
	} else if (rc < 0) {
		fuse_reply_err(req, bfs_kernel_errno(rc));
	} else {
		if (!S_ISDIR(st.st_mode))
			bfs_rdplus_used(&fs->rdplus, 1);
		reply_entry(req, fs, in, &st);
	}
}

static void bfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	bfs_inode_forget(fs_of(req), inode_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void bfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		bfs_inode_forget(fs_of(req), inode_of(req, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static struct bfs_handle *handle_of(const struct fuse_file_info *fi)
{
	return (struct bfs_handle *)(uintptr_t)fi->fh;
}

static void bfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_inode *in = inode_of(req, ino);
	struct bfs_file *f;
	struct stat st;
	int rc;

	/*
	 * Through an open handle (fstat; the kernel refreshing the size
	 * before a read) answer for the version that handle reads, so that a
	 * reader whose backing file was truncated meets EIO, not an early EOF.
	 * The kernel passes a handle for regular files only.
	 */
	if (fi && fi->fh && (f = bfs_handle_file(handle_of(fi))))
		rc = bfs_version_stat_of(fs_of(req), in, f, &st);
	else
		rc = bfs_version_stat(fs_of(req), in, &st);
	if (rc < 0)
		fuse_reply_err(req, bfs_kernel_errno(rc));
	else
		fuse_reply_attr(req, &st, fs_of(req)->opts->attr_timeout);
}

static void bfs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct bfs_fs *fs = fs_of(req);
	struct bfs_inode *in = inode_of(req, ino);
	char buf[PATH_MAX + 1];
	int fd = bfs_backing_fd(fs, in);
	ssize_t n = fd < 0 ? fd : readlinkat(fd, "", buf, sizeof(buf));

	if (fd >= 0) {
		n = n < 0 ? -errno : n;
		bfs_backing_fd_put(fs, in);
	}
	if (n < 0)
		fuse_reply_err(req, bfs_kernel_errno((int)n));
	else if (n == sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

static void bfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = fs_of(req);
	struct bfs_handle *h;
	struct bfs_file *f;
	uint64_t stamp;
	bool changed;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (atomic_load_explicit(&fs->kernel_open, memory_order_relaxed)) {
		fuse_reply_err(req,
			       ENOSYS); /* success: the kernel opens files itself from now on */
		return;
	}
	bfs_rdplus_used(&fs->rdplus, 1);
	/*
	 * An unchanged file whose version was dropped opens without one: the
	 * kernel's pages of it are good, and a warm grep -r needs nothing else
	 * (bench/results/trees/2026-11-24-b744701/kernel-grep.md).
	 */
	rc = bfs_version_open(fs, inode_of(req, ino), &f, &changed, &stamp);
	if (rc == 1) {
		rc = bfs_handle_open_deferred(fs, inode_of(req, ino), ino, stamp, &h);
		if (rc == 0) {
			fi->keep_cache = 1;
			fi->fh = (uint64_t)(uintptr_t)h;
			if (fuse_reply_open(req, fi) != 0)
				bfs_handle_close(fs, h);
			return;
		}
	}
	if (rc < 0) {
		fuse_reply_err(req, bfs_kernel_errno(rc));
		return;
	}
	rc = bfs_handle_open(fs, f, ino, &h);
	if (rc < 0) {
		bfs_file_unuse(f);
		bfs_file_put(f);
		fuse_reply_err(req, bfs_kernel_errno(rc));
		return;
	}
	bfs_file_put(f); /* the handle's stream holds its own */
	/*
	 * A changed backing file: the kernel drops the pages it holds when
	 * keep_cache is off, and the attributes once we say so, so that a
	 * new size is seen on this very open.
	 */
	fi->keep_cache = !changed;
	if (changed && fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_open(req, fi) != 0)
		bfs_handle_close(fs, h); /* the open was interrupted: no release will come */
}

/*
 * The stream a READ or an lseek works on, held until stream_done(): the
 * handle's (a RELEASE may free the handle once the READ is answered), or
 * with -o kernel_open (no handle) the one the file's READs share, taken
 * with a use of its descriptor as well, since the ring may close that
 * handle at any time. A file changed behind the mount since the kernel
 * was told its size gets EIO, and the kernel is told to ask for its
 * attributes again.
 */
static struct bfs_stream *stream_of(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
				    int *err)
{
	struct bfs_fs *fs = fs_of(req);
	struct bfs_stream *s;

	if (fi->fh) {
		s = bfs_handle_stream(fs, handle_of(fi), err);
		if (s)
			bfs_stream_hold(s);
		return s;
	}
	s = bfs_handle_kopen(fs, inode_of(req, ino), ino, err);
	if (!s && *err == -ESTALE) {
		*err = -EIO;
		if (fs->se)
			fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	}
	return s;
}

static void stream_done(const struct fuse_file_info *fi, struct bfs_stream *s)
{
	if (fi->fh)
		bfs_stream_put(s);
	else
		bfs_stream_drop(s);
}

static void bfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct bfs_stream_next next;
	struct bfs_readv rv;
	int err;
	struct bfs_stream *s = stream_of(req, ino, fi, &err);
	ssize_t n;

	if (!s) {
		fuse_reply_err(req, bfs_kernel_errno(err));
		return;
	}
	if (!fi->fh && off == 0) /* kernel_open: a file read from its start was opened */
		bfs_rdplus_used(&fs_of(req)->rdplus, 1);
	n = bfs_stream_read(s, (uint64_t)off, size, &rv, &next);
	if (n < 0)
		fuse_reply_err(req, bfs_kernel_errno((int)n));
	else
		fuse_reply_iov(req, rv.iov, (int)rv.cnt); /* the blocks are still held */
	bfs_stream_ahead(s, &next);			  /* nobody waits for this now */
	bfs_readv_release(&rv);				  /* on the error path too */
	stream_done(fi, s);
}

/*
 * SEEK_DATA and SEEK_HOLE (the kernel answers the other whences itself).
 * A file shown unchanged asks its backing file, so that cp keeps a sparse
 * file sparse and skips its holes; the handle holds a use of the
 * descriptor, so it stays put, and the file offset lseek moves is one
 * nobody reads by (reads are preads). A decoded file has no holes: all
 * data up to its size. Never ENOSYS: the kernel would stop asking for
 * every file of the mount.
 */
static void bfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
			 struct fuse_file_info *fi)
{
	struct bfs_stream *s;
	struct bfs_file *f;
	uint64_t size;
	off_t r;
	int err;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	s = stream_of(req, ino, fi, &err);
	if (!s) {
		fuse_reply_err(req, bfs_kernel_errno(err));
		return;
	}
	f = bfs_stream_file(s);
	size = bfs_file_size(f);
	if (!f->codec) {
		r = lseek(f->fd, off, whence);
		if (r < 0)
			fuse_reply_err(req, errno);
		else
			fuse_reply_lseek(req, r);
	} else if (off < 0 || (uint64_t)off >= size) {
		fuse_reply_err(req, ENXIO);
	} else {
		fuse_reply_lseek(req, whence == SEEK_DATA ? off : (off_t)size);
	}
	stream_done(fi, s);
}

static void bfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fi->fh) /* kernel_open: no handle (and no RELEASE is sent) */
		bfs_handle_close(fs_of(req), handle_of(fi));
	/* before the reply: after it the kernel may forget the inode */
	bfs_inode_idle(fs_of(req), inode_of(req, ino));
	fuse_reply_err(req, 0);
}

static void bfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_dir *d;
	int rc = bfs_handle_opendir(fs_of(req), inode_of(req, ino), &d);

	bfs_trim_note(fs_of(req), inode_of(req, ino));
	if (rc < 0) {
		fuse_reply_err(req, bfs_kernel_errno(rc));
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0)
		bfs_handle_closedir(fs_of(req), d);
}

static bool is_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/*
 * One entry of readdirplus, with its attributes unless @bare; 0 when it
 * did not fit (and was undone).
 */
static size_t add_plus(fuse_req_t req, struct bfs_fs *fs, struct bfs_inode *dir,
		       struct bfs_snap_ctx *c, const struct bfs_dirent *de, char *p, size_t rem,
		       off_t next, bool bare)
{
	struct fuse_entry_param e = { .attr_timeout = fs->opts->attr_timeout,
				      .entry_timeout = fs->opts->entry_timeout };
	struct bfs_inode *in = NULL;
	size_t len;

	if (bare || is_dot(de->name)) {
		/* Node id 0: the kernel makes no dentry, only a name. */
		e.attr.st_ino = de->ino;
		e.attr.st_mode = (mode_t)de->type << 12;
	} else if (bfs_lookup_entry(fs, dir, c, de, &in, &e.attr) == 0) {
		e.ino = ino_of(fs, in);
		bfs_trim_poke(fs);
	} else {
		return SIZE_MAX; /* gone since the listing: skip it */
	}
	len = fuse_add_direntry_plus(req, p, rem, de->name, &e, next);
	if (len > rem) {
		if (in)
			bfs_inode_forget(fs, in, 1);
		return 0;
	}
	return len;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct bfs_dir *d = (struct bfs_dir *)(uintptr_t)fi->fh;
	struct bfs_fs *fs = fs_of(req);
	struct bfs_inode *dir = inode_of(req, ino);
	struct bfs_snap_ctx c = { .fs = fs, .snap = d->snap };
	char *buf = malloc(size), *p = buf;
	struct bfs_dirent de;
	struct bfs_snap *through = NULL;
	struct bfs_walk_ahead *ahead = NULL;
	size_t rem = size, head = SIZE_MAX;
	unsigned int files = 0;
	bool bare = false;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	c.dirfd = bfs_backing_fd(fs, dir); /* the lookups of readdirplus need it */
	if (c.dirfd < 0) {
		free(buf);
		fuse_reply_err(req, bfs_kernel_errno(c.dirfd));
		return;
	}
	/*
	 * The kernel's guess at a listing's start (bfs_op_init): names alone,
	 * or a short reply, though never an empty one, which would end the
	 * listing.
	 */
	if (plus && off > 0) {
		/* attributes asked for again: the last reply's were used (rdplus.h) */
		unsigned int n = atomic_exchange_explicit(&d->rdp_pending, 0, memory_order_relaxed);

		bfs_rdplus_used(&fs->rdplus, n);
		BFS_COUNT(fs->env.mount, attrs_used, n);
	}
	if (plus && off == 0 && bfs_rdplus_names_suffice(&fs->rdplus)) {
		bare = true;
		BFS_COUNT(fs->env.mount, names_only_replies, 1);
	} else if (plus && off == 0 && !fs->opts->readdirplus_auto)
		head = fs->opts->readdirplus;
	/* (names alone too, while bfs_rdplus_walk_ahead(): ls -l looks each up next, and the big
	   ones' walks run side by side) */
	if (plus && (!bare || bfs_rdplus_walk_ahead(&fs->rdplus)))
		ahead = bfs_walk_ahead(fs, dir, d, &c, (size_t)off,
				       head < BFS_WALK_AHEAD_MAX ? head : BFS_WALK_AHEAD_MAX);
	for (size_t i = (size_t)off; (i < head || p == buf) && (rc = bfs_dir_at(d, i, &de)) == 0;
	     i++) {
		size_t len;

		if (plus) {
			len = add_plus(req, fs, dir, &c, &de, p, rem, (off_t)i + 1, bare);
			if (len == SIZE_MAX)
				continue;
		} else {
			struct stat st = { .st_ino = de.ino, .st_mode = (mode_t)de.type << 12 };

			len = fuse_add_direntry(req, p, rem, de.name, &st, (off_t)i + 1);
			if (len > rem)
				len = 0;
		}
		if (len == 0)
			break;
		p += len;
		rem -= len;
		files += de.type != DT_DIR && !is_dot(de.name);
	}
	bfs_rdplus_listed(&fs->rdplus, files);
	atomic_store_explicit(&d->rdp_pending, plus && !bare ? files : 0, memory_order_relaxed);
	bfs_walk_ahead_done(fs, ahead);
	bfs_backing_fd_put(fs, dir);
	if (rc == 1)
		through = bfs_snap_hold(d->snap);
	fuse_reply_buf(req, buf, size - rem); /* bfs_dir_at() fails no more: made at opendir */
	free(buf);
	/*
	 * The listing is through: keep what it learned. A file write, so after
	 * the reply; the kernel may release @d as soon as it has it.
	 */
	if (through) {
		bfs_snap_save(fs, through);
		bfs_snap_put(through);
	}
}

static void bfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void bfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void bfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	bfs_handle_closedir(fs_of(req), (struct bfs_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void bfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(fs_of(req)->root_fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void bfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	(void)ino;
	fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}

/* The xattr(7) size protocol: size 0 asks for the length. Frees @buf. */
static void reply_xattr(fuse_req_t req, ssize_t n, char *buf, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, bfs_kernel_errno((int)n));
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void bfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;

	if (size && !buf)
		fuse_reply_err(req, ENOMEM);
	else
		reply_xattr(req,
			    bfs_xattr_get(fs_of(req), inode_of(req, ino), name, buf, size,
					  fuse_req_ctx(req)->pid),
			    buf, size);
}

static void bfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;

	if (size && !buf)
		fuse_reply_err(req, ENOMEM);
	else
		reply_xattr(req, bfs_xattr_list(fs_of(req), inode_of(req, ino), buf, size), buf,
			    size);
}

struct inval_job {
	struct bfs_work work;
	struct bfs_fs *fs;
	fuse_ino_t ino;
	off_t off, len;
};

static void inval_run(struct bfs_work *w)
{
	struct inval_job *j = (struct inval_job *)w;

	/* -ENOENT when the kernel has forgotten the inode meanwhile: nothing to drop */
	if (bfs_gate_enter(&j->fs->notify)) {
		(void)fuse_lowlevel_notify_inval_inode(j->fs->se, j->ino, j->off, j->len);
		bfs_gate_leave(&j->fs->notify);
	}
	free(j);
}

/*
 * dontneed: the kernel's pages of the range go too, so that the next read
 * reaches blockfs. Never from a FUSE thread: invalidating waits for every
 * page a READ holds locked, and a burst of dontneed hints would take every
 * FUSE thread, leaving none to answer those READs. A worker waits instead
 * (nothing a READ waits for is queued behind it: push.h); with none free,
 * the kernel keeps its pages and only blockfs's cache was dropped.
 */
static void queue_inval(struct bfs_fs *fs, fuse_ino_t ino, uint64_t off, uint64_t len)
{
	struct inval_job *j = malloc(sizeof(*j));

	if (!j)
		return;
	*j = (struct inval_job){ .work.fn = inval_run,
				 .fs = fs,
				 .ino = ino,
				 .off = (off_t)off,
				 .len = (off_t)len };
	if (!bfs_workq_try(fs->env.workq, &j->work))
		free(j);
}

static void bfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	struct bfs_fs *fs = fs_of(req);
	struct bfs_xattr_act act;
	int rc = bfs_xattr_set(fs, inode_of(req, ino), name, value, size, flags, &act);

	fuse_reply_err(req, bfs_kernel_errno(rc));
	if (rc < 0)
		return;
	if (act.kind == BFS_XATTR_DROP_PAGES && fs->se)
		queue_inval(fs, ino, act.off, act.len);
	if (act.kind == BFS_XATTR_WILLNEED) {
		(void)bfs_push_willneed(fs->env.workq, act.f,
					fs->opts->willneed_kernel && fs->se ? ino : 0, act.off,
					act.len);
		bfs_file_unuse(act.f); /* the queued jobs hold their own */
		bfs_file_put(act.f);
	}
}

static void bfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req,
		       bfs_kernel_errno(bfs_xattr_remove(fs_of(req), inode_of(req, ino), name)));
}

/*
 * Everything that would change the tree is refused with EROFS: blockfs
 * serves data read-only, without the VFS ro flag (which would refuse
 * setxattr hints too).
 */
static void refuse_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			   struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void refuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EROFS);
}

static void refuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fuse_reply_err(req, EROFS);
}

static void refuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void refuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void refuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			  const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	fuse_reply_err(req, EROFS);
}

static void refuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fuse_reply_err(req, EROFS);
}

static void refuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void refuse_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void refuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			     struct fuse_file_info *fi)
{
	(void)ino, (void)mode, (void)offset, (void)length, (void)fi;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops bfs_ops = {
	.init = bfs_op_init,
	.lookup = bfs_op_lookup,
	.forget = bfs_op_forget,
	.forget_multi = bfs_op_forget_multi,
	.getattr = bfs_op_getattr,
	.readlink = bfs_op_readlink,
	.open = bfs_op_open,
	.read = bfs_op_read,
	.lseek = bfs_op_lseek,
	.release = bfs_op_release,
	.opendir = bfs_op_opendir,
	.readdir = bfs_op_readdir,
	.readdirplus = bfs_op_readdirplus,
	.releasedir = bfs_op_releasedir,
	.statfs = bfs_op_statfs,
	.access = bfs_op_access,
	.getxattr = bfs_op_getxattr,
	.listxattr = bfs_op_listxattr,
	.setxattr = bfs_op_setxattr,
	.removexattr = bfs_op_removexattr,
	.setattr = refuse_setattr,
	.mknod = refuse_mknod,
	.mkdir = refuse_mkdir,
	.unlink = refuse_unlink,
	.rmdir = refuse_unlink,
	.symlink = refuse_symlink,
	.rename = refuse_rename,
	.link = refuse_link,
	.create = refuse_create,
	.write = refuse_write,
	.fallocate = refuse_fallocate,
};

// SPDX-License-Identifier: MIT
/*
 * Backing-file access (contract in backing.h): opening below SOURCE without
 * following a link out of it, reopening an O_PATH descriptor for reading,
 * telling which codec claims a file, and the inodes' descriptors: kept in
 * the bounded cache of fdcache.c, opened again by path when it closed one.
 * Knows inodes only as holders of a descriptor and a path; the table is
 * inode.c's, lookups lookup.c's and versions version.c's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/io.h"
#include "blockfs/log.h"
#include "fdcache.h"
#include "fs_i.h"

/* --- opening backing files ------------------------------------------------ */

/* A real descriptor for the object behind an O_PATH one. */
static int reopen_once(int opath_fd, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", opath_fd);
	return open(path, flags | O_CLOEXEC);
}

/*
 * Open @rpath below @root without following any symbolic link, so a link
 * in SOURCE can never lead blockfs itself outside SOURCE.
 */
int bfs_backing_open_beneath(int root, const char *rpath, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, root, rpath, &how, sizeof(how));
}

/* Out of descriptors? Then close every idle cached one: 1 to try again. */
static bool shed_on_emfile(struct bfs_fs *fs)
{
	if (errno != EMFILE && errno != ENFILE)
		return false;
	bfs_fdc_shed(&fs->fdc);
	return true;
}

int bfs_backing_openat(struct bfs_fs *fs, int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags | O_CLOEXEC);

	if (fd < 0 && shed_on_emfile(fs))
		fd = openat(dirfd, name, flags | O_CLOEXEC);
	return fd;
}

const struct bfs_codec *bfs_backing_sniff_fd(const struct bfs_codec_conf *conf, int fd)
{
	const struct bfs_codec *c = NULL;
	struct bfs_io io;
	struct stat st;

	if (fd < 0)
		return NULL; /* unreadable: shown unchanged, reads say why */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		bfs_io_init_fd(&io, fd, (uint64_t)st.st_size);
		c = bfs_codec_sniff(conf, &io);
	}
	close(fd);
	return c;
}

uint64_t bfs_backing_stamp(const struct stat *st)
{
	const uint64_t v[] = { (uint64_t)st->st_dev,	      (uint64_t)st->st_ino,
			       (uint64_t)st->st_size,	      (uint64_t)st->st_mtim.tv_sec,
			       (uint64_t)st->st_mtim.tv_nsec, (uint64_t)st->st_ctim.tv_sec,
			       (uint64_t)st->st_ctim.tv_nsec };
	uint64_t h = 0x243f6a8885a308d3ull;

	/* a 64-bit mix: two files' stamps collide by chance once in 2^64 */
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		h = (h ^ v[i]) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 31;
	}
	return h ? h : 1;
}

int bfs_backing_rdfd(struct bfs_fs *fs, struct bfs_inode *in, int fd, int flags)
{
	bool rd = bfs_fdc_is_rdonly(&fs->fdc, &in->fde, fd);

	if (rd && !(flags & ~O_NONBLOCK)) {
		int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);

		if (d >= 0 || !shed_on_emfile(fs))
			return d;
		return fcntl(fd, F_DUPFD_CLOEXEC, 0);
	}
	return bfs_backing_reopen(fs, fd, O_RDONLY | flags);
}

int bfs_backing_reopen(struct bfs_fs *fs, int opath, int flags)
{
	int fd = reopen_once(opath, flags);

	if (fd < 0 && shed_on_emfile(fs))
		fd = reopen_once(opath, flags);
	return fd;
}

/* --- descriptors ---------------------------------------------------------- */

static char *rpath_dup(struct bfs_fs *fs, struct bfs_inode *in)
{
	char *p;

	bfs_mutex_lock(bfs_ilock(fs, in));
	p = in->rpath ? strdup(in->rpath) : NULL;
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return p;
}

/* openat2 beneath SOURCE, shedding cached descriptors on EMFILE once. */
static int open_beneath(struct bfs_fs *fs, const char *path, int flags)
{
	int fd = bfs_backing_open_beneath(fs->root_fd, path, flags);

	if (fd < 0 && shed_on_emfile(fs))
		fd = bfs_backing_open_beneath(fs->root_fd, path, flags);
	return fd;
}

/*
 * A descriptor for what @path below SOURCE names now, if that is still
 * @in (its stat in *@st): open for reading when @in is a regular
 * file that can be read (the opens of a version then duplicate it), else
 * O_PATH. openat2, so that not even this follows a symbolic link out of
 * SOURCE. *@rd says which.
 * Return: the descriptor; -ESTALE when the path names another object or
 * nothing; other -errno from openat2 or fstat.
 */
static int open_path(struct bfs_fs *fs, struct bfs_inode *in, const char *path, struct stat *st,
		     bool *rd)
{
	int fd = -1, rc;

	*rd = in->type == S_IFREG;
	if (*rd)
		fd = open_beneath(fs, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && (!*rd || errno == EACCES || errno == EPERM)) {
		*rd = false; /* unreadable (a daemon not run by root): stat still works */
		fd = open_beneath(fs, path, O_PATH | O_NOFOLLOW);
	}
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? -ESTALE : -errno;
	rc = fstat(fd, st) < 0 ? -errno : 0;
	if (rc == 0 && (st->st_ino != in->ino || st->st_dev != in->dev))
		rc = -ESTALE;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* open_path() at @in's path; -ESTALE too when @in was never named. */
static int open_by_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st, bool *rd)
{
	char *path = rpath_dup(fs, in);
	int fd;

	if (!path)
		return -ESTALE; /* never named: nothing to find it by */
	fd = open_path(fs, in, path, st, rd);
	free(path);
	return fd;
}

int bfs_backing_reopen_name(void *ctx, const char *rpath)
{
	int fd = open_beneath(ctx, rpath, O_RDONLY | O_NOFOLLOW);

	return fd < 0 ? -errno : fd;
}

int bfs_backing_fd_revive(struct bfs_fs *fs, struct bfs_inode *in, const char *rpath, int err)
{
	struct stat st;
	bool rd;
	int fd, old, rc = err;

	if (!bfs_io_handle_dead(err) || in == &fs->root || !rpath)
		return err;
	old = bfs_fdc_rdonly_fd(&fs->fdc, &in->fde);
	if (old < 0)
		return err;
	fd = open_path(fs, in, rpath, &st, &rd);
	if (fd < 0)
		return fd == -ESTALE ? -ESTALE : err;
	if (rd && bfs_fdc_replace(&fs->fdc, &in->fde, old, fd) == 0)
		rc = 0;
	close(fd);
	if (rc == 0)
		bfs_info("%s: a read of its backing file failed (%s): opened again by path", rpath,
			 strerror(-err));
	return rc;
}

int bfs_backing_fd(struct bfs_fs *fs, struct bfs_inode *in)
{
	struct stat st;
	bool named;

	return bfs_backing_fd_named(fs, in, &st, &named);
}

int bfs_backing_fd_named(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st, bool *named)
{
	bool rd;
	int fd = bfs_backing_fd_cached(fs, in);

	*named = false;
	if (fd >= 0)
		return fd;
	fd = open_by_name(fs, in, st, &rd);
	if (fd < 0)
		return fd;
	*named = true;
	return bfs_fdc_adopt(&fs->fdc, &in->fde, fd, rd, true);
}

int bfs_backing_fd_cached(struct bfs_fs *fs, struct bfs_inode *in)
{
	if (in == &fs->root)
		return fs->root_fd;
	return bfs_fdc_get(&fs->fdc, &in->fde);
}

void bfs_backing_fd_put(struct bfs_fs *fs, struct bfs_inode *in)
{
	if (in == &fs->root)
		return;
	bfs_fdc_put(&fs->fdc, &in->fde);
}

void bfs_backing_fd_adopt(struct bfs_fs *fs, struct bfs_inode *in, int fd, bool rd, bool pin)
{
	(void)bfs_fdc_adopt(&fs->fdc, &in->fde, fd, rd, pin); /* a closed one is worth reviving */
}

void bfs_backing_fd_release(struct bfs_fs *fs, struct bfs_inode *in)
{
	bfs_fdc_release(&fs->fdc, &in->fde);
}

int bfs_backing_check_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	char *path;
	int rc;

	if (in == &fs->root)
		return 1;
	path = rpath_dup(fs, in);
	if (!path)
		return -ESTALE; /* never named: nothing to find it by */
	/*
	 * A stat, not an open: it may follow a link that replaced a directory
	 * of the path, but all it tells is whether that is still this very
	 * object; what is then read is opened beneath SOURCE (bfs_backing_fd()).
	 */
	rc = fstatat(fs->root_fd, path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	free(path);
	if (rc == -ENOENT || rc == -ENOTDIR ||
	    (rc == 0 && (st->st_ino != in->ino || st->st_dev != in->dev)))
		return -ESTALE;
	return rc < 0 ? 1 : 0;
}

/*
 * Is SOURCE on a filesystem of local storage or memory, where opening and
 * stat-ing a file wait for a disk at most, and RWF_NOWAIT tells whether a
 * read would? Elsewhere (NFS, CIFS, 9p, sshfs and other FUSE filesystems,
 * Ceph, ...) any access may wait for a network or another daemon, and the
 * FUSE loop hands every request over before it starts (loop.c), and
 * readpath=auto maps nothing (read.c: a server that goes away would turn
 * reads of a mapping into SIGBUS, each caught as EIO). Unknown
 * types count as remote: a wrong guess there costs a thread wakeup per
 * request, one the other way a mount that waits behind a stuck server.
 * Only SOURCE itself is asked: an NFS mount inside a local SOURCE is
 * taken as local, and there only a read the page cache cannot serve, or
 * any read where RWF_NOWAIT is refused, hands over (io.c); a LOOKUP or
 * OPEN of its files waits in the reader.
 */
bool bfs_backing_is_local(const char *source)
{
	static const unsigned long local[] = {
		0xEF53,	    /* ext2, ext3, ext4 */
		0x58465342, /* xfs */
		0x9123683E, /* btrfs */
		0xF2F52010, /* f2fs */
		0x2FC12FC1, /* zfs */
		0xCA451A4E, /* bcachefs */
		0x01021994, /* tmpfs */
		0x858458F6, /* ramfs */
		0x794C7630, /* overlayfs */
		0x73717368, /* squashfs */
		0xE0F5E1E2, /* erofs */
		0x4D44,	    /* vfat */
		0x2011BAB0, /* exfat */
		0x5346544E, /* ntfs3 */
		0x3153464A, /* jfs */
		0x52654973, /* reiserfs */
	};
	struct statfs sf;

	if (statfs(source, &sf) < 0)
		return true; /* main() has checked it; a failure here changes nothing */
	for (size_t i = 0; i < BFS_ARRAY_SIZE(local); i++)
		if ((unsigned long)sf.f_type == local[i])
			return true;
	bfs_info("SOURCE is on a filesystem of type 0x%lx, taken as remote: the FUSE "
		 "reader hands every request over before answering it; readpath=auto reads "
		 "with pread",
		 (unsigned long)sf.f_type);
	return false;
}

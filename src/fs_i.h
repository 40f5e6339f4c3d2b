/* SPDX-License-Identifier: MIT */
/*
 * Private to inode.c, xattr.c and ops.c: the mounted filesystem and its
 * inodes. An inode is one backing object shown one way (decoded by a
 * codec, or unchanged), known by its identity (device, inode number) and
 * the path below SOURCE it was last looked up at.
 *
 * Descriptors are bounded: an inode's O_PATH descriptor is an entry in a
 * least-recently-used cache of at most fs->max_fds, opened again by path
 * (and checked to be the same object) when it was closed; see
 * bfs_inode_fd(). File versions lease theirs (file.h).
 *
 * Lock order: fs->lock before inode->lock before fs->fd_lock. None is
 * held across a scan, a decode or a FUSE reply, except that inode->lock
 * is held while a new file version is built, so that concurrent first
 * opens scan once. bfs_inode_fd() takes inode->lock when it must reopen:
 * never call it with that lock held.
 */
#ifndef BLOCKFS_FS_I_H
#define BLOCKFS_FS_I_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "blockfs/file.h"
#include "blockfs/hints.h"
#include "blockfs/opts.h"

struct bfs_codec;
struct bfs_file;
struct fuse_session;

struct bfs_inode {
	struct bfs_inode *hnext;	/* hash chain; protected by fs->lock */
	uint64_t nlookup;		/* protected by fs->lock */
	dev_t dev;			/* key: backing identity ... */
	ino_t ino;
	const struct bfs_codec *codec;	/* ... and how it is shown (NULL: unchanged) */
	mode_t type;			/* S_IFMT bits of the backing object */
	int fd;				/* O_PATH or -1; protected by fs->fd_lock ... */
	unsigned int fd_pins;		/* ... as are the pins (users of fd) ... */
	struct bfs_inode *fd_prev, *fd_next;	/* ... and the LRU links while fd >= 0 */
	pthread_mutex_t lock;		/* protects file and rpath */
	struct bfs_file *file;		/* current version of a regular file, or NULL */
	char *rpath;			/* backing path below SOURCE, as last looked up */
};

struct bfs_fs {
	const struct bfs_opts *opts;
	struct bfs_file_env env;	/* the cache and the mount's counters */
	struct fuse_session *se;	/* for notifications; set once mounted */
	struct bfs_hints hints;		/* user.blockfs.advice/readpath by backing path */
	int root_fd;			/* O_PATH of SOURCE; the root inode's fd */
	struct bfs_inode root;
	pthread_mutex_t lock;		/* protects the table, count and every nlookup */
	struct bfs_inode **table;
	size_t nbuckets, count;
	pthread_mutex_t fd_lock;	/* protects the descriptor cache: */
	struct bfs_inode *fd_mru, *fd_lru;	/* inodes with an open fd, newest first */
	size_t nfds, max_fds;		/* open inode descriptors, and their bound */
};

/* A directory listing as shown: one snapshot per opendir. */
struct bfs_dirent {
	char *name;			/* shown name */
	char *backing;			/* backing name */
	const struct bfs_codec *codec;
	ino_t ino;
	unsigned char type;		/* DT_* */
};

struct bfs_dir {
	struct bfs_dirent *ent;
	size_t n;
};

int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts);
/* Start the read-ahead workers: after fuse_daemonize(), whose fork threads would not survive. */
int bfs_fs_start(struct bfs_fs *fs);
void bfs_fs_destroy(struct bfs_fs *fs);

/**
 * bfs_inode_lookup() - the inode shown as @name in @dir, with its attributes.
 * @out: gains one lookup reference (bfs_inode_forget() drops it).
 * Return: 0 or -errno (-ENOENT when nothing is shown as @name).
 */
int bfs_inode_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name,
		     struct bfs_inode **out, struct stat *st);
/* Like lookup, for an entry already resolved by a listing (readdirplus). */
int bfs_inode_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir,
			   const struct bfs_dirent *de, struct bfs_inode **out, struct stat *st);
void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *inode, uint64_t nlookup);

/**
 * bfs_inode_fd() - @inode's O_PATH descriptor, pinned until bfs_inode_fd_put().
 * Opens it again by path if the cache closed it.
 * Return: the descriptor, or -errno: -ESTALE when the path no longer names
 * the object (the VFS then looks the name up again), -ENOENT when it names
 * nothing. Context: never with @inode->lock held.
 */
int bfs_inode_fd(struct bfs_fs *fs, struct bfs_inode *inode);
void bfs_inode_fd_put(struct bfs_fs *fs, struct bfs_inode *inode);

/* Attributes as shown: the backing file's, with the decompressed size. */
int bfs_inode_stat(struct bfs_fs *fs, struct bfs_inode *inode, struct stat *st);
/* The same, with the size of version @f that an open handle reads. */
int bfs_inode_stat_version(struct bfs_fs *fs, struct bfs_inode *inode, const struct bfs_file *f,
			   struct stat *st);

/**
 * bfs_inode_open() - bfs_inode_file() for an open: first checks that the
 * path @inode was last found at still names it. A backing file replaced by
 * rename is a new object under the old name, while the kernel's cached
 * entry still points at the old inode.
 * @out: also holds a use of its descriptor (bfs_file_unuse() at release).
 * Return: as bfs_inode_file(), or -ESTALE, which makes the VFS walk the
 * path again with LOOKUP_REVAL, so that the open finds the new file.
 */
int bfs_inode_open(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file **out,
		   bool *changed);

/**
 * bfs_inode_file() - the current version of a regular file.
 * Rebuilds it when the backing file changed since it was built.
 * @out: one reference for the caller (bfs_file_put()).
 * @changed: set when an older version existed and was replaced.
 */
int bfs_inode_file(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file **out,
		   bool *changed);

/*
 * Take a use of @f's descriptor (@f: a version of @inode), opening the
 * backing file again if it was closed. -ESTALE if the file changed since
 * @f was built.
 */
int bfs_inode_use(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file *f);

/**
 * bfs_inode_reapply_hints() - a hint changed: file versions take it now.
 * @dir: NULL when the hint is @in's own (@in a regular file); else the
 *       directory's backing path, and every current version below it is
 *       given its effective hints again. Each version's value is computed
 *       and stored under its inode lock, so that of two concurrent changes
 *       the last computation (which sees both) wins. Regular files known
 *       now are pinned with a lookup reference under fs->lock, then visited
 *       without it: an inode lock may be held across a scan, and lookups
 *       must not wait for that.
 */
void bfs_inode_reapply_hints(struct bfs_fs *fs, struct bfs_inode *in, const char *dir);

int bfs_dir_open(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out);
void bfs_dir_free(struct bfs_dir *d);

#endif

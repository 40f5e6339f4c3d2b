/* SPDX-License-Identifier: MIT */
/*
 * Private to the mount's modules (fs.c, backing.c, inode.c, dir.c,
 * xattr.c, ops.c, main.c): the mounted filesystem and its
 * inodes. An inode is one backing object shown one way (decoded by a
 * codec, or unchanged), known by its identity (device, inode number) and
 * the path below SOURCE it was last looked up at.
 *
 * Descriptors are bounded: an inode's O_PATH descriptor is an entry in a
 * least-recently-used cache of at most fs->max_fds, opened again by path
 * (and checked to be the same object) when it was closed; see
 * bfs_inode_fd(). File versions lease theirs (file.h).
 *
 * Every lock of the daemon, in the order they may be taken: a thread
 * holding one takes only locks below it. None is held across a decode or a
 * FUSE reply; the exceptions for I/O are named.
 *
 *   fs->lock            the inode table, counts and every nlookup (inode.c)
 *   inode lock          bfs_ilock(): one of BFS_ILOCKS stripes, chosen by
 *                       the inode's address (a mutex per inode would be 40
 *                       bytes of every file the kernel remembers). Its
 *                       current version, rpath and memo; held while a new
 *                       version is built (scan, measure on the work queue,
 *                       hints applied), so that concurrent first opens scan
 *                       once. Never two at once (two inodes may share one).
 *                       bfs_inode_fd() takes it when it must reopen:
 *                       never call that with one held.
 *   fs->snap_lock       the cache of directory snapshots (dir.c); a
 *                       snapshot's entries are atomics, probed without it
 *   fs->fd_lock         the descriptor cache (backing.c)
 *   index settle_lock   settling claimed sizes; held across the backing
 *                       reads settling does (index.c), takes nothing else
 *   --- leaves: nothing is taken while one is held ---
 *   file fd_lock        a version's leased descriptor and its uses (file.c)
 *   hints lock          the hint store (hints.c)
 *   fs->handles_lock    the list of open handles (fs.c)
 *   fs->idle_lock       the ring of idle inodes (inode.c)
 *   stream lock         a reader's window (stream.c)
 *   cache shard lock    one shard; never two at once (cache.c)
 *   maps lock           the live mappings; held across mmap/munmap (mmap.c)
 *   work queue lock     its FIFO (workq.c); a parallel for's own lock
 *   xattr memo lock     the size-query memo (xattr.c)
 */
#ifndef BLOCKFS_FS_I_H
#define BLOCKFS_FS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "blockfs/file.h"
#include "blockfs/gate.h"
#include "blockfs/hints.h"
#include "blockfs/opts.h"

struct bfs_codec;
struct bfs_file;
struct bfs_name_ops;
struct bfs_stream;
struct fuse_session;

/*
 * What the daemon keeps for every inode the kernel remembers: 112 bytes,
 * plus its rpath and a share of the table (README: memory per file). A
 * regular file's version (its block index, counters, descriptor) is kept
 * only while it is read or dear to build; what stat needs, the shown
 * size, is remembered in @memo under the backing file's change stamp.
 */
struct bfs_inode {
	struct bfs_inode *hnext;	/* hash chain; protected by fs->lock */
	uint64_t nlookup;		/* protected by fs->lock */
	dev_t dev;			/* key: backing identity ... */
	ino_t ino;
	const struct bfs_codec *codec;	/* ... and how it is shown (NULL: unchanged) */
	struct bfs_inode *fd_prev, *fd_next;	/* protected by fs->fd_lock: LRU links while fd >= 0 */
	/* protected by the inode lock (bfs_ilock()): */
	struct bfs_file *file;		/* current version of a regular file, or NULL */
	char *rpath;			/* backing path below SOURCE, as last looked up */
	uint64_t stamp;			/* bfs_backing_stamp() @memo was found under; 0: none */
	uint64_t memo;			/* decoded: its size; raw: 1 if a codec claims its bytes */
	struct bfs_handle *kh;		/* -o kernel_open: the handle its READs share, or NULL */
	int fd;				/* O_PATH (O_RDONLY: fd_rdonly) or -1; protected by fs->fd_lock ... */
	unsigned int fd_pins;		/* ... as are the pins (users of fd) ... */
	uint16_t type;			/* S_IFMT bits of the backing object */
	bool fd_rdonly;			/* ... and this: fd is open for reading (regular files) */
	bool idle;			/* in fs->idle, holding a lookup; protected by fs->idle_lock */
	bool kstale;			/* kernel_open: the kernel holds the size of other bytes
					   than the file's now, until a stat tells it (fs.c);
					   protected by the inode lock */
};


/*
 * What the kernel has open (a file handle, a directory), listed on the
 * mount under fs->handles_lock, so that what the kernel never releases (a
 * lazy unmount, SIGTERM with files open) is freed at the end instead of
 * leaking. The first member of what it lists (fs.c checks).
 */
struct bfs_open {
	struct bfs_open *prev, *next;
};

/*
 * An open file handle (fi->fh): a reader's stream of the version it reads,
 * and a use of that version's descriptor; listed (struct bfs_open). A
 * deferred handle (an open of an unchanged file whose version was
 * dropped: the kernel keeps its pages) builds its stream when a request
 * first needs one, from the backing file the open saw or not at all.
 */
struct bfs_handle {
	struct bfs_open open;		/* protected by fs->handles_lock */
	pthread_mutex_t lock;		/* serializes building @s */
	_Atomic(struct bfs_stream *) s;	/* holds the version; NULL while deferred; set once */
	struct bfs_inode *in;		/* deferred: the file (the kernel holds it while open) */
	uint64_t ino;			/* deferred: its node id */
	uint64_t stamp;			/* deferred: bfs_backing_stamp() the open saw */
	atomic_bool hot;		/* kernel_open: read since the ring's hand last passed */
};

/*
 * -o kernel_open: the kernel opens files without asking, so READs come
 * with no handle. The handles they share, one per file, are kept for the
 * last this many files read, evicted by a clock that spares those read
 * since its hand last passed (fs.c).
 */
#define BFS_KOPEN_KEEP 64

#define BFS_ILOCKS 512		/* inode lock stripes */
/*
 * Versions nobody reads are kept for the last this many inodes whose
 * versions went idle (a stat built one, a handle was released), with
 * their counters and index; older ones are dropped if cheap to build
 * again (inode.c), their size kept in the inode's memo.
 */
#define BFS_IDLE_KEEP 1024
#define BFS_SNAP_BUCKETS 256	/* chains of the snapshot cache */

struct bfs_snap;
struct bfs_snap_ctx;

/* The hook that pushes decoded pages to the kernel (file.h, env->push). */
typedef int (*bfs_push_fn)(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len);

/*
 * A walk of a backing file under way (inode.c), so that user.blockfs.walk
 * can say how far it is while the inode's lock is held for it. As many
 * are shown at once as there are slots; more walk unseen.
 */
#define BFS_WALKS_SHOWN 16

struct bfs_walking {
	const struct bfs_inode *in;	/* NULL: a free slot; protected by fs->walks_lock */
	uint64_t total;			/* the backing file's size */
	atomic_uint_fast64_t done;	/* bytes of it the walk has read */
};


/* Directories recently looked in, oldest forgotten first past -o max_inodes (trim.c). */
#define BFS_TRIM_RING 1024

struct bfs_trim {
	bool running;			/* set before the session runs, cleared after */
	pthread_t thread;
	pthread_mutex_t lock;		/* a leaf: the ring and the flags below */
	pthread_cond_t cond;
	bool want, stop;
	atomic_uint_fast64_t lookups;	/* counted to look at the table's size now and then */
	struct {
		dev_t dev;
		ino_t ino;
	} ring[BFS_TRIM_RING];
	size_t next, n;			/* the slot the next one takes; how many are there */
};

struct bfs_fs {
	const struct bfs_opts *opts;
	struct bfs_file_env env;	/* the cache and the mount's counters */
	struct fuse_session *se;	/* for notifications; set once mounted */
	struct bfs_hints hints;		/* user.blockfs.advice/readpath by backing path */
	struct bfs_trim trim;		/* -o max_inodes (trim.c) */
	int root_fd;			/* O_PATH of SOURCE; the root inode's fd */
	struct bfs_inode root;
	pthread_mutex_t lock;		/* protects the table, count and every nlookup */
	struct bfs_inode **table;
	size_t nbuckets, count;
	pthread_mutex_t fd_lock;	/* protects the descriptor cache: */
	struct bfs_inode *fd_mru, *fd_lru;	/* inodes with an open fd, newest first */
	size_t nfds, max_fds;		/* open inode descriptors, and their bound */
	pthread_mutex_t handles_lock;	/* a leaf: protects the lists of what is open: */
	struct bfs_open *handles, *dirs;	/* struct bfs_handle, struct bfs_dir */
	pthread_mutex_t snap_lock;	/* protects the snapshot cache: */
	struct bfs_snap **snaps;	/* BFS_SNAP_BUCKETS chains by directory identity */
	struct bfs_snap *snap_mru, *snap_lru;	/* every cached snapshot, newest first */
	size_t snap_bytes;		/* their size, bounded by BFS_SNAP_BUDGET */
	atomic_uint snap_ahead;		/* snapshots read ahead, not asked for yet (dir.c) */
	pthread_mutex_t ilocks[BFS_ILOCKS];	/* the inode locks */
	pthread_mutex_t idle_lock;	/* a leaf: protects the ring of idle inodes */
	struct bfs_inode *idle[BFS_IDLE_KEEP];	/* the last inodes whose versions went idle */
	size_t idle_next;		/* the slot the next one takes */
	/* readdirplus=auto (ops.c): files listed lately, and looked up or opened */
	atomic_uint rdp_listed, rdp_used;
	atomic_bool kernel_open;	/* set at INIT: -o kernel_open, and the kernel can */
	pthread_mutex_t kopen_lock;	/* protects the ring of shared handles: */
	struct {
		struct bfs_inode *in;	/* holding a lookup */
		struct bfs_handle *h;	/* owned; in->kh while it is the file's */
	} kopen[BFS_KOPEN_KEEP];
	size_t kopen_hand;		/* the clock's hand: the slot it looks at next */
	/*
	 * Notifications that may wait for the kernel's locks (a push for
	 * pages a READ holds locked, invalidating a range likewise,
	 * forgetting a directory for the lock a LOOKUP holds) are made off
	 * the FUSE threads, inside this gate: they end only while READs are
	 * answered. main.c shuts it before the session stops answering (on
	 * a signal) or is destroyed.
	 */
	struct bfs_gate notify;
	pthread_mutex_t walks_lock;	/* a leaf: the walks under way, for user.blockfs.walk */
	struct bfs_walking walks[BFS_WALKS_SHOWN];
};

/* The lock of inode @in's version, rpath and memo: a stripe shared with others. */
static inline pthread_mutex_t *bfs_ilock(struct bfs_fs *fs, const struct bfs_inode *in)
{
	uintptr_t h = (uintptr_t)in / 8;

	return &fs->ilocks[(h ^ h >> 9 ^ h >> 18) & (BFS_ILOCKS - 1)];
}

/* A directory listing as shown: one snapshot per opendir. */
struct bfs_dirent {
	const char *name;		/* shown name: @backing, or a copy in the listing's */
	const char *backing;		/* backing name, in the listing's snapshot */
	const struct bfs_codec *codec;
	ino_t ino;
	unsigned char type;		/* DT_* */
};

/*
 * A listing as shown, made from a snapshot as readdir reaches it, so that
 * readdirplus looks each entry up right after probing it, on the
 * descriptor the probe opened (bfs_dir_at()).
 */
struct bfs_dir {
	struct bfs_open open;		/* listed by bfs_handle_opendir() */
	struct bfs_dirent *ent;		/* the entries shown so far */
	size_t n, cap;
	struct bfs_dir_names *names;	/* copies of the shown names that differ (dir.c) */
	struct bfs_snap *snap;		/* what it is made from; one reference */
	size_t next;			/* snapshot entries gone through */
	/*
	 * readdirplus=auto (ops.c): files the last reply gave with their
	 * attributes, not yet counted as used. The kernel serialises a
	 * handle's READDIRs; atomic as their threads differ.
	 */
	atomic_uint rdp_pending;
};

/*
 * A backing directory's entries as read, with the decoded sizes
 * lookups found: kept while the directory's
 * mtime and ctime stay as they were, in a cache of at most
 * BFS_SNAP_BUDGET bytes, so that lookups and listings after a timeout do
 * not read the directory again (dir.c).
 */
#define BFS_SNAP_BUDGET (8u << 20)

/* --- fs.c: the mount -------------------------------------------------------- */

/**
 * bfs_fs_init() - everything the mount shares, from SOURCE and @opts.
 * @se, @push: the session notifications go to, and the hook that pushes
 *             pages (NULL for no session: tools and tests).
 * Return: 0 or -errno (SOURCE cannot be opened; memory).
 */
BFS_MUST_CHECK int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts,
			       struct fuse_session *se, bfs_push_fn push);
/* Start the workers: after fuse_daemonize(), whose fork threads would not survive. */
BFS_MUST_CHECK int bfs_fs_start(struct bfs_fs *fs);
/* Close what is left open, stop the workers, free it all. After the session ends. */
void bfs_fs_destroy(struct bfs_fs *fs);

/* A handle reading version @f (taking its own reference) shown as FUSE inode @ino. */
BFS_MUST_CHECK int bfs_handle_open(struct bfs_fs *fs, struct bfs_file *f, uint64_t ino,
				   struct bfs_handle **out);
/*
 * bfs_handle_open_deferred() - a handle of @in (node id @ino) with no
 * version yet, for an open that bfs_inode_open() deferred under @stamp.
 */
BFS_MUST_CHECK int bfs_handle_open_deferred(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
					    uint64_t stamp, struct bfs_handle **out);
/*
 * bfs_handle_stream() - @h's stream, built now if it was deferred. NULL
 * with *@err set when it cannot be: -EIO if the backing file is no longer
 * the one the open saw (the kernel's pages and size are that one's).
 */
struct bfs_stream *bfs_handle_stream(struct bfs_fs *fs, struct bfs_handle *h, int *err);
/* @h's version if it has one yet, else NULL (a reference is not taken). */
struct bfs_file *bfs_handle_file(struct bfs_handle *h);
/* Release it: its use of the version's descriptor, its stream. */
void bfs_handle_close(struct bfs_fs *fs, struct bfs_handle *h);
/* bfs_dir_open() and bfs_dir_free(), the directory listed while open. */
BFS_MUST_CHECK int bfs_handle_opendir(struct bfs_fs *fs, struct bfs_inode *dir,
				      struct bfs_dir **out);
void bfs_handle_closedir(struct bfs_fs *fs, struct bfs_dir *d);
/**
 * bfs_kopen_stream() - -o kernel_open: the stream READs of @in (node id
 * @ino) share, taken (bfs_stream_take()): built at the first READ.
 * Return: the stream, or NULL with *@err set: -ESTALE if the backing file
 * is no longer the one whose size the kernel was last told (the caller
 * has the kernel ask again), else as bfs_inode_open().
 */
struct bfs_stream *bfs_kopen_stream(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
				    int *err);

/* --- trim.c: the inode table within -o max_inodes ------------------------------ */

/* Start the thread that keeps the table within max_inodes (none when 0). */
BFS_MUST_CHECK int bfs_trim_start(struct bfs_fs *fs);
/* Stop it: before the table is freed. */
void bfs_trim_stop(struct bfs_fs *fs);
/* A LOOKUP or a listing in directory @dir: the newest in the ring now. */
void bfs_trim_note(struct bfs_fs *fs, struct bfs_inode *dir);
/* After a LOOKUP added to the table: wake the thread if it is over the bound. */
void bfs_trim_poke(struct bfs_fs *fs);

/*
 * The inode of directory (@st->st_dev, @st->st_ino) if the kernel holds
 * it, with a copy of its rpath in *@rpath (unless NULL; the caller frees
 * it); NULL when there is none. The pointer is a node id to hand back to
 * the kernel, not to be dereferenced: the inode may be forgotten at once.
 */
struct bfs_inode *bfs_inode_dir_rpath(struct bfs_fs *fs, const struct stat *st, char **rpath);
/* Inodes in the table now. */
size_t bfs_inode_count(struct bfs_fs *fs);

/* --- backing.c: backing-file access ------------------------------------------ */

/* openat(2) below @dirfd, trying once more after shedding cached descriptors. */
BFS_MUST_CHECK int bfs_backing_openat(struct bfs_fs *fs, int dirfd, const char *name, int flags);
/* Open @rpath below @root without following any link, so none leads out of SOURCE. */
BFS_MUST_CHECK int bfs_backing_open_beneath(int root, const char *rpath, int flags);
/* A real descriptor for the object behind O_PATH @opath, shedding on EMFILE once. */
BFS_MUST_CHECK int bfs_backing_reopen(struct bfs_fs *fs, int opath, int flags);
/*
 * bfs_file_env's reopen: @rpath below SOURCE (@ctx, the struct bfs_fs)
 * opened for reading beneath it, not following a link. Return: the
 * descriptor or -errno; whether it is still the same file is the
 * caller's to check.
 */
BFS_MUST_CHECK int bfs_backing_reopen_name(void *ctx, const char *rpath);
/*
 * A backing file's change stamp: a hash of its identity, size, mtime and
 * ctime, never 0. What is remembered about a file holds while it is equal.
 */
uint64_t bfs_backing_stamp(const struct stat *st);
/*
 * A descriptor open for reading on @in, whose pinned descriptor is @fd: a
 * duplicate when that is open for reading already, else reopened (flags
 * O_RDONLY plus @flags). -1 with errno on failure.
 */
BFS_MUST_CHECK int bfs_inode_rdfd(struct bfs_fs *fs, struct bfs_inode *in, int fd, int flags);
/* The codec offered under @conf that claims the file open as @fd (consumed), or NULL. */
const struct bfs_codec *bfs_backing_sniff_fd(const struct bfs_codec_conf *conf, int fd);
/* Is @source on local storage or memory (else: a network, another daemon)? */
bool bfs_backing_is_local(const char *source);
/* How many inode descriptors to keep open: a quarter of RLIMIT_NOFILE. */
size_t bfs_backing_fd_budget(void);
/*
 * Give @in descriptor @fd (consumed unless kept; O_PATH, or open for
 * reading if @rd), pinned if @pin; trims the cache.
 */
void bfs_inode_fd_adopt(struct bfs_fs *fs, struct bfs_inode *in, int fd, bool rd, bool pin);
/*
 * A read through @in's cached descriptor, open for reading and pinned by
 * the caller, failed with @err: when that is EIO, ENOTCONN or ESTALE (a
 * network filesystem's handle gone dead, the file itself alive), put a
 * descriptor opened anew by @rpath (@in's, which the caller holds under
 * @in's lock or a copy) in its place, if @rpath still names @in (same
 * device and inode). The number stays: holders of it read the new one.
 * Return: 0 when replaced; else @err, or -ESTALE when @rpath names
 * another object now.
 */
BFS_MUST_CHECK int bfs_inode_fd_revive(struct bfs_fs *fs, struct bfs_inode *in, const char *rpath,
				       int err);
/* @in is going: close its cached descriptor. */
void bfs_inode_fd_release(struct bfs_fs *fs, struct bfs_inode *in);
/*
 * Does the path @in was last found at still name it? 0 and *@st when it
 * does (its stat, which open then needs anyway), 1 when that cannot be
 * told (the root; an error other than a mismatch), -ESTALE when another
 * object or nothing is there now. One fstatat(2), no open: the cached
 * descriptor, or one opened beneath SOURCE, is what is read.
 */
BFS_MUST_CHECK int bfs_inode_check_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st);

/* --- inode.c: the table, lookups, versions ----------------------------------- */


/*
 * How far the walk of @in is, as "walking 1.2 GiB of 4.0 GiB" in @buf
 * (@len bytes): its length, or 0 when no walk of @in is under way.
 */
int bfs_inode_walking(struct bfs_fs *fs, const struct bfs_inode *in, char *buf, size_t len);

/* Free every inode and the table (the mount is ending: nobody looks up). */
void bfs_inode_table_free(struct bfs_fs *fs);

/**
 * bfs_inode_lookup() - the inode shown as @name in @dir, with its attributes.
 * @out: gains one lookup reference (bfs_inode_forget() drops it).
 * Return: 0 or -errno (-ENOENT when nothing is shown as @name).
 */
BFS_MUST_CHECK int bfs_inode_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name,
		     struct bfs_inode **out, struct stat *st);
/*
 * Like lookup, for entry @de of a listing, already resolved (readdirplus);
 * @c: the context it was made in, with the directory's descriptor.
 */
BFS_MUST_CHECK int bfs_inode_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir,
					  struct bfs_snap_ctx *c, const struct bfs_dirent *de,
					  struct bfs_inode **out, struct stat *st);
void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *inode, uint64_t nlookup);
/* One more lookup of @inode, which its caller already holds one of, for a ring that keeps it. */
void bfs_inode_hold(struct bfs_fs *fs, struct bfs_inode *inode);

/**
 * bfs_inode_fd() - @inode's O_PATH descriptor, pinned until bfs_inode_fd_put().
 * Opens it again by path if the cache closed it.
 * Return: the descriptor, or -errno: -ESTALE when the path no longer names
 * the object (the VFS then looks the name up again), -ENOENT when it names
 * nothing. Context: never with @inode->lock held.
 */
BFS_MUST_CHECK int bfs_inode_fd(struct bfs_fs *fs, struct bfs_inode *inode);
/*
 * The same; *@named says whether it was opened by path just now, and then
 * *@st is its stat: that open checked the name as bfs_inode_check_name()
 * does.
 */
BFS_MUST_CHECK int bfs_inode_fd_named(struct bfs_fs *fs, struct bfs_inode *inode, struct stat *st,
				      bool *named);
void bfs_inode_fd_put(struct bfs_fs *fs, struct bfs_inode *inode);
/* @inode's descriptor pinned (bfs_inode_fd_put()) if it is open now, else -1: never opens. */
int bfs_inode_fd_cached(struct bfs_fs *fs, struct bfs_inode *inode);

/* Attributes as shown: the backing file's, with the decompressed size. */
BFS_MUST_CHECK int bfs_inode_stat(struct bfs_fs *fs, struct bfs_inode *inode, struct stat *st);
/* The same, with the size of version @f that an open handle reads. */
BFS_MUST_CHECK int bfs_inode_stat_version(struct bfs_fs *fs, struct bfs_inode *inode, const struct bfs_file *f,
			   struct stat *st);

/**
 * bfs_inode_open() - bfs_inode_file() for an open: first checks that the
 * path @inode was last found at still names it. A backing file replaced by
 * rename is a new object under the old name, while the kernel's cached
 * entry still points at the old inode.
 * @out: also holds a use of its descriptor (bfs_file_unuse() at release).
 * @defer: NULL, or where to say that the open may go without a version:
 * a decoded file whose backing file, stat'ed now by path, is the one its
 * memo was found under, and whose version was dropped (bfs_inode_idle()).
 * The kernel's pages of it are good then (keep_cache), and a read that
 * misses them builds the version later (bfs_handle_stream()).
 * Return: as bfs_inode_file(); 1 with the backing stamp in *@defer and no
 * version; or -ESTALE, which makes the VFS walk the path again with
 * LOOKUP_REVAL, so that the open finds the new file.
 */
BFS_MUST_CHECK int bfs_inode_open(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file **out,
		   bool *changed, uint64_t *defer);

/**
 * bfs_inode_file() - the current version of a regular file.
 * Rebuilds it when the backing file changed since it was built.
 * @out: one reference for the caller (bfs_file_put()).
 * @changed: set when an older version existed and was replaced.
 */
BFS_MUST_CHECK int bfs_inode_file(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file **out,
		   bool *changed);

/*
 * A handle of @inode was released: its version may be idle now; kept for
 * a while, then dropped if cheap to build again (the memo keeps its size).
 * Context: no inode lock held.
 */
void bfs_inode_idle(struct bfs_fs *fs, struct bfs_inode *inode);

/*
 * Take a use of @f's descriptor (@f: a version of @inode), opening the
 * backing file again if it was closed. -ESTALE if the file changed since
 * @f was built.
 */
BFS_MUST_CHECK int bfs_inode_use(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file *f);

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

/* --- dir.c: listings and snapshots ------------------------------------------ */

/*
 * The st_ino a view of backing inode @ino shows: the raw view its own, the
 * decoded one (@codec) another, stable one (stat and readdir agree).
 */
ino_t bfs_inode_shown_ino(ino_t ino, const struct bfs_codec *codec);

BFS_MUST_CHECK int bfs_dir_open(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out);
void bfs_dir_free(struct bfs_dir *d);

/**
 * bfs_snap_get() - the snapshot of the directory open as @dirfd.
 * The cached one if the directory's mtime and ctime are as it was read
 * under (one fstat), else read anew and cached unless it is too large or
 * the directory changed just before (racy).
 * @out: one reference (bfs_snap_put()).
 * Return: 0 or -errno. Context: takes fs->snap_lock, not across the read.
 */
BFS_MUST_CHECK int bfs_snap_get(struct bfs_fs *fs, int dirfd, struct bfs_snap **out);
/* One more reference to @s, for bfs_snap_put(). */
struct bfs_snap *bfs_snap_hold(struct bfs_snap *s);
void bfs_snap_put(struct bfs_snap *s);
/* Drop every cached snapshot (the mount ends). */
void bfs_snap_cache_free(struct bfs_fs *fs);

/* The name rules' questions (names.h) answered from a snapshot: names and types only. */
struct bfs_snap_ctx {
	struct bfs_fs *fs;
	int dirfd;			/* the directory, for lookups */
	struct bfs_snap *snap;
};

/**
 * bfs_dir_at() - entry @i of listing @d, made as far as needed.
 * @c: the snapshot context of @d->snap.
 * Return: 0 and *@out, 1 past the last entry, or -errno.
 */
BFS_MUST_CHECK int bfs_dir_at(struct bfs_dir *d, struct bfs_snap_ctx *c, size_t i,
			      const struct bfs_dirent **out);
extern const struct bfs_name_ops bfs_snap_name_ops;

/*
 * Entry @name of @c's snapshot, a directory, was looked up: queue reads of
 * the snapshots of the next few directories of the listing on the
 * workers (a walk lists them next). Never waits; a hint.
 */
void bfs_snap_ahead(struct bfs_snap_ctx *c, const char *name);

/* --- walkahead.c: walks side by side for a listing with attributes ------------ */

#define BFS_WALK_AHEAD_MAX 64	/* entries of one reply looked at */
struct bfs_walk_ahead;

/**
 * bfs_walk_ahead() - look up, on -o workers threads at once, the decoded
 * files among entries [@from, @from + @count) of listing @d whose lookup
 * will walk a big backing file, so that the reply's lookups, made in
 * order, find them sized. Return: what to let go with
 * bfs_walk_ahead_done() once the reply is made (it holds a lookup of
 * each), or NULL when there was nothing worth it.
 */
struct bfs_walk_ahead *bfs_walk_ahead(struct bfs_fs *fs, struct bfs_inode *dir,
				      struct bfs_dir *d, struct bfs_snap_ctx *c, size_t from,
				      size_t count);
void bfs_walk_ahead_done(struct bfs_fs *fs, struct bfs_walk_ahead *w);

/*
 * With the index cache on, keep what @s learned as its directory's memo
 * (index_cache.h), if it learned anything since it was read or last kept
 * and is cached (a racy snapshot is neither). Context: writes one file.
 */
void bfs_snap_save(struct bfs_fs *fs, struct bfs_snap *s);

/* Entry @name of @c's snapshot has decoded size @size under backing stamp @stamp. */
void bfs_snap_note_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp,
			uint64_t size);

/* The decoded size of entry @name under stamp @stamp, if known: true and *@size. */
BFS_MUST_CHECK bool bfs_snap_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp,
				  uint64_t *size);

/*
 * Is entry @name of @c's snapshot a regular file (as the directory listed
 * it) of no known decoded size? Then true, and *@dev, *@ino: its identity
 * as listed (the directory's device).
 */
BFS_MUST_CHECK bool bfs_snap_new_file(struct bfs_snap_ctx *c, const char *name, dev_t *dev,
				      ino_t *ino);

#endif

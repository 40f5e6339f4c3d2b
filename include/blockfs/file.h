/* SPDX-License-Identifier: MIT */
/*
 * One version of one backing file, as readers see it: its descriptor, its
 * codec and block index, and the identity (inode, size, times) it was
 * built from. A version never changes once built; when the backing file
 * changes, a new version replaces it and the old one lives until its last
 * reader lets go. Knows nothing of FUSE.
 *
 * The descriptor is leased, not owned for life: a version that nobody
 * reads (one that only answers stat(2) for its size) keeps its index but
 * closes its descriptor, so that a mount of any number of files fits in
 * the descriptor limit. Whoever may read the backing file holds a *use*
 * (bfs_file_use(), bfs_file_use_fd(), bfs_file_unuse()); the last use
 * closes the descriptor, and the next one opens it again.
 *
 * file.c builds versions and holds their descriptor and mapping; read.c
 * is the read path through one (bfs_file_readv() and its kin), decode.c
 * and unit.c below it.
 */
#ifndef BLOCKFS_FILE_H
#define BLOCKFS_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "blockfs/codec.h"
#include "blockfs/common.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/mmap.h"

struct bfs_codec;
struct bfs_cache;
struct bfs_block;
struct bfs_counters;

struct bfs_maps;
struct bfs_workq;
struct bfs_icache;
struct bfs_stash;

/* A backing file this small is read whole to be indexed: one read. */
#define BFS_WHOLE_MAX (128u << 10)
/*
 * ... and one this small is kept with its version (at most BFS_IDLE_KEEP
 * idle ones): reads need no descriptor.
 */
#define BFS_HEAD_KEEP (16u << 10)

/* What every file version of one mount shares. */
struct bfs_file_env {
	struct bfs_cache *cache;    /* decoded blocks */
	struct bfs_workq *workq;    /* workers: measuring, helping READs, willneed, populating */
	struct bfs_workq *aheadq;   /* nice 19 workers decoding ahead of readers; or NULL */
	struct bfs_maps *maps;	    /* live mappings (readpath mmap or auto), or NULL */
	int readpath;		    /* enum bfs_readpath for files without a hint */
	bool remote;		    /* SOURCE is on a network filesystem: auto maps nothing */
	struct bfs_counters *mount; /* the mount's counters */
	uint64_t readahead;	    /* bytes to keep decoded ahead of a sequential reader */
	int advice;		    /* enum bfs_advice for files without a hint */
	bool verify;		    /* check block checksums */
	uint64_t kernel_readahead;  /* the kernel's own read-ahead into the mount, bytes */
	struct bfs_icache *icache;  /* -o index_cache: kept indexes (index_cache.h), or NULL */
	/*
	 * The codecs this mount offers and their settings (codec.h): each
	 * version's index is given them. All zero (tools, tests): plain gzip
	 * off, as BFS_CODEC_CONF_DEFAULT.
	 */
	struct bfs_codec_conf codecs;
	/*
	 * Hand @len decoded bytes at @off of the file shown as FUSE inode
	 * @ino to the kernel's page cache (fuse_lowlevel_notify_store), one
	 * buffer per call; or NULL: set by ops.c once mounted (push.h).
	 * Return: 0 or -errno.
	 */
	int (*push)(void *ctx, uint64_t ino, uint64_t off, const void *buf, size_t len);
	void *push_ctx;
	/*
	 * Open the backing file at @name (a version's name: its path below
	 * SOURCE) anew for reading; or NULL (tools, tests): set by fs.c. A
	 * backing read that fails with EIO, ENOTCONN or ESTALE tries it once,
	 * since a network filesystem's handle can die while its file lives
	 * on (sshfs's handles of a connection that is gone). Return: an
	 * O_RDONLY descriptor, or -errno.
	 */
	int (*reopen)(void *ctx, const char *name);
	void *reopen_ctx;
};

/*
 * Where work ahead of a program goes (decoding ahead of a reader, reading
 * directories ahead of a walk): the nice 19 workers, if the mount has them.
 */
static inline struct bfs_workq *bfs_ahead_q(const struct bfs_file_env *env)
{
	return env->aheadq ? env->aheadq : env->workq;
}

struct bfs_file {
	atomic_uint refs;
	atomic_uint readers;	       /* streams reading it (bfs_stream_new()): its open handles */
	uint64_t id;		       /* unique per version: a cache key */
	int fd;			       /* O_RDONLY backing descriptor, or -1 while closed */
	struct bfs_io io;	       /* reads it; fd and io.fd stay put while uses > 0 */
	pthread_mutex_t fd_lock;       /* protects fd, io.fd and uses */
	unsigned int uses;	       /* holders that may read the backing file */
	const struct bfs_codec *codec; /* NULL: served unchanged */
	/*
	 * Shown under a decoded name, but its bytes are not the format its
	 * suffix names (bfs_codec_settle()): @named, that codec, and @found,
	 * what the bytes are. Reads fail with EIO; codec is NULL. Else both
	 * NULL.
	 */
	const struct bfs_codec *named;
	const char *found;
	struct bfs_index idx; /* empty when codec is NULL */
	struct stat st;	      /* the backing file when this version was built */
	const struct bfs_file_env *env;
	struct bfs_counters *ctr; /* this version's counters (their parent: the mount's) */
	atomic_int advice;	  /* effective enum bfs_advice; set by the hint layer */
	atomic_bool streaming;	  /* a reader streams through it (stream.c): readpath=auto */
	atomic_bool superseded;	  /* a newer version is shown: push nothing more */
	atomic_uint pushing;	  /* pushes of its bytes into the kernel in progress */
	atomic_int readpath;	  /* effective enum bfs_readpath; set by the hint layer */
	struct bfs_map map;	  /* the backing file's mapping (mmap.c), when used */
	atomic_size_t last_bad;	  /* last block logged as bad: one line per block */
	/* a bit per block a random reader read, after a word with the count of words (read.c) */
	_Atomic(atomic_uint_fast64_t *) touched;
	/* random reads that came to blocks untouched before, and back to touched ones (read.c) */
	atomic_uint rand_new, rand_back;
	uint8_t *head; /* a very small file's backing bytes, read once, or NULL */
	char *name;    /* for log lines */
	/*
	 * Chained blocks (BFS_BLK_CHAIN): one decode step at a time, and
	 * the spans a step passed while another reader was filling them.
	 */
	pthread_mutex_t chain_lock; /* taken before a cache shard's; held across a step */
	struct bfs_stash *stash;    /* protected by chain_lock; NULL when empty */
	/*
	 * Single blocks that cost much to decode again, spilled whole at a
	 * random reader's first touch (unit.c, spill.h bfs_spill_put()).
	 */
	pthread_mutex_t unit_lock; /* only the spill's own lock is taken under it */
	pthread_cond_t unit_cond;  /* a unit's spilling ended; with unit_lock */
	struct bfs_unit *units;	   /* unit_n entries, or NULL; protected by unit_lock */
	size_t unit_n;		   /* protected by unit_lock */
	unsigned int unit_users;   /* reads of their spills in flight; protected by unit_lock */
};

/*
 * -EIO, logged once per version, when @f is misnamed (its bytes are not
 * the format its suffix names: @f->found); else 0.
 */
int bfs_file_misnamed(struct bfs_file *f);

/**
 * bfs_file_open() - build a version from an open backing descriptor.
 * @fd:     O_RDONLY descriptor; owned by the version on success, which
 *          starts with one use of it (bfs_file_unuse() to let it go).
 * @st:     @fd's stat, if the caller took it just now; NULL: taken here.
 * @side:   sidecar index descriptor (BGZF .gzi) or -1; only read here.
 * @codec:  how to decode it, or NULL for a file shown unchanged.
 * @name:   what log lines call the file (copied).
 * @env:    the cache and counters it shares; must outlive the version.
 * @walked: NULL, or where a walk of the file says how many bytes of it
 *          it has read so far (user.blockfs.walk), while it goes on.
 * @out:    on success, one reference owned by the caller.
 * Scans the file (a codec walk, or the seek table) unless @codec is NULL,
 * and measures what the scan could only guess (env->workq helps), so the
 * size is exact from the start. With env->icache, an index kept for this
 * very file version replaces the scan, and a walk worth keeping is kept.
 * Return: 0 or -errno (-ENOMEM, -EIO, -EFBIG, -ENOTSUP).
 */
BFS_MUST_CHECK int bfs_file_open(struct bfs_file **out, int fd, const struct stat *st, int side,
				 const struct bfs_codec *codec, const char *name,
				 const struct bfs_file_env *env, atomic_uint_fast64_t *walked);

/*
 * bfs_file_open() when the caller has read the whole backing file already
 * (a probe) and holds no descriptor for it: @whole, @st->st_size bytes
 * from offset 0 of the file @st describes, is consumed (freed, or kept as
 * the version's copy of a very small file). The version starts with no
 * descriptor and no use: bfs_file_use_fd() gives it one when a reader
 * needs it.
 */
BFS_MUST_CHECK int bfs_file_open_whole(struct bfs_file **out, uint8_t *whole, const struct stat *st,
				       int side, const struct bfs_codec *codec, const char *name,
				       const struct bfs_file_env *env);

static inline struct bfs_file *bfs_file_get(struct bfs_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
	return f;
}

/* Drop one reference; the last one closes and frees. NULL is a no-op. */
void bfs_file_put(struct bfs_file *f);

/*
 * bfs_file_use() - take a use of @f's descriptor if it is open, or of its
 * head: a very small file read whole when it was built, whose readers
 * need no descriptor (fd may stay -1 while they read).
 * Return: true with a use held; false if it is closed (then reopen the
 * backing file, check it is still this version, and bfs_file_use_fd()).
 */
BFS_MUST_CHECK bool bfs_file_use(struct bfs_file *f);
/* Take a use, giving @f descriptor @fd (consumed; closed if @f has one already). */
void bfs_file_use_fd(struct bfs_file *f, int fd);
/* Drop a use; the last one closes the descriptor. NULL is a no-op. */
void bfs_file_unuse(struct bfs_file *f);

/*
 * Pass @advice (enum bfs_advice) for decompressed [@off, @off + @len) of
 * @f (len 0: all of it) to the kernel's cache of its backing bytes:
 * posix_fadvise(2) on the file if its descriptor is open, madvise(2) on
 * its mapping if live. A hint, so no errors.
 */
void bfs_file_advise(struct bfs_file *f, int advice, uint64_t off, uint64_t len);

/*
 * The backing file mapped (bfs_file_map_exit() after), if @f's mapping is
 * live already or @make; NULL: read with pread. Makes, counts and logs.
 */
const uint8_t *bfs_file_map_enter(struct bfs_file *f, bool make);
void bfs_file_map_exit(struct bfs_file *f);

/*
 * A newer version of the same file is shown from now on: no push of @f's
 * bytes may reach the kernel's page cache any more, which is the new
 * version's. Returns once none is in progress, so that the caller may
 * then have the kernel drop what was pushed before (keep_cache off).
 * Context: may wait for a push in progress (one notify_store).
 */
void bfs_file_supersede(struct bfs_file *f);

/* Bytes a reader sees: the decompressed size, or the backing size. */
uint64_t bfs_file_size(const struct bfs_file *f);

/* Did the backing file change since @f was built? @now: fstat of it now. */
bool bfs_file_stale(const struct bfs_file *f, const struct stat *now);

#define BFS_READV_INLINE 8

/*
 * What a read hands to the reply: iovecs into cached blocks (or a buffer
 * of its own for files shown unchanged), and the references that keep
 * them alive until bfs_readv_release().
 */
struct bfs_readv {
	struct iovec *iov;
	size_t cnt; /* iovecs */
	struct bfs_block **blk;
	size_t nblk;		       /* block references held */
	void *own;		       /* a buffer of our own, or NULL */
	uint64_t again_from, again_to; /* BFS_READ_RANDOM: blocks it read before, or empty */
	struct iovec iov_inline[BFS_READV_INLINE];
	struct bfs_block *blk_inline[BFS_READV_INLINE];
};

/*
 * A random reader's request (not part of a sequential stream): a block it
 * has not read before and that is not cached is decoded only as far as
 * the request needs (the codec's decode of a
 * prefix), into a buffer of its own; one
 * it has read before is decoded whole and cached, and reported in
 * rv->again_* so that the caller may hand the rest of it to the kernel.
 */
#define BFS_READ_RANDOM 1u

/**
 * bfs_file_readv() - read @size bytes at @off without copying them.
 * Return: bytes described by @rv (short only at end of file), or -errno:
 * -EBADMSG or -EILSEQ when a block the range touches is corrupt (logged
 * once per block), -EIO when the backing file shrank, other -errno from
 * the I/O. Never a short count on error: the kernel would take it for end
 * of file. Call bfs_readv_release() in every case.
 * Context: any thread, concurrently on one @f; may wait for a block
 * another thread is decoding.
 */
BFS_MUST_CHECK ssize_t bfs_file_readv(struct bfs_file *f, uint64_t off, size_t size,
				      struct bfs_readv *rv, unsigned int flags);
void bfs_readv_release(struct bfs_readv *rv);
/*
 * A reader's request answered with a copy of @n bytes at @p that blockfs
 * kept aside (stream.c, a tripwire's page): counted as a read and a cache
 * hit. Return: @n, or -ENOMEM. Call bfs_readv_release() in every case.
 */
BFS_MUST_CHECK ssize_t bfs_file_readv_copy(struct bfs_file *f, const void *p, size_t n,
					   struct bfs_readv *rv);
/*
 * A reader that goes only forward: the blocks decoded for it are read
 * once, from the page cache, so they are not also kept in the spill
 * (unit.c).
 */
#define BFS_READ_ONCE 2u
/*
 * bfs_file_readv() for blockfs itself (decoding ahead): not counted as a
 * reader's request. @once: NULL, or a flag looked at as each block is
 * decoded: true when its reader reads it once (BFS_READ_ONCE).
 */
BFS_MUST_CHECK ssize_t bfs_file_peekv(struct bfs_file *f, uint64_t off, size_t size,
				      struct bfs_readv *rv, const atomic_bool *once);

/*
 * bfs_file_let_go() - @f's cached blocks in [@from, @to) are wanted no more:
 * the one call the stream and the pushes let go of blocks with (read.c).
 * Chained blocks stay (a late READ of one would cost its chain from the
 * start). BFS_LET_GO_READ: a reader has read past them: the blocks that
 * end by @to are dropped, from the one holding @from on; the one it is
 * still in stays. Else (a push): the blocks wholly inside [@from, @to)
 * and outside [@hole, @hole_to) are dropped, the others only demoted (they
 * go first when room is needed), all of them with BFS_LET_GO_KEEP.
 */
#define BFS_LET_GO_READ 1u
#define BFS_LET_GO_KEEP 2u
void bfs_file_let_go(struct bfs_file *f, uint64_t from, uint64_t to, uint64_t hole,
		     uint64_t hole_to, unsigned int how);

/*
 * The block holding decoded byte @off: true with its *@start and *@len,
 * false when @off is not in a block yet known exactly (file.c).
 */
bool bfs_file_block_at(const struct bfs_file *f, uint64_t off, uint64_t *start, uint64_t *len);
/* Does the block holding @off decode only by going on from the one before it (a span)? */
bool bfs_file_block_chained(const struct bfs_file *f, uint64_t off);
/* The largest decoded block of @f, and the block size its format declares (0: none). */
uint32_t bfs_file_block_max(const struct bfs_file *f);
uint32_t bfs_file_block_size(const struct bfs_file *f);

/*
 * Drop the cached blocks of @f covering [@off, @off + @len) (dontneed);
 * readers holding them keep their copies.
 */
void bfs_file_drop_range(struct bfs_file *f, uint64_t off, uint64_t len);

/* bfs_file_readv() into @buf (a copy), for tools and tests. */
BFS_MUST_CHECK ssize_t bfs_file_read(struct bfs_file *f, void *buf, size_t size, uint64_t off);

#endif
